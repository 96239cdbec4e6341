#pragma once
// The fp32 arithmetic of RMSNorm into bf16 (Zhang & Sennrich 2019: y = w x / sqrt(mean(x^2) +
// eps)), shared by rms_norm_vec_kernel and the fused norm prologues of the skinny and the
// streaming GEMMs (skinny_gemm.h, stream_gemm.h; normalise_rows below) so that all give the same
// bits: every operation is an explicitly rounded intrinsic, so the compiler cannot contract a
// multiply and an add into an FMA in one kernel and not in the other. The thread-to-element layout
// and the block reduction must match as well: thread i of a 256-thread block sums the float4s i, i
// + 256, ... of the row in that order, then block_sum (device_utils.cuh) adds the threads' sums.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "device_utils.cuh"
#include "norm_fold.h"

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

/// The folded RMSNorm's row statistic mean(x^2) + eps (norm_fold.h) from the sum of the row's
/// sums of squares (each reader adds the width / kFoldColumns sums in its own fixed order: the
/// wgmma SwiGLU epilogue, the q/k norm kernel), rounded operations.
__device__ __forceinline__ float folded_mean_square(float total, std::int32_t width, float eps) {
  return __fadd_rn(__fdiv_rn(total, static_cast<float>(width)), eps);
}

/// float4s of a row per thread in normalise_rows (as rms_norm_vec_kernel's kVec): in <= 4,096.
inline constexpr int kNormVec = 4;
/// Most rows normalise_rows takes.
inline constexpr int kNormRowsLimit = 16;

/// A thread's share of the norm weight in normalise_rows' layout: float4s t, t + 256, ... of it.
struct NormWeight {
  float4 v[kNormVec];
};

/// Thread t's NormWeight (t = threadIdx.x < 256) of weight (fp32 [in], 16-byte aligned, in % 4 ==
/// 0). Model weights do not change during a forward, so a kernel may load it before its
/// programmatic wait (launch.cuh, "Early start").
__device__ __forceinline__ NormWeight load_norm_weight(const float* weight, std::int32_t in) {
  NormWeight w;
  const auto* w4 = reinterpret_cast<const float4*>(weight);
#pragma unroll
  for (int k = 0; k < kNormVec; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * 256;
    w.v[k] = i < in / 4 ? __ldg(w4 + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  return w;
}

/// Warps of normalise_rows (its 256 threads).
inline constexpr int kNormaliseRowsWarps = 8;
/// Static shared memory normalise_rows declares (bytes): its per-warp sums and per-row scales.
inline constexpr std::size_t kNormaliseRowsStaticBytes =
    sizeof(float) * kNormRowsLimit * (kNormaliseRowsWarps + 1);

/// Writes RMSNorm(residual rows) as bf16 into `normed` ([rows][in + 8], shared memory), run by the
/// 256 threads 0-255 of a block with their NormWeight (load_norm_weight): their sums of squares in
/// rms_norm_vec_kernel's layout and block_sum's order (warp_sum, then sum_of_warps), then every
/// element, so the same bits as that kernel's output. Four rows at a time, each thread's elements
/// held in registers between the sum and the scaling: one read of the rows. `sync()` is a
/// barrier over exactly those 256 threads (__syncthreads() when they are the block). residual:
/// fp32 [rows, in], 16-byte aligned. rows <= kNormRowsLimit, in % 4 == 0, in <= 4 * kNormVec *
/// 256. Reads residual through the read-only path: it must not change during the calling kernel.
template <typename Sync>
__device__ __forceinline__ void normalise_rows(const float* residual, const NormWeight& weight,
                                               float eps, std::int32_t rows, std::int32_t in,
                                               __nv_bfloat16* normed, Sync sync) {
  constexpr int kWarps = kNormaliseRowsWarps;
  __shared__ float scratch[kNormRowsLimit][kWarps];
  __shared__ float scale[kNormRowsLimit];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int n4 = in / 4;
  const std::int32_t stride = in + 8;
  for (std::int32_t r0 = 0; r0 < rows; r0 += 4) {  // four rows' loads in flight at a time
    float4 v[4][kNormVec];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const auto* src = reinterpret_cast<const float4*>(residual + (r0 + r) * in);
#pragma unroll
      for (int k = 0; k < kNormVec; ++k) {
        const int i = static_cast<int>(threadIdx.x) + k * 256;
        if (r0 + r < rows && i < n4) v[r][k] = __ldg(src + i);
      }
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < kNormVec; ++k) {
        const int i = static_cast<int>(threadIdx.x) + k * 256;
        if (r0 + r < rows && i < n4) sum = add_squares(sum, v[r][k]);
      }
      sum = warp_sum(sum);
      if (lane == 0 && r0 + r < rows) scratch[r0 + r][warp] = sum;
    }
    sync();
    if (warp == 0)
      for (std::int32_t r = r0; r < min(rows, r0 + 4); ++r) {
        const float total = sum_of_warps(scratch[r], kWarps);
        if (lane == 0) scale[r] = rms_scale(total, in, eps);
      }
    sync();
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      if (r0 + r >= rows) break;
      const float sc = scale[r0 + r];
#pragma unroll
      for (int k = 0; k < kNormVec; ++k) {
        const int i = static_cast<int>(threadIdx.x) + k * 256;
        const float4 x = v[r][k], w = weight.v[k];
        if (i < n4)
          store4(normed + (r0 + r) * stride + 4 * i, rms_apply(w.x, x.x, sc),
                 rms_apply(w.y, x.y, sc), rms_apply(w.z, x.z, sc), rms_apply(w.w, x.w, sc));
      }
    }
  }
  sync();
}

}  // namespace dice::engine::cuda
