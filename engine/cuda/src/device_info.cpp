// Device queries and the measured ceilings (copy bandwidth, bf16 GEMM rate) of cuda_backend.h.

#include <fmt/format.h>

#include <algorithm>
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

double measure_gemm_rate(int device, std::int64_t m, std::int64_t n, std::int64_t k, int repeats) {
  DICE_CUDA_CHECK(cudaSetDevice(device));
  cuda::Stream stream;
  cuda::DeviceBuffer x(static_cast<std::size_t>(m * k * 2)), w(static_cast<std::size_t>(n * k * 2)),
      y(static_cast<std::size_t>(m * n * 4));
  cuda::launch_fill_random(CudaDType::kBF16, x.get(), m * k, 1.0f, 2, stream.get());
  cuda::launch_fill_random(CudaDType::kBF16, w.get(), n * k, 1.0f, 3, stream.get());
  cuda::Gemm gemm;
  cuda::Event start, stop;
  std::vector<double> rates;
  for (int i = 0; i < repeats + 2; ++i) {
    start.record(stream.get());
    gemm.run(CudaDType::kBF16, x.get(), w.get(), y.as<float>(), m, k, n, false, stream.get());
    stop.record(stream.get());
    stream.synchronize();
    if (i >= 2)
      rates.push_back(2.0 * static_cast<double>(m) * static_cast<double>(n) *
                      static_cast<double>(k) / (stop.since(start) * 1e-3));
  }
  return median(rates);
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
