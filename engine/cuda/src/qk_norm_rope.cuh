#pragma once
// The bf16, head_dim 128 q/k norm + RoPE of one head vector of one row by one warp: shared by
// qk_norm_rope_vec_kernel and the qkv projection's fused epilogue (skinny_gemm.cu,
// SkinnyQkNorm), so that the two give the same bits.

#include <cuda_bf16.h>

#include <cstdint>

#include "device_utils.cuh"
#include "ops.h"

namespace dice::engine::cuda {

/// Where head vector v (q heads, then k heads, then v heads) of pass row `row` goes: q_out
/// [rows, heads, head_dim] for a q head, else the row's cache slot (page, kv head, slot) of the
/// K or V cache [pages, kv_heads, kPageTokens, head_dim].
template <typename T>
__device__ __forceinline__ T* head_destination(const LayerShape& shape, const RowInfo& info,
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

/// One warp: head vector v of pass row `row` (x: this lane's 4 dimensions 4l..4l+3 of it, fp32
/// from the qkv projection; info: the row's RowInfo) normalised with q_norm or k_norm
/// [128] and rotated (NeoX rotate-half at info.position, `rope` (cos, sin) [positions, 64]),
/// written as bf16 to q_out or the K cache; a V vector is written to the V cache as projected.
/// The sum of squares runs in float (4 per lane, then warp_sum); every product rounds without
/// FMA contraction, as the CPU reference's do. The rotate-half partner of lane l is lane l ^ 16.
__device__ __forceinline__ void qk_norm_rope_vector128(const float4 x, const RowInfo& info,
                                                       std::int32_t row, std::int32_t v,
                                                       const float* q_norm, const float* k_norm,
                                                       const float2* rope, const LayerShape& shape,
                                                       __nv_bfloat16* q_out, __nv_bfloat16* k_cache,
                                                       __nv_bfloat16* v_cache) {
  constexpr int kDim = 128, kHalf = 64;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const bool is_q = v < shape.heads;
  const bool is_k = !is_q && v < shape.heads + shape.kv_heads;
  __nv_bfloat16* dst = head_destination(shape, info, row, v, q_out, k_cache, v_cache) + 4 * lane;
  if (!is_q && !is_k) {  // V: as projected
    store4(dst, x.x, x.y, x.z, x.w);
    return;
  }
  const float sum = warp_sum(x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w);
  const float scale = 1.0f / sqrtf(sum / static_cast<float>(kDim) + static_cast<float>(shape.eps));
  const float4 w = reinterpret_cast<const float4*>(is_q ? q_norm : k_norm)[lane];
  const float own[4] = {
      __fmul_rn(w.x, __fmul_rn(x.x, scale)), __fmul_rn(w.y, __fmul_rn(x.y, scale)),
      __fmul_rn(w.z, __fmul_rn(x.z, scale)), __fmul_rn(w.w, __fmul_rn(x.w, scale))};
  float other[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) other[j] = __shfl_xor_sync(0xffffffffu, own[j], 16);
  const bool first = lane < 16;  // dimensions below kHalf
  const float2* cs = rope + static_cast<std::int64_t>(info.position) * kHalf + 4 * (lane & 15);
  float out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 c = cs[j];
    // first half: x_i c - x_{i+half} s; second half: x_{i+half} c + x_i s (no FMA contraction).
    out[j] = first ? __fsub_rn(__fmul_rn(own[j], c.x), __fmul_rn(other[j], c.y))
                   : __fadd_rn(__fmul_rn(own[j], c.x), __fmul_rn(other[j], c.y));
  }
  store4(dst, out[0], out[1], out[2], out[3]);
}

}  // namespace dice::engine::cuda
