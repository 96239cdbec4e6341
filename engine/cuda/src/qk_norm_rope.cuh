#pragma once
// The per-lane arithmetic of the q/k RMSNorm, NeoX rotate-half RoPE and the folded input norm's
// V scale at head_dim 128 in bf16 (one warp per head vector, lane l holding dimensions
// 4l..4l+3), shared by qk_norm_rope_vec_kernel and the deep attention kernel that applies them
// itself (attention.cu, QkNormRope), so that both give the same bits: every operation is an
// explicitly rounded intrinsic (no FMA contraction that could differ between the two kernels),
// and the warp's sums run in the same fixed tree (warp_sum).

#include <cuda_runtime.h>

#include <cstdint>

#include "device_utils.cuh"
#include "rms_norm.cuh"

namespace dice::engine::cuda {

/// Head dimension of the lane layout below (4 dimensions a lane, 32 lanes).
inline constexpr int kQkLaneDim = 128;

/// Warp-collective: the folded input norm's r^2 (mean(x^2) + eps of the row; norm_fold.h) from
/// `part`, this lane's sum of the row's square sums l, l + 32, ... (added in that order, from
/// 0). Every lane gets the same value.
__device__ __forceinline__ float qk_fold_r2(float part, std::int32_t fold_width, float eps) {
  return folded_mean_square(warp_sum(part), fold_width, eps);
}

/// Warp-collective: this lane's 4 dimensions of RoPE(w * x / sqrt(mean(x^2) + eps)) for a head
/// vector x (this lane's float4 of it) with norm weight w (the lane's float4), `cs` the row's
/// (cos, sin) pairs 4 (l % 16) .. 4 (l % 16) + 3 of its position. `eps`: the norm's, times r^2
/// for a folded input norm. The rotate-half partner of lane l is lane l ^ 16.
__device__ __forceinline__ float4 qk_norm_rope_lane(float4 x, float4 w, const float2 (&cs)[4],
                                                    float eps, int lane) {
  const float sum = warp_sum(add_squares(0.0f, x));
  const float scale = rms_scale(sum, kQkLaneDim, eps);
  const float own[4] = {rms_apply(w.x, x.x, scale), rms_apply(w.y, x.y, scale),
                        rms_apply(w.z, x.z, scale), rms_apply(w.w, x.w, scale)};
  float other[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) other[j] = __shfl_xor_sync(0xffffffffu, own[j], 16);
  const bool first = lane < 16;  // dimensions below kQkLaneDim / 2
  float out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    // first half: x_i c - x_{i+half} s; second half: x_{i+half} c + x_i s.
    out[j] = first ? __fsub_rn(__fmul_rn(own[j], cs[j].x), __fmul_rn(other[j], cs[j].y))
                   : __fadd_rn(__fmul_rn(own[j], cs[j].x), __fmul_rn(other[j], cs[j].y));
  }
  return make_float4(out[0], out[1], out[2], out[3]);
}

/// This lane's 4 dimensions of V: as projected, or times 1 / r for a folded input norm (r2 its
/// qk_fold_r2).
__device__ __forceinline__ float4 qk_value_lane(float4 x, float r2, bool folded) {
  if (!folded) return x;
  const float inv_r = __fdiv_rn(1.0f, __fsqrt_rn(r2));
  return make_float4(__fmul_rn(x.x, inv_r), __fmul_rn(x.y, inv_r), __fmul_rn(x.z, inv_r),
                     __fmul_rn(x.w, inv_r));
}

/// The (cos, sin) pairs qk_norm_rope_lane takes for `lane` at `position` from the RoPE table
/// (cos, sin) [max_position, 64].
__device__ __forceinline__ void qk_rope_pairs(const float2* rope, std::int32_t position, int lane,
                                              float2 (&cs)[4]) {
  const float2* row =
      rope + static_cast<std::int64_t>(position) * (kQkLaneDim / 2) + 4 * (lane & 15);
#pragma unroll
  for (int j = 0; j < 4; ++j) cs[j] = row[j];
}

}  // namespace dice::engine::cuda
