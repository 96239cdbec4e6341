#pragma once
// The per-lane arithmetic of the q/k RMSNorm + NeoX rotate-half RoPE for bf16 head vectors of 128
// dimensions, one warp per vector, lane l holding dimensions 4l..4l+3 (so the rotate-half partner
// of lane l is lane l ^ 16). Shared by qk_norm_rope_vec_kernel (qk_norm_rope.cu) and the wgmma
// GEMM's q/k epilogue (wgmma_gemm.h, WgmmaQkRope), so that both give the same bits: the same
// expressions in the same order, compiled with the same flags.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "device_utils.cuh"
#include "norm_fold.h"
#include "ops.h"
#include "rms_norm.cuh"

namespace dice::engine::cuda {

/// Where head vector v (q heads, then k heads, then v heads) of pass row `row` goes: q_out
/// [rows, heads, head_dim] for a q head, else the row's cache slot (page, kv head, slot) of the
/// K or V cache [pages, kv_heads, kPageTokens, head_dim].
template <typename T>
__device__ __forceinline__ T* qk_head_destination(const LayerShape& shape, const RowInfo& info,
                                                  std::int32_t row, std::int32_t v, T* q_out,
                                                  T* k_cache, T* v_cache) {
  if (v < shape.heads)
    return q_out + (static_cast<std::int64_t>(row) * shape.heads + v) * shape.head_dim;
  const bool is_k = v < shape.heads + shape.kv_heads;
  const std::int32_t kv_head = is_k ? v - shape.heads : v - shape.heads - shape.kv_heads;
  return (is_k ? k_cache : v_cache) +
         ((static_cast<std::int64_t>(info.page) * shape.kv_heads + kv_head) * kPageTokens +
          info.slot) *
             shape.head_dim;
}

/// The (cos, sin) pairs lane `lane` rotates with at `position` from rope [positions, 64]: those of
/// dimensions 4 (lane % 16) + j, j < 4.
__device__ __forceinline__ void qk_rope_pairs(const float2* rope, std::int32_t position, int lane,
                                              float2 (&cs)[4]) {
  const float2* pairs =
      rope + static_cast<std::int64_t>(position) * (kQkHeadDim / 2) + 4 * (lane & 15);
#pragma unroll
  for (int j = 0; j < 4; ++j) cs[j] = pairs[j];
}

/// Lane `lane`'s part of a row's folded-norm sum (norm_fold.h): the row's square sums [fold_width
/// / kFoldColumns] at lane, lane + 32, ... added in order. qk_fold_r2 finishes it.
__device__ __forceinline__ float qk_fold_part(const float* square_sums, std::int32_t row,
                                              std::int32_t fold_width, int lane) {
  const std::int32_t parts = fold_width / kFoldColumns;
  const float* sums = square_sums + static_cast<std::int64_t>(row) * parts;
  float part = 0.0f;
  for (std::int32_t p = lane; p < parts; p += 32) part = __fadd_rn(part, sums[p]);
  return part;
}

/// Square sums a lane holds for qk_fold_part_of: fold_width at most 64 x 64.
inline constexpr int kQkFoldRaw = 2;

/// Lane `lane`'s square sums of the row (those qk_fold_part adds: lane and lane + 32), loaded
/// without being added, so that a kernel can load them early and add them later (qk_fold_part_of);
/// fold_width at most 4,096. Entries past the row's sums are 0 and never added.
__device__ __forceinline__ void qk_fold_raw(const float* square_sums, std::int32_t row,
                                            std::int32_t fold_width, int lane,
                                            float (&raw)[kQkFoldRaw]) {
  const std::int32_t parts = fold_width / kFoldColumns;
  const float* sums = square_sums + static_cast<std::int64_t>(row) * parts;
#pragma unroll
  for (int i = 0; i < kQkFoldRaw; ++i) raw[i] = lane + 32 * i < parts ? sums[lane + 32 * i] : 0.0f;
}

/// qk_fold_part from qk_fold_raw's loads: the same additions in the same order (the same bits).
__device__ __forceinline__ float qk_fold_part_of(const float (&raw)[kQkFoldRaw],
                                                 std::int32_t fold_width, int lane) {
  const std::int32_t parts = fold_width / kFoldColumns;
  float part = 0.0f;
#pragma unroll
  for (int i = 0; i < kQkFoldRaw; ++i)
    if (lane + 32 * i < parts) part = __fadd_rn(part, raw[i]);
  return part;
}

/// The folded input norm's r^2 = mean(x^2) + eps of the row from its lanes' parts (warp-wide: the
/// warp's fixed tree).
__device__ __forceinline__ float qk_fold_r2(float part, std::int32_t fold_width, float eps) {
  return folded_mean_square(warp_sum(part), fold_width, eps);
}

/// Lane `lane`'s 4 outputs (fp32, before the bf16 rounding) of one head vector from its 4
/// dimensions `x` (fp32, as projected). `rotate` (a q or k vector; warp-uniform): RMSNorm over the
/// warp's 128 dimensions with weight `w` (the lane's 4) and epsilon eps, or eps r2 with `folded`,
/// then rotate-half RoPE with the lane's pairs `cs`. Else (V): as projected, times 1 / sqrt(r2)
/// with `folded`. Warp-collective for q and k (every lane of the warp calls it).
__device__ __forceinline__ float4 qk_vector_out(float4 x, bool rotate, float4 w,
                                                const float2 (&cs)[4], bool folded, float r2,
                                                float eps, int lane) {
  if (!rotate) {  // V: as projected
    if (!folded) return x;
    const float inv_r = __fdiv_rn(1.0f, __fsqrt_rn(r2));
    return make_float4(__fmul_rn(x.x, inv_r), __fmul_rn(x.y, inv_r), __fmul_rn(x.z, inv_r),
                       __fmul_rn(x.w, inv_r));
  }
  const float sum = warp_sum(x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w);
  const float e = folded ? __fmul_rn(eps, r2) : eps;
  const float scale = 1.0f / sqrtf(sum / static_cast<float>(kQkHeadDim) + e);
  const float own[4] = {
      __fmul_rn(w.x, __fmul_rn(x.x, scale)), __fmul_rn(w.y, __fmul_rn(x.y, scale)),
      __fmul_rn(w.z, __fmul_rn(x.z, scale)), __fmul_rn(w.w, __fmul_rn(x.w, scale))};
  float other[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) other[j] = __shfl_xor_sync(0xffffffffu, own[j], 16);
  const bool first = lane < 16;  // dimensions below 64
  float out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 c = cs[j];
    // first half: x_i c - x_{i+half} s; second half: x_{i+half} c + x_i s (no FMA contraction).
    out[j] = first ? __fsub_rn(__fmul_rn(own[j], c.x), __fmul_rn(other[j], c.y))
                   : __fadd_rn(__fmul_rn(own[j], c.x), __fmul_rn(other[j], c.y));
  }
  return make_float4(out[0], out[1], out[2], out[3]);
}

}  // namespace dice::engine::cuda
