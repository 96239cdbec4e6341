#pragma once
// The fp32 arithmetic of SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer": silu(gate) *
// up), shared by the SwiGLU kernels (swiglu.cu) and the skinny GEMM's SwiGLU epilogue
// (skinny_gemm.h) so that both give the same bits. The gate/up projection's output columns
// alternate gate and up (column 2i: gate i, 2i + 1: up i; the backend uploads the two weight
// matrices with their rows interleaved so), so that one GEMM block owns both halves of a pair.

#include <cuda_runtime.h>

namespace dice::engine::cuda {

/// silu(g) * u in fp32, rounded as the CPU reference (no fast-math exp, no FMA contraction).
__device__ __forceinline__ float silu_times(float g, float u) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

}  // namespace dice::engine::cuda
