// RMSNorm of the fp32 residual stream into the GEMM input dtype, optionally gathering rows.
// One block per row. The first kernel (rms_norm_kernel) reads the row twice with scalar loads
// and sums squares in double; the vectorised one (rms_norm_vec_kernel) keeps the row in
// registers (float4 loads, at most kMaxVec per thread), sums in float for bf16 output (the
// output's rounding, 2^-9, dwarfs the sum's) and in double for fp32 output (exactness tests).
// Its float arithmetic is rms_norm.cuh's, which the skinny GEMM's fused norm shares (same bits).

#include <cuda_bf16.h>

#include <type_traits>

#include "cuda_check.h"
#include "device_utils.cuh"
#include "launch.cuh"
#include "ops.h"
#include "rms_norm.cuh"

namespace dice::engine::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void rms_norm_kernel(const float* x, const float* weight, std::int32_t hidden,
                                double eps, T* out, const PassHeader* gather) {
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
  const float* src = x + static_cast<std::int64_t>(src_row) * hidden;
  double sum = 0;
  for (std::int32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const double v = src[i];
    sum += v * v;
  }
  sum = block_sum(sum, scratch);
  const auto scale = static_cast<float>(1.0 / sqrt(sum / hidden + eps));
  for (std::int32_t i = threadIdx.x; i < hidden; i += blockDim.x)
    dst[i] = from_float<T>(weight[i] * (src[i] * scale));
}

constexpr int kMaxVec = 8;  // float4 per thread: hidden up to 8,192

/// hidden % 4 == 0 and hidden <= 4 * kThreads * kVec.
template <typename T, typename Acc, int kVec>
__global__ void __launch_bounds__(kThreads)
    rms_norm_vec_kernel(const float* x, const float* weight, std::int32_t hidden, double eps,
                        T* out, const PassHeader* gather, bool early_weight, NormTrigger trigger) {
  // With early_weight the norm weight (a model weight) is read before the wait, so that it does
  // not queue behind the next GEMM's early weight loads, which the trigger lets start (+0.7%
  // tok/s on SDAR-1.7B at 1 sequence on an H200: bench/results/2026-11-28-stream-norm-h200).
  // `trigger`: where that kernel may start (NormTrigger; before the wait its blocks take their
  // SMs as the kernel before this one leaves them: bench/results/2026-11-30-kernel-timeline-h200).
  const auto* w4 = reinterpret_cast<const float4*>(weight);
  float4 wv[kVec];
  const auto load_weight = [&] {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int i = static_cast<int>(threadIdx.x) + k * kThreads;
      if (i < hidden / 4) wv[k] = w4[i];
    }
  };
  if (early_weight) load_weight();
  if (trigger == NormTrigger::kBeforeWait) allow_next_grid();
  wait_for_prior_grid();
  if (trigger == NormTrigger::kAfterWait) allow_next_grid();
  if (!early_weight) load_weight();
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
  const auto* src =
      reinterpret_cast<const float4*>(x + static_cast<std::int64_t>(src_row) * hidden);
  float4 v[kVec];
  Acc sum = 0;
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    if (i < n4) {
      v[k] = src[i];
      if constexpr (std::is_same_v<Acc, float>)
        sum = add_squares(sum, v[k]);
      else
        sum += static_cast<Acc>(v[k].x) * v[k].x + static_cast<Acc>(v[k].y) * v[k].y +
               static_cast<Acc>(v[k].z) * v[k].z + static_cast<Acc>(v[k].w) * v[k].w;
    }
  }
  sum = block_sum(sum, scratch);
  // kAfterRead: the next kernel (a GEMM whose blocks load their first weights before their wait)
  // may start once this block's row is read, so that its weight loads do not delay these row
  // loads (bench/results/2026-11-25-kernel-trace-h100: +0.9% tok/s on SDAR-4B at 1 sequence).
  if (trigger == NormTrigger::kAfterRead) allow_next_grid();
  float scale = 0;
  if constexpr (std::is_same_v<Acc, float>)
    scale = rms_scale(sum, hidden, static_cast<float>(eps));
  else
    scale =
        static_cast<float>(Acc(1) / sqrt(sum / static_cast<Acc>(hidden) + static_cast<Acc>(eps)));
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    if (i < n4) {
      const float4 w = wv[k];
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
void launch_vec(const float* x, const float* weight, std::int32_t hidden, double eps, T* out,
                std::int32_t rows, const PassHeader* gather, cudaStream_t stream, bool pdl,
                bool early_weight, NormTrigger trigger) {
  const int per_thread = (hidden / 4 + kThreads - 1) / kThreads;
  const auto kernel = per_thread <= 2   ? rms_norm_vec_kernel<T, Acc, 2>
                      : per_thread <= 4 ? rms_norm_vec_kernel<T, Acc, 4>
                                        : rms_norm_vec_kernel<T, Acc, kMaxVec>;
  launch_kernel("rms_norm_vec_kernel", kernel, static_cast<unsigned>(rows), kThreads, 0, stream,
                pdl, x, weight, hidden, eps, out, gather, early_weight, trigger);
}

}  // namespace

void launch_rms_norm(CudaDType dtype, const float* x, const float* weight, std::int32_t hidden,
                     double eps, void* out, std::int32_t rows, const PassHeader* gather,
                     cudaStream_t stream, bool vectorised, bool pdl, bool early_weight,
                     NormTrigger trigger) {
  if (rows <= 0) return;
  early_weight = early_weight && pdl;  // as the q/k and attention launchers take early_reads
  if (vectorised && hidden % 4 == 0 && hidden <= 4 * kThreads * kMaxVec) {
    if (dtype == CudaDType::kBF16)
      launch_vec<__nv_bfloat16, float>(x, weight, hidden, eps, static_cast<__nv_bfloat16*>(out),
                                       rows, gather, stream, pdl, early_weight, trigger);
    else
      launch_vec<float, double>(x, weight, hidden, eps, static_cast<float*>(out), rows, gather,
                                stream, pdl, early_weight, trigger);
    return;
  }
  const auto grid = static_cast<unsigned>(rows);
  if (dtype == CudaDType::kBF16)
    launch_kernel("rms_norm_kernel", rms_norm_kernel<__nv_bfloat16>, grid, kThreads, 0, stream, pdl,
                  x, weight, hidden, eps, static_cast<__nv_bfloat16*>(out), gather);
  else
    launch_kernel("rms_norm_kernel", rms_norm_kernel<float>, grid, kThreads, 0, stream, pdl, x,
                  weight, hidden, eps, static_cast<float*>(out), gather);
}

}  // namespace dice::engine::cuda
