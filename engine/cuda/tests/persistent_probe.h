#pragma once
// A probe of a persistent decode kernel (issue 6; not a check: run by
// CudaOps.PersistentStreamTimings when DICE_PERSISTENT_TIMINGS is set). It asks whether one
// kernel that streams every layer's GEMM weights through one ring of shared-memory stages, with
// the phases ordered by grid-wide counters instead of kernel boundaries, keeps HBM busier than
// the engine's chain of streaming GEMM launches under PDL. Its arithmetic is the streaming GEMM's
// (stream_gemm.cu: bulk copies of 16 weight rows a stage, mma.sync.m16n8k16 over <= 16 rows);
// its outputs are not a model's (each phase writes its first columns as the next phase's input),
// so it answers how long, not what.

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "device_memory.h"
#include "gemm.h"

namespace dice::engine::cuda {

/// One GEMM of a probe layer: y[rows, out] = x[rows, in] w[out, in]^T (bf16 in, fp32 sums).
struct ProbeGemm {
  std::int64_t in = 0, out = 0;
};

/// How the persistent kernel orders its phases.
struct PersistentOrder {
  /// false: no phase waits for the one before it (the stream's upper bound; outputs race).
  /// true: every block counts itself in after writing a phase's outputs (release) and waits
  /// until all blocks have (acquire) before it reads the next phase's input.
  bool wait = true;
  /// Grid-wide barriers with no weights after each phase (the norms, q/k and attention of a
  /// real layer, whose work is latency), each a count-in and a wait.
  int extra_barriers = 0;
  /// With `wait`: bit j set, GEMM j of each layer is followed by the count-in and the wait
  /// (and its extra barriers); clear, the next GEMM starts without either.
  unsigned wait_mask = ~0u;
  /// With `wait`: the blocks count in after each GEMM of wait_mask, but nobody waits (what the
  /// count-in alone costs); no extra barriers.
  bool count_only = false;
  /// Instead of counters: each phase writes its outputs as 64-bit words of two bf16 values and
  /// the run's epoch (relaxed stores at GPU scope), and the next phase's consumers load their
  /// input words until each carries the epoch (NCCL's LL protocol): no count-in, no barrier, and
  /// a stage waits only for the columns it reads. `wait` and the barriers are ignored.
  bool flagged = false;
  /// > 0: dynamic units (dynamic_probe_kernel): a GEMM's (tile, this many k stages) units are
  /// handed out through an atomic counter per GEMM, so faster blocks take more, instead of being
  /// dealt evenly; with `wait` a count-in and a wait after each GEMM. Not with `flagged`, extra
  /// barriers, count_only or a wait_mask. First run in bench/results/2026-11-30-dynamic-units-h200.
  int dynamic_stages = 0;
};

/// A probe kernel's ring: stages of 2,048, 1,280 or 1,024 k (the streaming GEMM's default and
/// thirds rings are kTwoOf2048 and kThreeOf1280).
enum class ProbeRingShape {
  kTwoOf2048,
  kThreeOf2048,
  kThreeOf1280,
  kFourOf1280,
  kFiveOf1280,
  kFourOf1024,
  kSixOf1024
};

/// Weights (one copy per layer, so that they come from HBM), inputs and counters of a probe of
/// `layers` layers of `gemms`.
class PersistentProbe {
 public:
  /// Throws dice::Error where a GEMM's in is not a positive multiple of 256 or its out not a
  /// positive multiple of 16, or on CUDA failures.
  PersistentProbe(int layers, std::vector<ProbeGemm> gemms);

  /// Enqueues the persistent kernel over every layer's GEMMs for `rows` rows (1-16) on `blocks`
  /// blocks (one per SM; all must be resident at once) through `ring`, the counters zeroed first
  /// (a memset node in a capture) when it waits, the run's epoch advanced first (a one-thread
  /// kernel) when flagged. Throws dice::Error for rows, blocks or extra
  /// barriers (kMaxExtraBarriers) out of range, a flagged order where flagged_fits() does not
  /// hold, or a failed launch.
  void enqueue_persistent(int rows, int blocks, ProbeRingShape ring, const PersistentOrder& order,
                          cudaStream_t stream);
  /// Enqueues the same kernel once per GEMM (no counters: kernel boundaries order the phases),
  /// plain or under PDL with early weights (the first stages before the wait); with
  /// `dynamic_stages`, the dynamic kernel (PersistentOrder::dynamic_stages), the unit counters
  /// zeroed before the first launch. Throws as enqueue_persistent().
  void enqueue_phase_launches(int rows, int blocks, ProbeRingShape ring, bool pdl,
                              cudaStream_t stream, int dynamic_stages = 0);
  /// After a run on `ring` with dynamic units of `dynamic_stages` stages on `blocks` blocks:
  /// whether every GEMM's counter reads its units plus one failed take a block (every unit taken,
  /// every block done), read back after synchronising `stream`.
  bool all_units_taken(int blocks, ProbeRingShape ring, int dynamic_stages,
                       cudaStream_t stream) const;
  /// Enqueues the same GEMMs as the engine's launches at few rows (Gemm with the streaming
  /// kernel, its split walk and the engine's fill rule, so the skinny kernel where the tiles fill
  /// the SMs poorly; one launch per GEMM, programmatic with early weights when `pdl`), each
  /// writing its fp32 output. Every SM.
  void enqueue_launches(int rows, bool pdl, cudaStream_t stream);
  /// Counters at or above `blocks` after a waiting enqueue_persistent (every barrier passed by
  /// every block), read back after synchronising `stream`; barriers(order) when all passed.
  int counters_passed(int blocks, cudaStream_t stream) const;
  /// Input words of the last flagged run (every phase's but the first, its `rows` rows) that do
  /// not carry that run's epoch (0 when every output was written), read back after
  /// synchronising `stream`.
  std::int64_t stale_flagged_words(int rows, cudaStream_t stream) const;
  /// Whether a flagged run can take these GEMMs: each writes all of the next one's input (out
  /// at least the next in), or the next would wait forever for the columns never written.
  bool flagged_fits() const;
  /// Barriers a run under `order` passes (counters it brings to the block count).
  int barriers(const PersistentOrder& order) const;

  /// Most extra barriers a phase may take (PersistentOrder::extra_barriers).
  static constexpr int kMaxExtraBarriers = 8;

  /// Weight bytes a layer streams.
  std::int64_t layer_weight_bytes() const;

 private:
  /// Throws dice::Error for rows outside 1-16, no blocks, extra barriers outside 0 to
  /// kMaxExtraBarriers, or dynamic units with an order they do not take.
  static void check_launch(int rows, int blocks, const PersistentOrder& order);
  void launch(const void* phases, int count, int rows, int blocks, ProbeRingShape ring,
              const PersistentOrder& order, bool pdl, cudaStream_t stream);

  int layers_;
  Gemm gemm_pdl_, gemm_plain_;  // the launches' kernels, with and without PDL
  std::vector<ProbeGemm> gemms_;
  std::vector<DeviceBuffer> weights_;  // per layer: the GEMMs' weights, back to back
  DeviceBuffer inputs_;                // per (layer, GEMM) and one more: 16 x max in bf16
  DeviceBuffer outputs_;               // the launches' fp32 y: 16 x max out
  DeviceBuffer phases_;                // the kernel's phase table
  DeviceBuffer counters_;
  DeviceBuffer unit_counters_;  // one a GEMM of the run: dynamic units taken
  DeviceBuffer flagged_;        // the flagged inputs, per slot 16 x max in / 2 words
  DeviceBuffer epoch_;          // the last flagged run's epoch
  std::int64_t max_in_ = 0, max_out_ = 0;
};

}  // namespace dice::engine::cuda
