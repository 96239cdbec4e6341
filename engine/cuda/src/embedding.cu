// Embedding lookup: the residual stream's first value, fp32.

#include <cuda_bf16.h>

#include "cuda_check.h"
#include "device_utils.cuh"
#include "launch.cuh"
#include "ops.h"

namespace dice::engine::cuda {

namespace {

template <typename T>
__global__ void embedding_kernel(const PassHeader* meta, const T* table, std::int32_t hidden,
                                 float* x) {
  wait_for_prior_grid();
  allow_next_grid();
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
                      std::int32_t hidden, float* x, std::int32_t rows_pad, cudaStream_t stream,
                      bool pdl) {
  if (rows_pad <= 0) return;
  const auto grid = static_cast<unsigned>(rows_pad);
  if (dtype == CudaDType::kBF16)
    launch_kernel("embedding_kernel", embedding_kernel<__nv_bfloat16>, grid, 256, 0, stream, pdl,
                  meta, static_cast<const __nv_bfloat16*>(table), hidden, x);
  else
    launch_kernel("embedding_kernel", embedding_kernel<float>, grid, 256, 0, stream, pdl, meta,
                  static_cast<const float*>(table), hidden, x);
}

}  // namespace dice::engine::cuda
