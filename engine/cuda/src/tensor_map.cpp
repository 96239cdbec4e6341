#include "tensor_map.h"

#include <cuda_runtime.h>

#include <string>

#include "cuda_check.h"
#include "dice/core/error.h"

namespace dice::engine::cuda {

void* tensor_map_encoder() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  DICE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                   cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || fn == nullptr)
    throw Error("CUDA: the driver has no cuTensorMapEncodeTiled (CUDA 12.0 or later needed)");
  return fn;
}

CUtensorMap bf16_map(PFN_cuTensorMapEncodeTiled_v12000 encode, const void* base, std::int64_t rows,
                     std::int64_t in, int box_rows, const char* what) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(in), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(in) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult status =
      encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
             element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS)
    throw Error(std::string("CUDA: cuTensorMapEncodeTiled failed for ") + what + " [" +
                std::to_string(rows) + ", " + std::to_string(in) + "] (CUresult " +
                std::to_string(static_cast<int>(status)) + ")");
  return map;
}

}  // namespace dice::engine::cuda
