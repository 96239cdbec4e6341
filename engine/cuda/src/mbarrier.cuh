#pragma once
// Shared-memory barriers (mbarrier) and bulk asynchronous copies (the Tensor Memory Accelerator's
// cp.async.bulk), sm_90 (PTX ISA, "Parallel Synchronization and Communication Instructions:
// mbarrier" and "Data Movement: cp.async.bulk"). Used by the wgmma GEMM (2-D tensor copies) and
// the streaming skinny GEMM (1-D copies into a ring of stages).

#include <cstdint>

namespace dice::engine::cuda {

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// Initialises `bar` for `count` arrivals per phase (one thread; then barrier_init_fence()).
__device__ __forceinline__ void barrier_init(std::uint64_t* bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count)
               : "memory");
}

/// Makes the barrier_init()s before it visible to the other threads and to the async proxy (the
/// bulk copies); then a block barrier before any thread uses the barriers.
__device__ __forceinline__ void barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/// One arrival announcing `bytes` of bulk copies to come (the phase completes when they landed).
__device__ __forceinline__ void barrier_expect(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)),
               "r"(bytes)
               : "memory");
}

/// One plain arrival (release semantics: this thread's earlier shared-memory reads are done).
__device__ __forceinline__ void barrier_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
}

/// Spins until the phase of parity `parity` of `bar` has completed.
__device__ __forceinline__ void barrier_wait(std::uint64_t* bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
}

/// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global `src` into
/// shared `dst`, completing on `bar`, under the L2 cache policy `policy` (createpolicy).
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, std::uint32_t bytes,
                                          std::uint64_t* bar, std::uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(shared_address(dst)),
      "l"(reinterpret_cast<std::uint64_t>(src)), "r"(bytes), "r"(shared_address(bar)), "l"(policy)
      : "memory");
}

}  // namespace dice::engine::cuda
