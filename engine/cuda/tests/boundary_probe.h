#pragma once
// A probe of what a dependency between two kernels of a CUDA graph costs (issue 6; not a check:
// run by CudaOps.KernelBoundaryTimings when DICE_BOUNDARY_TIMINGS is set). A chain of kernels,
// each reading the output of the one before it and a share of a weight pool, is captured as one
// graph under one of several ways of ordering the kernels.

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "device_memory.h"

namespace dice::engine::cuda {

/// How a probe chain orders its kernels.
enum class BoundaryMode {
  kPlain,         ///< plain launches: each kernel starts when the one before it has finished
  kPdlAtExit,     ///< PDL; griddepcontrol.wait first; the next kernel is scheduled at exits
  kPdlEarly,      ///< PDL; wait, then griddepcontrol.launch_dependents at once
  kFlagsAfter,    ///< PDL without griddepcontrol.wait: a block spins on the previous kernel's
                  ///< finished-block counter (acquire), counts itself in at exit (release) and
                  ///< lets the next kernel be scheduled once its spin returns
  kFlagsAtStart,  ///< as kFlagsAfter, but the next kernel may be scheduled at once (a cascade)
};

/// One kernel of a probe chain: its blocks (256 threads each) and the weight bytes each block
/// reads (16-byte loads, from a pool large enough that they come from HBM).
struct BoundaryLink {
  int blocks = 0;
  std::int64_t weight_bytes_per_block = 0;
};

/// Buffers of a probe: a 512 MiB weight pool, two ping-pong activations and the counters.
class BoundaryProbe {
 public:
  BoundaryProbe();

  /// Enqueues `links` on `stream` under `mode` (eagerly or into a capture); `early_weights`:
  /// blocks read their weights before they wait for the kernel before them (PDL and flag
  /// modes). The flag modes expect the counters zero, or as a run of a chain of the same length
  /// left them (links 0 and 1 reset the last two). Throws dice::Error when a launch fails, a chain
  /// has fewer than 3 or more than kMaxLinks links, or a link has fewer than 8 or more than 4,096
  /// blocks or weights that are not whole 16-byte loads.
  void enqueue(const std::vector<BoundaryLink>& links, BoundaryMode mode, bool early_weights,
               cudaStream_t stream);
  /// Runs `links` once eagerly from NaN activations and returns the sum of the last kernel's
  /// output: the same in every mode for the same chain, and NaN (or another value) if a link
  /// read its input before the link before it had written it. Waits for `stream`. Throws
  /// dice::Error as enqueue() does and on CUDA failures.
  double checked_run(const std::vector<BoundaryLink>& links, BoundaryMode mode, bool early_weights,
                     cudaStream_t stream);

  static constexpr int kMaxLinks = 512;

 private:
  /// Activation buffer 0 or 1 (link i writes i % 2 and reads the other).
  float* activation(int parity) const;

  DeviceBuffer pool_, activations_, counters_;
};

}  // namespace dice::engine::cuda
