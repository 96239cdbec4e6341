#pragma once
// Every CUDA runtime and cuBLASLt call of the backend goes through these: a failure throws
// dice::Error naming the file, the line, the call and the library's error string.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

namespace dice::engine::cuda {

/// Throws dice::Error("CUDA error at FILE:LINE: CALL: NAME (STRING)") unless `status` is success.
void check_cuda(cudaError_t status, const char* call, const char* file, int line);
/// The same for cuBLAS/cuBLASLt status codes.
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace dice::engine::cuda

/// Checks a CUDA runtime call.
#define DICE_CUDA_CHECK(call) ::dice::engine::cuda::check_cuda((call), #call, __FILE__, __LINE__)
/// Checks a cuBLAS/cuBLASLt call.
#define DICE_CUBLAS_CHECK(call) \
  ::dice::engine::cuda::check_cublas((call), #call, __FILE__, __LINE__)
/// Checks the launch just made (configuration errors; asynchronous faults surface at the next
/// synchronizing call, which is checked too).
#define DICE_CUDA_CHECK_LAUNCH(what) \
  ::dice::engine::cuda::check_cuda(cudaGetLastError(), what, __FILE__, __LINE__)
