// Per-head q/k RMSNorm, NeoX rotate-half RoPE and the K/V write into the paged cache, fused: one
// warp per head vector. Two layouts: one block per row whose 8 warps loop over the row's vectors
// (the first kernel: few blocks at few rows), or one warp per (row, vector) pair over
// rows x vectors / 8 blocks (kWarpPerVector); for bf16 with head_dim 128 the warp-per-vector
// layout runs qk_norm_rope_vec_kernel, whose lanes hold 4 consecutive dimensions each (float4
// loads, the rotate-half partner one shuffle away) and round every product as the others do.

#include <cuda_bf16.h>

#include <string>

#include "cuda_check.h"
#include "device_utils.cuh"
#include "dice/core/error.h"
#include "launch.cuh"
#include "ops.h"
#include "qk_norm_rope.cuh"
#include "rms_norm.cuh"

namespace dice::engine::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kMaxHeadDim = 256;

template <typename T, typename Acc, bool kWarpPerVector>
__global__ void qk_norm_rope_kernel(const PassHeader* meta, const float* qkv, const float* q_norm,
                                    const float* k_norm, const float2* rope, LayerShape shape,
                                    T* q_out, T* k_cache, T* v_cache) {
  wait_for_prior_grid();
  allow_next_grid();
  __shared__ float buffer[kWarps][kMaxHeadDim];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int32_t d_head = shape.head_dim, half = d_head / 2;
  const std::int32_t vectors = shape.heads + 2 * shape.kv_heads;
  const std::int64_t global_warp = static_cast<std::int64_t>(blockIdx.x) * kWarps + warp;
  const auto row = static_cast<std::int32_t>(kWarpPerVector ? global_warp / vectors : blockIdx.x);
  if (row >= meta->rows) return;
  const RowInfo info = pass_section<RowInfo>(meta, meta->rows_offset)[row];
  const float* src = qkv + static_cast<std::int64_t>(row) * vectors * d_head;
  float* buf = buffer[warp];
  const std::int32_t v_first =
      kWarpPerVector ? static_cast<std::int32_t>(global_warp % vectors) : warp;
  const std::int32_t v_step = kWarpPerVector ? vectors : kWarps;
  for (std::int32_t v = v_first; v < vectors; v += v_step) {
    const float* h = src + static_cast<std::int64_t>(v) * d_head;
    const bool is_q = v < shape.heads;
    const bool is_k = !is_q && v < shape.heads + shape.kv_heads;
    T* dst = qk_head_destination(shape, info, row, v, q_out, k_cache, v_cache);
    if (!is_q && !is_k) {  // V: as projected
      for (std::int32_t d = lane; d < d_head; d += 32) dst[d] = from_float<T>(h[d]);
      continue;
    }
    Acc sum = 0;
    for (std::int32_t d = lane; d < d_head; d += 32) {
      const Acc x = h[d];
      sum += x * x;
    }
    sum = warp_sum(sum);
    const auto scale = static_cast<float>(
        Acc(1) / sqrt(sum / static_cast<Acc>(d_head) + static_cast<Acc>(shape.eps)));
    const float* weight = is_q ? q_norm : k_norm;
    for (std::int32_t d = lane; d < d_head; d += 32)
      buf[d] = __fmul_rn(weight[d], __fmul_rn(h[d], scale));
    __syncwarp();
    // Rotate-half: (x_i, x_{i+half}) by angle position * inv_freq_i; no FMA contraction, so fp32
    // results round as the CPU reference's do.
    const float2* cs = rope + static_cast<std::int64_t>(info.position) * half;
    for (std::int32_t d = lane; d < d_head; d += 32) {
      const std::int32_t i = d < half ? d : d - half;
      const float2 c = cs[i];
      const float x1 = buf[i], x2 = buf[i + half];
      const float out = d < half ? __fsub_rn(__fmul_rn(x1, c.x), __fmul_rn(x2, c.y))
                                 : __fadd_rn(__fmul_rn(x2, c.x), __fmul_rn(x1, c.y));
      dst[d] = from_float<T>(out);
    }
    __syncwarp();  // buf is reused by the warp's next vector
  }
}

/// bf16, head_dim 128, one warp per (row, vector): lane l holds dimensions 4l..4l+3, so the
/// rotate-half partner of lane l (dimension d +- 64) is lane l ^ 16. The sum of squares runs
/// in float (4 per lane, then the warp); the products round as in qk_norm_rope_kernel.
__global__ void qk_norm_rope_vec_kernel(const PassHeader* meta, const float* qkv,
                                        const float* q_norm, const float* k_norm,
                                        const float2* rope, LayerShape shape, __nv_bfloat16* q_out,
                                        __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
                                        const float* square_sums, std::int32_t fold_width,
                                        bool early_reads) {
  // With early_reads, the row's metadata (uploaded before the pass's first kernel), its RoPE
  // pairs and the norm weight (model constants) are read before the wait, the projection and the
  // folded norm's sums after it (launch.cuh, "Early start"). A V vector has no RoPE pairs or
  // norm weight to read.
  if (!early_reads) wait_for_prior_grid();
  constexpr int kDim = kQkHeadDim;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int32_t vectors = shape.heads + 2 * shape.kv_heads;
  const std::int64_t global_warp = static_cast<std::int64_t>(blockIdx.x) * kWarps + warp;
  const auto row = static_cast<std::int32_t>(global_warp / vectors);
  if (row >= meta->rows) {
    if (early_reads) wait_for_prior_grid();  // no exit before the predecessor completes
    return;
  }
  const auto v = static_cast<std::int32_t>(global_warp % vectors);
  const RowInfo info = pass_section<RowInfo>(meta, meta->rows_offset)[row];
  const bool is_q = v < shape.heads;
  const bool is_k = !is_q && v < shape.heads + shape.kv_heads;
  float4 w = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float2 cs[4] = {};
  if (is_q || is_k) {
    w = reinterpret_cast<const float4*>(is_q ? q_norm : k_norm)[lane];
    qk_rope_pairs(rope, info.position, lane, cs);
  }
  if (early_reads) wait_for_prior_grid();
  allow_next_grid();
  const float4 x = reinterpret_cast<const float4*>(
      qkv + (static_cast<std::int64_t>(row) * vectors + v) * kDim)[lane];
  __nv_bfloat16* dst = qk_head_destination(shape, info, row, v, q_out, k_cache, v_cache);
  // The folded input norm (launch_qk_norm_rope): qkv projects bf16(w x), r^2 times too large in
  // q's and k's mean squares; the q/k norm divides it out with eps r^2, V takes 1 / r. Lane l
  // adds the row's sums l, l + 32, ...; then the warp's fixed tree (every warp of the row alike).
  const bool folded = square_sums != nullptr;
  const float eps = static_cast<float>(shape.eps);
  const float r2 =
      folded ? qk_fold_r2(qk_fold_part(square_sums, row, fold_width, lane), fold_width, eps) : 1.0f;
  const float4 o = qk_vector_out(x, is_q || is_k, w, cs, folded, r2, eps, lane);
  store4(dst + 4 * lane, o.x, o.y, o.z, o.w);
}

}  // namespace

void launch_qk_norm_rope(CudaDType dtype, const PassHeader* meta, const float* qkv,
                         const float* q_norm, const float* k_norm, const float2* rope,
                         const LayerShape& shape, void* q_out, CacheLayer cache,
                         std::int32_t rows_pad, cudaStream_t stream, bool warp_per_vector, bool pdl,
                         const float* square_sums, std::int32_t fold_width, bool early_reads) {
  if (rows_pad <= 0) return;
  if (square_sums != nullptr &&
      (!warp_per_vector || dtype != CudaDType::kBF16 || shape.head_dim != 128 || fold_width <= 0 ||
       fold_width % kFoldColumns != 0))
    throw Error(
        "q/k norm + RoPE with a folded input norm: needs bf16, head_dim 128, the "
        "warp-per-vector layout and a width that 64 divides (head_dim " +
        std::to_string(shape.head_dim) + ", width " + std::to_string(fold_width) + ")");
  auto* bq = static_cast<__nv_bfloat16*>(q_out);
  auto* bk = static_cast<__nv_bfloat16*>(cache.k);
  auto* bv = static_cast<__nv_bfloat16*>(cache.v);
  auto* fq = static_cast<float*>(q_out);
  auto* fk = static_cast<float*>(cache.k);
  auto* fv = static_cast<float*>(cache.v);
  const char* name = "qk_norm_rope_kernel";
  if (warp_per_vector) {
    const std::int64_t warps =
        static_cast<std::int64_t>(rows_pad) * (shape.heads + 2 * shape.kv_heads);
    const auto grid = static_cast<unsigned>((warps + kWarps - 1) / kWarps);
    if (dtype == CudaDType::kBF16 && shape.head_dim == 128)
      launch_kernel("qk_norm_rope_vec_kernel", qk_norm_rope_vec_kernel, grid, kWarps * 32, 0,
                    stream, pdl, meta, qkv, q_norm, k_norm, rope, shape, bq, bk, bv, square_sums,
                    fold_width, pdl && early_reads);
    else if (dtype == CudaDType::kBF16)
      launch_kernel(name, qk_norm_rope_kernel<__nv_bfloat16, float, true>, grid, kWarps * 32, 0,
                    stream, pdl, meta, qkv, q_norm, k_norm, rope, shape, bq, bk, bv);
    else
      launch_kernel(name, qk_norm_rope_kernel<float, double, true>, grid, kWarps * 32, 0, stream,
                    pdl, meta, qkv, q_norm, k_norm, rope, shape, fq, fk, fv);
  } else if (dtype == CudaDType::kBF16) {
    launch_kernel(name, qk_norm_rope_kernel<__nv_bfloat16, double, false>,
                  static_cast<unsigned>(rows_pad), kWarps * 32, 0, stream, pdl, meta, qkv, q_norm,
                  k_norm, rope, shape, bq, bk, bv);
  } else {
    launch_kernel(name, qk_norm_rope_kernel<float, double, false>, static_cast<unsigned>(rows_pad),
                  kWarps * 32, 0, stream, pdl, meta, qkv, q_norm, k_norm, rope, shape, fq, fk, fv);
  }
}

}  // namespace dice::engine::cuda
