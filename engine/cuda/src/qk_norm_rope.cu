// Per-head q/k RMSNorm, NeoX rotate-half RoPE and the K/V write into the paged cache, fused: one
// block per row, one warp per head vector.

#include <cuda_bf16.h>

#include "cuda_check.h"
#include "device_utils.cuh"
#include "ops.h"

namespace dice::engine::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kMaxHeadDim = 256;

template <typename T>
__global__ void qk_norm_rope_kernel(const PassHeader* meta, const float* qkv, const float* q_norm,
                                    const float* k_norm, const float2* rope, LayerShape shape,
                                    T* q_out, T* k_cache, T* v_cache) {
  __shared__ float buffer[kWarps][kMaxHeadDim];
  const std::int32_t row = blockIdx.x;
  if (row >= meta->rows) return;
  const RowInfo info = pass_section<RowInfo>(meta, meta->rows_offset)[row];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int32_t d_head = shape.head_dim, half = d_head / 2;
  const std::int32_t vectors = shape.heads + 2 * shape.kv_heads;
  const float* src = qkv + static_cast<std::int64_t>(row) * vectors * d_head;
  float* buf = buffer[warp];
  for (std::int32_t v = warp; v < vectors; v += kWarps) {
    const float* h = src + static_cast<std::int64_t>(v) * d_head;
    const bool is_q = v < shape.heads;
    const bool is_k = !is_q && v < shape.heads + shape.kv_heads;
    T* dst;
    if (is_q) {
      dst = q_out + (static_cast<std::int64_t>(row) * shape.heads + v) * d_head;
    } else {
      const std::int32_t kv_head = is_k ? v - shape.heads : v - shape.heads - shape.kv_heads;
      const std::int64_t offset =
          ((static_cast<std::int64_t>(info.page) * shape.kv_heads + kv_head) * kPageTokens +
           info.slot) *
          d_head;
      dst = (is_k ? k_cache : v_cache) + offset;
    }
    if (!is_q && !is_k) {  // V: as projected
      for (std::int32_t d = lane; d < d_head; d += 32) dst[d] = from_float<T>(h[d]);
      continue;
    }
    double sum = 0;
    for (std::int32_t d = lane; d < d_head; d += 32) {
      const double x = h[d];
      sum += x * x;
    }
    sum = warp_sum(sum);
    const auto scale = static_cast<float>(1.0 / sqrt(sum / d_head + shape.eps));
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

}  // namespace

void launch_qk_norm_rope(CudaDType dtype, const PassHeader* meta, const float* qkv,
                         const float* q_norm, const float* k_norm, const float2* rope,
                         const LayerShape& shape, void* q_out, CacheLayer cache,
                         std::int32_t rows_pad, cudaStream_t stream) {
  if (rows_pad <= 0) return;
  if (dtype == CudaDType::kBF16)
    qk_norm_rope_kernel<<<rows_pad, kWarps * 32, 0, stream>>>(
        meta, qkv, q_norm, k_norm, rope, shape, static_cast<__nv_bfloat16*>(q_out),
        static_cast<__nv_bfloat16*>(cache.k), static_cast<__nv_bfloat16*>(cache.v));
  else
    qk_norm_rope_kernel<<<rows_pad, kWarps * 32, 0, stream>>>(
        meta, qkv, q_norm, k_norm, rope, shape, static_cast<float*>(q_out),
        static_cast<float*>(cache.k), static_cast<float*>(cache.v));
  DICE_CUDA_CHECK_LAUNCH("qk_norm_rope_kernel");
}

}  // namespace dice::engine::cuda
