#pragma once
// Tensor maps for the Tensor Memory Accelerator's 2-D copies (cp.async.bulk.tensor, mbarrier.cuh
// tma_load): cuTensorMapEncodeTiled taken from the driver the CUDA runtime uses, so that nothing
// links against libcuda. Used by the wgmma GEMM.

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>

namespace dice::engine::cuda {

/// cuTensorMapEncodeTiled (a PFN_cuTensorMapEncodeTiled_v12000) from the driver the runtime
/// uses. Throws dice::Error when the driver has none (CUDA 12.0 or later needed).
void* tensor_map_encoder();

/// The tensor map of a row-major bf16 [rows, in] matrix at `base` (16-byte aligned, in * 2 a
/// multiple of 16) read in boxes of 64 columns x box_rows rows with the 128-byte swizzle (in
/// shared memory row r's 16-byte chunk c lands at chunk c ^ (r % 8) of its 128 bytes); elements
/// past the matrix read as zeros. `what` names the matrix in the error cuTensorMapEncodeTiled's
/// failure throws (dice::Error).
CUtensorMap bf16_map(PFN_cuTensorMapEncodeTiled_v12000 encode, const void* base, std::int64_t rows,
                     std::int64_t in, int box_rows, const char* what);

}  // namespace dice::engine::cuda
