#pragma once
// EXPERIMENT (not kept): a per-block timeline of the forward's kernels inside real passes.
// Thread 0 of each block of an instrumented kernel writes one record: %globaltimer at entry,
// after its griddepcontrol.wait, and at its exit, with its SM and the kernel's kind and shape.
// Each translation unit has its own copy of the buffer descriptor (no relocatable device code),
// set by its set_kernel_trace_* function; records == nullptr (the default) turns tracing off.

#include <cuda_runtime.h>

#include <cstdint>

namespace dice::engine::cuda {

struct KernelTraceRecord {
  std::uint32_t kind, a, b, smid;
  unsigned long long entry, waited, exit;
  std::uint32_t block, pad;
};

struct KernelTraceBuffer {
  KernelTraceRecord* records = nullptr;
  unsigned* count = nullptr;
  unsigned capacity = 0;
};

void set_kernel_trace_attention(const KernelTraceBuffer& b);
void set_kernel_trace_rms_norm(const KernelTraceBuffer& b);
void set_kernel_trace_qk_norm_rope(const KernelTraceBuffer& b);
void set_kernel_trace_skinny(const KernelTraceBuffer& b);
void set_kernel_trace_vocab(const KernelTraceBuffer& b);

#ifdef __CUDACC__
namespace {
__device__ KernelTraceBuffer g_kernel_trace;

__device__ __forceinline__ unsigned long long trace_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

/// Thread 0's record of this block; the destructor writes it (every return path).
struct TraceScope {
  bool on;
  std::uint32_t kind, a, b;
  unsigned long long entry = 0, waited = 0;
  __device__ TraceScope(std::uint32_t k, std::uint32_t x, std::uint32_t y)
      : on(threadIdx.x == 0 && threadIdx.y == 0 && g_kernel_trace.records != nullptr),
        kind(k),
        a(x),
        b(y) {
    if (on) entry = trace_now();
  }
  __device__ void mark_wait() {
    if (on && waited == 0) waited = trace_now();
  }
  __device__ ~TraceScope() {
    if (!on) return;
    const unsigned long long end = trace_now();
    const unsigned i = atomicAdd(g_kernel_trace.count, 1u);
    if (i >= g_kernel_trace.capacity) return;
    unsigned sm;
    asm volatile("mov.u32 %0, %smid;" : "=r"(sm));
    KernelTraceRecord r{kind, a, b, sm, entry, waited, end, blockIdx.x, 0};
    g_kernel_trace.records[i] = r;
  }
};
}  // namespace

#define DICE_KERNEL_TRACE_SETTER(fn)                                   \
  void fn(const KernelTraceBuffer& b) {                                \
    DICE_CUDA_CHECK(cudaMemcpyToSymbol(g_kernel_trace, &b, sizeof b)); \
  }
#endif

}  // namespace dice::engine::cuda
