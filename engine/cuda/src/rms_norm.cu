// RMSNorm of the fp32 residual stream into the GEMM input dtype, optionally gathering rows.
// One block per row. The first kernel (rms_norm_kernel) reads the row twice with scalar loads
// and sums squares in double; the vectorised one (rms_norm_vec_kernel) keeps the row in
// registers (float4 loads, at most kMaxVec per thread), sums in float for bf16 output (the
// output's rounding, 2^-9, dwarfs the sum's) and in double for fp32 output (exactness tests).
// Its float arithmetic is rms_norm.cuh's, which the skinny GEMM's fused norm shares (same bits).
// With a `delta` (launch_add_rms_norm), both first add delta's row to x's (one fp32 addition, as
// a GEMM epilogue with beta = 1 would) and normalize the sum; without gathering they also write
// the sum back into x.

#include <cuda_bf16.h>

#include <type_traits>

#include "cuda_check.h"
#include "device_utils.cuh"
#include "dice/core/error.h"
#include "launch.cuh"
#include "ops.h"
#include "rms_norm.cuh"

namespace dice::engine::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void rms_norm_kernel(const float* x, const float* delta, float* x_out,
                                const float* weight, std::int32_t hidden, double eps, T* out,
                                const PassHeader* gather) {
  wait_for_prior_grid();
  allow_next_grid();
  __shared__ double scratch[32];
  const std::int32_t row = blockIdx.x;
  T* dst = out + static_cast<std::int64_t>(row) * hidden;
  std::int32_t src_row = row;
  if (gather != nullptr) {
    if (row >= gather->block_rows) {
      for (std::int32_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = from_float<T>(0.0f);
      return;
    }
    src_row = pass_section<std::int32_t>(gather, gather->block_index_offset)[row];
  }
  const std::int64_t offset = static_cast<std::int64_t>(src_row) * hidden;
  const float* src = x + offset;
  const float* add = delta != nullptr ? delta + offset : nullptr;
  // Each thread reads back only the elements it wrote: no barrier between the loops.
  float* back = x_out != nullptr && add != nullptr ? x_out + offset : nullptr;
  double sum = 0;
  for (std::int32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float f = src[i];
    if (add != nullptr) f += add[i];
    if (back != nullptr) back[i] = f;
    const double v = f;
    sum += v * v;
  }
  sum = block_sum(sum, scratch);
  const auto scale = static_cast<float>(1.0 / sqrt(sum / hidden + eps));
  const float* sums = back != nullptr ? back : src;
  for (std::int32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float f = back == nullptr && add != nullptr ? sums[i] + add[i] : sums[i];
    dst[i] = from_float<T>(weight[i] * (f * scale));
  }
}

constexpr int kMaxVec = 8;  // float4 per thread: hidden up to 8,192

/// hidden % 4 == 0 and hidden <= 4 * kThreads * kVec.
template <typename T, typename Acc, int kVec>
__global__ void __launch_bounds__(kThreads)
    rms_norm_vec_kernel(const float* x, const float* delta, float* x_out, const float* weight,
                        std::int32_t hidden, double eps, T* out, const PassHeader* gather) {
  wait_for_prior_grid();
  __shared__ Acc scratch[32];
  const std::int32_t row = blockIdx.x;
  const int n4 = hidden / 4;
  T* dst = out + static_cast<std::int64_t>(row) * hidden;
  std::int32_t src_row = row;
  if (gather != nullptr) {
    if (row >= gather->block_rows) {
      for (int i = threadIdx.x; i < n4; i += kThreads) store4(dst + 4 * i, 0.0f, 0.0f, 0.0f, 0.0f);
      return;
    }
    src_row = pass_section<std::int32_t>(gather, gather->block_index_offset)[row];
  }
  const std::int64_t offset = static_cast<std::int64_t>(src_row) * hidden;
  const auto* src = reinterpret_cast<const float4*>(x + offset);
  const auto* add = delta != nullptr ? reinterpret_cast<const float4*>(delta + offset) : nullptr;
  auto* back =
      x_out != nullptr && add != nullptr ? reinterpret_cast<float4*>(x_out + offset) : nullptr;
  float4 v[kVec];
  Acc sum = 0;
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    if (i < n4) {
      v[k] = src[i];
      if (add != nullptr) {
        const float4 d = add[i];
        v[k] = make_float4(v[k].x + d.x, v[k].y + d.y, v[k].z + d.z, v[k].w + d.w);
        if (back != nullptr) back[i] = v[k];
      }
      if constexpr (std::is_same_v<Acc, float>)
        sum = add_squares(sum, v[k]);
      else
        sum += static_cast<Acc>(v[k].x) * v[k].x + static_cast<Acc>(v[k].y) * v[k].y +
               static_cast<Acc>(v[k].z) * v[k].z + static_cast<Acc>(v[k].w) * v[k].w;
    }
  }
  sum = block_sum(sum, scratch);
  // The next kernel (a GEMM whose blocks load their first weights before their wait) may start
  // once this block's row is read: its weight loads then do not delay these row loads
  // (bench/results/2026-11-25-kernel-trace-h100: +0.9% tok/s on SDAR-4B at 1 sequence).
  allow_next_grid();
  float scale = 0;
  if constexpr (std::is_same_v<Acc, float>)
    scale = rms_scale(sum, hidden, static_cast<float>(eps));
  else
    scale =
        static_cast<float>(Acc(1) / sqrt(sum / static_cast<Acc>(hidden) + static_cast<Acc>(eps)));
  const auto* w4 = reinterpret_cast<const float4*>(weight);
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    if (i < n4) {
      const float4 w = w4[i];
      if constexpr (std::is_same_v<Acc, float>)
        store4(dst + 4 * i, rms_apply(w.x, v[k].x, scale), rms_apply(w.y, v[k].y, scale),
               rms_apply(w.z, v[k].z, scale), rms_apply(w.w, v[k].w, scale));
      else
        store4(dst + 4 * i, w.x * (v[k].x * scale), w.y * (v[k].y * scale), w.z * (v[k].z * scale),
               w.w * (v[k].w * scale));
    }
  }
}

template <typename T, typename Acc>
void launch_vec(const float* x, const float* delta, float* x_out, const float* weight,
                std::int32_t hidden, double eps, T* out, std::int32_t rows,
                const PassHeader* gather, cudaStream_t stream, bool pdl) {
  const int per_thread = (hidden / 4 + kThreads - 1) / kThreads;
  const auto kernel = per_thread <= 2   ? rms_norm_vec_kernel<T, Acc, 2>
                      : per_thread <= 4 ? rms_norm_vec_kernel<T, Acc, 4>
                                        : rms_norm_vec_kernel<T, Acc, kMaxVec>;
  launch_kernel("rms_norm_vec_kernel", kernel, static_cast<unsigned>(rows), kThreads, 0, stream,
                pdl, x, delta, x_out, weight, hidden, eps, out, gather);
}

/// launch_rms_norm and launch_add_rms_norm: `delta` nullptr or [rows, hidden] fp32 added to x's
/// rows; `x_out` x itself (the sum written back) or nullptr.
void launch_norm(CudaDType dtype, const float* x, const float* delta, float* x_out,
                 const float* weight, std::int32_t hidden, double eps, void* out, std::int32_t rows,
                 const PassHeader* gather, cudaStream_t stream, bool vectorised, bool pdl) {
  if (rows <= 0) return;
  if (vectorised && hidden % 4 == 0 && hidden <= 4 * kThreads * kMaxVec) {
    if (dtype == CudaDType::kBF16)
      launch_vec<__nv_bfloat16, float>(x, delta, x_out, weight, hidden, eps,
                                       static_cast<__nv_bfloat16*>(out), rows, gather, stream, pdl);
    else
      launch_vec<float, double>(x, delta, x_out, weight, hidden, eps, static_cast<float*>(out),
                                rows, gather, stream, pdl);
    return;
  }
  const auto grid = static_cast<unsigned>(rows);
  if (dtype == CudaDType::kBF16)
    launch_kernel("rms_norm_kernel", rms_norm_kernel<__nv_bfloat16>, grid, kThreads, 0, stream, pdl,
                  x, delta, x_out, weight, hidden, eps, static_cast<__nv_bfloat16*>(out), gather);
  else
    launch_kernel("rms_norm_kernel", rms_norm_kernel<float>, grid, kThreads, 0, stream, pdl, x,
                  delta, x_out, weight, hidden, eps, static_cast<float*>(out), gather);
}

}  // namespace

void launch_rms_norm(CudaDType dtype, const float* x, const float* weight, std::int32_t hidden,
                     double eps, void* out, std::int32_t rows, const PassHeader* gather,
                     cudaStream_t stream, bool vectorised, bool pdl) {
  launch_norm(dtype, x, nullptr, nullptr, weight, hidden, eps, out, rows, gather, stream,
              vectorised, pdl);
}

void launch_add_rms_norm(CudaDType dtype, float* x, const float* delta, const float* weight,
                         std::int32_t hidden, double eps, void* out, std::int32_t rows,
                         const PassHeader* gather, cudaStream_t stream, bool vectorised, bool pdl) {
  if (delta == nullptr) throw Error("launch_add_rms_norm: no delta to add to the residual stream");
  launch_norm(dtype, x, delta, gather == nullptr ? x : nullptr, weight, hidden, eps, out, rows,
              gather, stream, vectorised, pdl);
}

}  // namespace dice::engine::cuda
