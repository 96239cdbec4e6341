// Random fills for benchmarks and ceilings measured on random data (never zeros: METHOD.md), and
// a hash of fp32 values (the GEMM autotune compares algorithms' outputs bit for bit).

#include <cuda_bf16.h>

#include <algorithm>

#include "cuda_check.h"
#include "device_utils.cuh"
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

}  // namespace

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
