#pragma once
// Two disjoint groups of the device's SMs (CUDA green contexts), each with its own stream, so
// that a compute-bound and a memory-bound kernel can run side by side without their blocks
// crowding each other out. Test support for CudaOps.OverlapTimings (issue 6: at 128 sequences
// the layer GEMMs and the attention run one after the other; bench/results/
// 2026-11-24-overlap-masked-h100 times two plain streams and these: neither gains).

#include <cuda.h>
#include <cuda_runtime.h>

namespace dice::engine::cuda {

/// Splits device `device`'s SMs in two green contexts (CUDA driver API 12.4+, reached through
/// cudaGetDriverEntryPointByVersion, so nothing links libcuda): the first holds at least
/// `first_sms` SMs, rounded up by the driver to its partition granularity (8 SMs on sm_90), the
/// second the rest. Each has one non-blocking stream; runtime launches and cuBLASLt calls on it
/// run on its SMs only. Throws dice::Error naming the driver call and its error when the driver
/// lacks green contexts or cannot make the split (e.g. `first_sms` not below the SM count).
class SmPartition {
 public:
  /// Makes `device` current (cudaSetDevice) and splits its SMs; throws as above.
  SmPartition(int device, int first_sms);
  SmPartition(const SmPartition&) = delete;
  SmPartition& operator=(const SmPartition&) = delete;
  ~SmPartition();

  /// The stream on the first group's SMs.
  cudaStream_t first() const { return reinterpret_cast<cudaStream_t>(first_stream_); }
  /// The stream on the other SMs.
  cudaStream_t second() const { return reinterpret_cast<cudaStream_t>(second_stream_); }
  /// SMs in each group, as the driver made them.
  int first_sms() const { return first_sms_; }
  int second_sms() const { return second_sms_; }

 private:
  void release() noexcept;
  /// The driver's destroy calls, looked up once by the constructor for release().
  decltype(cuStreamDestroy)* stream_destroy_ = nullptr;
  decltype(cuGreenCtxDestroy)* context_destroy_ = nullptr;
  CUgreenCtx first_context_ = nullptr, second_context_ = nullptr;
  CUstream first_stream_ = nullptr, second_stream_ = nullptr;
  int first_sms_ = 0, second_sms_ = 0;
};

}  // namespace dice::engine::cuda
