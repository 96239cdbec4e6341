// L2 prefetch of weights (ops.h, launch_l2_prefetch): while a few-row pass's q/k norm and
// attention leave HBM nearly idle (bench/results/2026-11-24-l2-prefetch-h100), a small kernel on a
// side stream asks the L2 for the weights the next GEMMs will stream, so that those GEMMs read
// them at L2 speed. Each lane issues cp.async.bulk.prefetch.L2 (PTX ISA, "Data Movement and
// Conversion Instructions: cp.async.bulk.prefetch", sm_90) for chunks of kPrefetchChunkBytes:
// the copy engine fetches them with no register or shared-memory destination. A prefetch is a
// hint: it changes no result, only where the GEMM's bytes come from.

#include <cstdint>

#include "cuda_check.h"
#include "dice/core/error.h"
#include "ops.h"

namespace dice::engine::cuda {

namespace {

/// Chunks are taken in order across the grid: chunk i goes to lane i % (blocks x 32), so the
/// first bytes of the first range (the next GEMM's) are asked for first.
template <bool kEvictLast>
__global__ void __launch_bounds__(32) l2_prefetch_kernel(L2PrefetchRanges ranges) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  std::uint64_t policy = 0;
  if constexpr (kEvictLast)
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  const std::int64_t issuers = static_cast<std::int64_t>(gridDim.x) * 32;
  std::int64_t chunk = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  std::int64_t skipped = 0;  // chunks of the ranges before range r
  for (int r = 0; r < ranges.count; ++r) {
    const std::int64_t bytes = ranges.bytes[r];
    const std::int64_t chunks = (bytes + kPrefetchChunkBytes - 1) / kPrefetchChunkBytes;
    for (; chunk - skipped < chunks; chunk += issuers) {
      const std::int64_t offset = (chunk - skipped) * kPrefetchChunkBytes;
      const std::int64_t left = bytes - offset;
      const auto size =
          static_cast<std::uint32_t>(left < kPrefetchChunkBytes ? left : kPrefetchChunkBytes);
      const char* address = static_cast<const char*>(ranges.data[r]) + offset;
      if constexpr (kEvictLast)
        asm volatile(
            "cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;\n" ::"l"(address),
            "r"(size), "l"(policy)
            : "memory");
      else
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(address), "r"(size)
                     : "memory");
    }
    skipped += chunks;
  }
#endif
}

}  // namespace

void launch_l2_prefetch(const L2PrefetchRanges& ranges, std::int32_t blocks, cudaStream_t stream,
                        bool evict_last) {
  if (ranges.count == 0 || blocks <= 0) return;
  for (int r = 0; r < ranges.count; ++r)
    if (reinterpret_cast<std::uintptr_t>(ranges.data[r]) % 16 != 0 || ranges.bytes[r] % 16 != 0)
      throw Error("L2 prefetch: a range is not 16-byte aligned (address and size)");
  if (evict_last)
    l2_prefetch_kernel<true><<<blocks, 32, 0, stream>>>(ranges);
  else
    l2_prefetch_kernel<false><<<blocks, 32, 0, stream>>>(ranges);
  DICE_CUDA_CHECK_LAUNCH("l2_prefetch_kernel");
}

}  // namespace dice::engine::cuda
