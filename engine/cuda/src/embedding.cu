// Embedding lookup: the residual stream's first value, fp32.

#include <cuda_bf16.h>

#include "cuda_check.h"
#include "device_utils.cuh"
#include "ops.h"

namespace dice::engine::cuda {

namespace {

template <typename T>
__global__ void embedding_kernel(const PassHeader* meta, const T* table, std::int32_t hidden,
                                 float* x) {
  const std::int32_t row = blockIdx.x;
  float* out = x + static_cast<std::int64_t>(row) * hidden;
  if (row >= meta->rows) {
    for (std::int32_t i = threadIdx.x; i < hidden; i += blockDim.x) out[i] = 0.0f;
    return;
  }
  const RowInfo info = pass_section<RowInfo>(meta, meta->rows_offset)[row];
  const T* src = table + static_cast<std::int64_t>(info.token) * hidden;
  for (std::int32_t i = threadIdx.x; i < hidden; i += blockDim.x) out[i] = to_float(src[i]);
}

}  // namespace

void launch_embedding(CudaDType dtype, const PassHeader* meta, const void* table,
                      std::int32_t hidden, float* x, std::int32_t rows_pad, cudaStream_t stream) {
  if (rows_pad <= 0) return;
  if (dtype == CudaDType::kBF16)
    embedding_kernel<<<rows_pad, 256, 0, stream>>>(meta, static_cast<const __nv_bfloat16*>(table),
                                                   hidden, x);
  else
    embedding_kernel<<<rows_pad, 256, 0, stream>>>(meta, static_cast<const float*>(table), hidden,
                                                   x);
  DICE_CUDA_CHECK_LAUNCH("embedding_kernel");
}

}  // namespace dice::engine::cuda
