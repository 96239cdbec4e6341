#pragma once
// The fp32 arithmetic of RMSNorm into bf16 (Zhang & Sennrich 2019: y = w x / sqrt(mean(x^2) +
// eps)), shared by rms_norm_vec_kernel and the skinny GEMM's fused norm prologue
// (skinny_gemm.h) so that both give the same bits: every operation is an explicitly rounded
// intrinsic, so the compiler cannot contract a multiply and an add into an FMA in one kernel and
// not in the other. The thread-to-element layout and the block reduction must match as well:
// thread i of a 256-thread block sums the float4s i, i + 256, ... of the row in that order, then
// block_sum (device_utils.cuh) adds the threads' sums.

#include <cuda_runtime.h>

#include <cstdint>

namespace dice::engine::cuda {

/// sum + (((x^2 + y^2) + z^2) + w^2), each operation rounded to nearest.
__device__ __forceinline__ float add_squares(float sum, float4 v) {
  const float s =
      __fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(v.x, v.x), __fmul_rn(v.y, v.y)), __fmul_rn(v.z, v.z)),
                __fmul_rn(v.w, v.w));
  return __fadd_rn(sum, s);
}

/// The row's scale 1 / sqrt(sum / hidden + eps) from its sum of squares, rounded operations.
__device__ __forceinline__ float rms_scale(float sum, std::int32_t hidden, float eps) {
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sum, static_cast<float>(hidden)), eps)));
}

/// One normalised element before its rounding to bf16: weight * (x * scale).
__device__ __forceinline__ float rms_apply(float weight, float x, float scale) {
  return __fmul_rn(weight, __fmul_rn(x, scale));
}

}  // namespace dice::engine::cuda
