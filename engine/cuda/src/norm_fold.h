#pragma once
// The folded RMSNorm (CudaBackendOptions::fold_qkv_norm and fold_mlp_norm; RMSNorm: Zhang &
// Sennrich 2019). A pre-norm
// layer's RMSNorm(x) = w * x / r, r = sqrt(mean(x^2) + eps) per row, feeds a linear projection, so
// the 1 / r can be applied after it. The GEMM that writes x (the o and down projections, on the
// wgmma kernel) also writes bf16(w * x) and the row's sums of squares per kFoldColumns columns;
// the projection's reader applies 1 / r from those sums (the SwiGLU epilogue of gate/up, the q/k
// norm kernel after qkv), and the norm kernel and its read of x go.

namespace dice::engine::cuda {

/// Columns one square sum of the folded RMSNorm covers: a row of width `w` has w / kFoldColumns
/// of them (WgmmaNormFold, folded_mean_square in rms_norm.cuh).
inline constexpr int kFoldColumns = 64;

}  // namespace dice::engine::cuda
