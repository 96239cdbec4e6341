// RMSNorm of the fp32 residual stream into the GEMM input dtype, optionally gathering rows.

#include <cuda_bf16.h>

#include "cuda_check.h"
#include "device_utils.cuh"
#include "ops.h"

namespace dice::engine::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void rms_norm_kernel(const float* x, const float* weight, std::int32_t hidden,
                                double eps, T* out, const PassHeader* gather) {
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

}  // namespace

void launch_rms_norm(CudaDType dtype, const float* x, const float* weight, std::int32_t hidden,
                     double eps, void* out, std::int32_t rows, const PassHeader* gather,
                     cudaStream_t stream) {
  if (rows <= 0) return;
  if (dtype == CudaDType::kBF16)
    rms_norm_kernel<<<rows, kThreads, 0, stream>>>(x, weight, hidden, eps,
                                                   static_cast<__nv_bfloat16*>(out), gather);
  else
    rms_norm_kernel<<<rows, kThreads, 0, stream>>>(x, weight, hidden, eps, static_cast<float*>(out),
                                                   gather);
  DICE_CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

}  // namespace dice::engine::cuda
