// Device queries and the measured ceilings (copy bandwidth, bf16 GEMM rate) of cuda_backend.h.

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <vector>

#include "cuda_check.h"
#include "device_memory.h"
#include "device_query.h"
#include "dice/core/error.h"
#include "dice/engine/cuda_backend.h"
#include "gemm.h"
#include "ops.h"

namespace dice::engine {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return count;
}

std::string cuda_device_description(int device) {
  cudaDeviceProp prop{};
  DICE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return fmt::format(
      "{}, {} SMs, {:.1f} GiB, compute capability {}.{}", prop.name, prop.multiProcessorCount,
      static_cast<double>(prop.totalGlobalMem) / (1ull << 30), prop.major, prop.minor);
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

double measure_copy_bandwidth(int device, std::int64_t bytes, int repeats) {
  DICE_CUDA_CHECK(cudaSetDevice(device));
  cuda::Stream stream;
  cuda::DeviceBuffer a(static_cast<std::size_t>(bytes)), b(static_cast<std::size_t>(bytes));
  cuda::launch_fill_random(CudaDType::kF32, a.get(), bytes / 4, 1.0f, 1, stream.get());
  cuda::Event start, stop;
  std::vector<double> rates;
  for (int i = 0; i < repeats + 2; ++i) {  // two warm-ups
    start.record(stream.get());
    DICE_CUDA_CHECK(cudaMemcpyAsync(i % 2 == 0 ? b.get() : a.get(), i % 2 == 0 ? a.get() : b.get(),
                                    static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice,
                                    stream.get()));
    stop.record(stream.get());
    stream.synchronize();
    if (i >= 2) rates.push_back(2.0 * static_cast<double>(bytes) / (stop.since(start) * 1e-3));
  }
  return median(rates);
}

namespace {

/// The ceilings' bf16 GEMM: random x [m, k] and w [n, k] on `device`, y [m, n] fp32 = x w^T
/// through cuBLASLt on its own stream; flops() per run().
class CeilingGemm {
 public:
  CeilingGemm(int device, std::int64_t m, std::int64_t n, std::int64_t k)
      : device_(select(device)),
        m_(m),
        n_(n),
        k_(k),
        x_(static_cast<std::size_t>(m * k * 2)),
        w_(static_cast<std::size_t>(n * k * 2)),
        y_(static_cast<std::size_t>(m * n * 4)) {
    cuda::launch_fill_random(CudaDType::kBF16, x_.get(), m * k, 1.0f, 2, stream_.get());
    cuda::launch_fill_random(CudaDType::kBF16, w_.get(), n * k, 1.0f, 3, stream_.get());
  }
  void run() {
    gemm_.run(CudaDType::kBF16, x_.get(), w_.get(), y_.as<float>(), m_, k_, n_, false,
              stream_.get());
  }
  double flops() const {
    return 2.0 * static_cast<double>(m_) * static_cast<double>(n_) * static_cast<double>(k_);
  }
  cudaStream_t stream() const { return stream_.get(); }

 private:
  /// Makes `device` current before the stream and buffers are made on it.
  static int select(int device) {
    DICE_CUDA_CHECK(cudaSetDevice(device));
    return device;
  }
  [[maybe_unused]] int device_;
  std::int64_t m_, n_, k_;
  cuda::Stream stream_;
  cuda::DeviceBuffer x_, w_, y_;
  cuda::Gemm gemm_;
};

}  // namespace

double measure_gemm_rate(int device, std::int64_t m, std::int64_t n, std::int64_t k, int repeats) {
  CeilingGemm gemm(device, m, n, k);
  cuda::Event start, stop;
  std::vector<double> rates;
  for (int i = 0; i < repeats + 2; ++i) {
    start.record(gemm.stream());
    gemm.run();
    stop.record(gemm.stream());
    stop.synchronize();
    if (i >= 2) rates.push_back(gemm.flops() / (stop.since(start) * 1e-3));
  }
  return median(rates);
}

double measure_sustained_gemm_rate(int device, std::int64_t m, std::int64_t n, std::int64_t k,
                                   double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds))
    throw Error(fmt::format("sustained GEMM rate: seconds must be positive, not {}", seconds));
  CeilingGemm gemm(device, m, n, k);
  constexpr int kBatch = 8;  // GEMMs between two events
  // Two batches in flight (event pairs used in turn), so the GPU never waits for the host: batch
  // i is enqueued before batch i - 1 is read.
  std::array<cuda::Event, 2> starts, stops;
  std::vector<double> late_rates;
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  double elapsed = 0;
  for (int i = 0; elapsed < seconds || late_rates.empty(); ++i) {
    starts[i % 2].record(gemm.stream());
    for (int g = 0; g < kBatch; ++g) gemm.run();
    stops[i % 2].record(gemm.stream());
    if (i == 0) continue;
    const int done = (i - 1) % 2;
    stops[done].synchronize();
    elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
    if (elapsed >= seconds / 2)
      late_rates.push_back(kBatch * gemm.flops() / (stops[done].since(starts[done]) * 1e-3));
  }
  stops[0].synchronize();
  stops[1].synchronize();
  return median(late_rates);
}

}  // namespace dice::engine

namespace dice::engine::cuda {

int device_attribute(cudaDeviceAttr what) {
  int device = 0, value = 0;
  DICE_CUDA_CHECK(cudaGetDevice(&device));
  DICE_CUDA_CHECK(cudaDeviceGetAttribute(&value, what, device));
  return value;
}

double device_peak_bandwidth() {
  const double clock_hz = 1e3 * device_attribute(cudaDevAttrMemoryClockRate);
  const double bus_bytes = device_attribute(cudaDevAttrGlobalMemoryBusWidth) / 8.0;
  return 2.0 * clock_hz * bus_bytes;
}

}  // namespace dice::engine::cuda
