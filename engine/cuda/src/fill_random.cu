// Random fills for benchmarks and ceilings measured on random data (never zeros: METHOD.md), and
// a hash of fp32 values (the GEMM autotune compares algorithms' outputs bit for bit).

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <string>

#include "cuda_check.h"
#include "device_utils.cuh"
#include "dice/core/error.h"
#include "launch.cuh"
#include "ops.h"

namespace dice::engine::cuda {

namespace {

__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_random_kernel(T* data, std::int64_t count, float std, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t h = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(i)));
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) * 0x1p-24f;  // (0, 1]
    const float u2 = static_cast<float>((h >> 16) & 0xFFFFFFu) * 0x1p-24f;
    data[i] = from_float<T>(std * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}

__global__ void hash_kernel(const float* data, std::int64_t count, unsigned long long* out) {
  std::uint64_t h = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    h += splitmix64(static_cast<std::uint64_t>(__float_as_uint(data[i])) ^
                    (static_cast<std::uint64_t>(i) << 32));
  h = warp_sum(h);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, static_cast<unsigned long long>(h));
}

/// launch_delayed_fill's kernel: lets the next kernel be scheduled, waits, then fills.
__global__ void delayed_fill_kernel(std::uint16_t* x, std::int64_t count, std::uint32_t seed,
                                    std::int64_t delay_ns) {
  allow_next_grid();
  std::uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < static_cast<std::uint64_t>(delay_ns));
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    // A bf16 in [-1, 1): 2 f - 3 for f in [1, 2) with 7 random mantissa bits (exact in bf16).
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed * 40503u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float f = __uint_as_float((0x3F80u | (h & 0x7Fu)) << 16);
    x[i] = static_cast<std::uint16_t>(__float_as_uint(2.0f * f - 3.0f) >> 16);
  }
}

}  // namespace

void launch_delayed_fill(void* x, std::int64_t count, std::uint32_t seed, std::int64_t delay_ns,
                         cudaStream_t stream) {
  if (count <= 0 || delay_ns < 0)
    throw Error("launch_delayed_fill: count " + std::to_string(count) + " must be > 0 and delay " +
                std::to_string(delay_ns) + " ns >= 0");
  const char* b = std::getenv("DIAG_FILL_BLOCKS");  // DIAG
  const int blocks = b != nullptr ? std::atoi(b) : 264;
  delayed_fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<std::uint16_t*>(x), count, seed,
                                                  delay_ns);
  DICE_CUDA_CHECK_LAUNCH("delayed_fill_kernel");
}

void launch_hash(const float* data, std::int64_t count, unsigned long long* out,
                 cudaStream_t stream) {
  DICE_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof *out, stream));
  if (count <= 0) return;
  const int threads = 256;
  const auto blocks =
      static_cast<int>(std::min<std::int64_t>((count + threads - 1) / threads, 1024));
  hash_kernel<<<blocks, threads, 0, stream>>>(data, count, out);
  DICE_CUDA_CHECK_LAUNCH("hash_kernel");
}

void launch_fill_random(CudaDType dtype, void* data, std::int64_t count, float std,
                        std::uint64_t seed, cudaStream_t stream) {
  if (count <= 0) return;
  const int threads = 256;
  const auto blocks =
      static_cast<int>(std::min<std::int64_t>((count + threads - 1) / threads, 65536));
  if (dtype == CudaDType::kBF16)
    fill_random_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count,
                                                       std, seed);
  else
    fill_random_kernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(data), count, std, seed);
  DICE_CUDA_CHECK_LAUNCH("fill_random_kernel");
}

}  // namespace dice::engine::cuda
