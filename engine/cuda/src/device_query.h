#pragma once
// Attributes of the current CUDA device, for the kernels' launch rules (SM counts, shared memory,
// L2 size, peak memory bandwidth). Defined in device_info.cpp, beside the public device queries
// of cuda_backend.h.

#include <cuda_runtime.h>

namespace dice::engine::cuda {

/// An attribute of the current device (cudaDeviceGetAttribute), e.g. cudaDevAttrL2CacheSize
/// (bytes) or cudaDevAttrMultiProcessorCount. Throws dice::Error on CUDA failures.
int device_attribute(cudaDeviceAttr what);

/// The current device's peak memory bandwidth, bytes per second: 2 x the memory clock
/// (cudaDevAttrMemoryClockRate, kHz; double data rate) x the bus width
/// (cudaDevAttrGlobalMemoryBusWidth, bits) / 8. H100 SXM (HBM3, 2,619 MHz, 5,120 bits): 3.35e12.
/// 0 when the device reports either as 0. Throws dice::Error on CUDA failures.
double device_peak_bandwidth();

}  // namespace dice::engine::cuda
