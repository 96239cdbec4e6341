#pragma once
// The one place where the forward's kernels are launched: plainly (<<<>>>), or with programmatic
// dependent launch (PDL; CUDA C++ Programming Guide, "Programmatic Dependent Launch and
// Synchronization"; PTX ISA, "griddepcontrol"), which lets the GPU schedule a kernel while the
// previous kernel of the stream drains its last blocks (CudaBackendOptions::programmatic_launch).
//
// The contract that keeps PDL correct: every kernel launched through launch_kernel runs
// wait_for_prior_grid() in every block before it reads or writes anything a kernel of the pass
// writes, and before it exits (as its first statement, except where "Early start" below says).
// A PDL kernel may start before its predecessor finished, but none of its blocks reads or
// writes such memory (or exits) before the predecessor has completed and its writes are
// visible. So kernel N + 1 cannot complete before kernel N, and kernel N + 2, which waits for
// N + 1, also sees N's writes (the ordering is transitive).
//
// Early start (bench/results/2026-11-23-engine-early-start-h100): the norm kernels (embedding,
// RMSNorm, q/k norm + RoPE: a few blocks at few rows), the pipelined attention (few work items
// at few rows) and the gate/up GEMM with the SwiGLU epilogue call allow_next_grid() right after
// their wait (the vectorised RMSNorm once it has read its row, so that the next GEMM's early
// weight loads do not queue ahead of it: bench/results/2026-11-25-kernel-trace-h100), so the
// next kernel may be scheduled once every block of theirs runs, and its blocks start on the SMs
// left free. The streaming GEMM (stream_gemm.h: one persistent block per SM, 146 KiB of shared
// memory each) calls it first, before its wait: the next kernel is scheduled only once every block
// of the GEMM runs, so it cannot keep one of them off an SM, and its blocks are resident and
// waiting when the GEMM ends (+2.1-2.7% tok/s on SDAR-1.7B at 1 sequence on an H200,
// bench/results/2026-11-28-stream-trigger-h200). A trigger before the wait keeps the ordering
// above: the next kernel's own wait still waits for this kernel to complete, and this kernel does
// not complete before its own wait. A kernel may, before its wait, read memory that no kernel
// of the pass writes (CudaBackendOptions::pdl_early_reads): the skinny GEMM loads its first
// weights there, the vectorised RMSNorm its weight, the pipelined attention reads its work item,
// page ids and visible lengths (the pass metadata, uploaded before the pass's first kernel), the
// vectorised q/k norm + RoPE its row's metadata, RoPE pairs and norm weight (+1.4-2.3% tok/s at
// 16 sequences on an H200, bench/results/2026-11-29-qk-early-reads-h200). Its
// wait still comes before anything it reads from the kernels before it, and before it exits. After
// a cuBLASLt kernel (a plain launch that never triggers), a captured pass can start our kernel
// early too: CudaBackendOptions::early_start_after_cublas turns that graph edge into a programmatic
// one from the GEMM's launch completion (device_memory.h, start_early_after_foreign_kernels); the
// same contract (wait before reading or writing) keeps it correct. The other way round is not: a
// cuBLASLt kernel never waits for a programmatic predecessor (CUDA 13.0: started early behind one
// of ours, it reads the previous layer's input; bench/results/2026-11-27-cublas-no-wait-h100), so
// the edge into it stays a full dependency. The other kernels trigger at exit: triggers in every
// kernel were 5-13% slower (bench/results/2026-11-23-engine-pdl-trigger-h100), and in the other
// skinny GEMMs, whose next kernel has nothing to read early, 4-5% slower (-early-start-h100, call
// 9).

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda_check.h"

namespace dice::engine::cuda {

/// Waits until the grid this one depends on programmatically (the previous kernel of the stream,
/// or its kernel node in a graph) has completed and its memory operations are visible
/// (griddepcontrol.wait). Returns at once when the launch had no PDL attribute; compiled out
/// below sm_90, which has no PDL.
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Lets the next kernel of the stream, when it is a PDL launch, be scheduled once every block of
/// this grid has called this or exited (griddepcontrol.launch_dependents). Usually called after
/// wait_for_prior_grid(); before it only where the next kernel's blocks cannot crowd out this
/// grid's (see "Early start" above). No effect without a PDL launch after this one; compiled out
/// below sm_90.
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Launches `kernel` on `stream` with grid x block threads and `shared` bytes of dynamic shared
/// memory: with `pdl` through cudaLaunchKernelEx with
/// cudaLaunchAttributeProgrammaticStreamSerialization = 1 (stream capture records a programmatic
/// edge, CUDA 12.3+), otherwise with <<<>>> exactly as a plain launch. The kernel must start with
/// wait_for_prior_grid() (see above). Works inside and outside stream capture. Throws dice::Error
/// naming `name` when the launch fails.
template <typename... Params, typename... Args>
void launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                   std::size_t shared, cudaStream_t stream, bool pdl, Args&&... args) {
  if (!pdl) {
    kernel<<<grid, block, shared, stream>>>(std::forward<Args>(args)...);
    DICE_CUDA_CHECK_LAUNCH(name);
    return;
  }
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  check_cuda(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name, __FILE__,
             __LINE__);
}

}  // namespace dice::engine::cuda
