#pragma once
// The streaming skinny bf16 GEMM (issue 6): y[rows, out] (fp32) = x[rows, in] (bf16) w[out, in]^T
// (bf16), fp32 accumulation, optionally adding into y, or the SwiGLU epilogue, for at most 16 rows.
// One persistent block per SM: a producer thread keeps a ring of shared-memory stages full
// with bulk copies of w (cp.async.bulk, one per weight row and stage, L2 evict-first), from before
// the kernel's programmatic wait on, while eight consumer warps run the skinny kernel's
// mma.sync.m16n8k16 chunks (skinny_mma.cuh) on them. At one sequence it is +3.7-4.1% tok/s on
// SDAR-1.7B against the skinny kernel (bench/results/2026-11-28-stream-gemm-h100). Host rules
// are testable without a device.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "dice/engine/cuda_options.h"
#include "skinny_gemm.h"

namespace dice::engine::cuda {

/// Most rows the streaming kernel takes (one m16 tile).
inline constexpr std::int64_t kStreamRowsLimit = 16;
/// Output columns of one tile (two n8 tiles), the unit of work of a block.
inline constexpr std::int64_t kStreamTileColumns = 16;
/// k of one stage of the default ring: a tile's 16 weight rows x 2,048 k (64 KiB of bf16), one
/// 4 KiB bulk copy per row. 1 and 2 KiB copies, and more stages, streamed slower
/// (bench/results/2026-11-28-stream-gemm-h100, 2026-11-30-stream-ring-h200).
inline constexpr std::int64_t kStreamStageK = 2048;
/// k of one stage of the thirds ring (StreamRing::kThreeOf1280): a third of a 3,840-k or half of a
/// 2,560-k tile's row, one 2.5 KiB bulk copy per row.
inline constexpr std::int64_t kStreamThirdsStageK = 1280;
/// Stages of the default ring. With two, a block takes 146 KiB of shared memory
/// (kStreamSharedBytes), so one block per SM.
inline constexpr int kStreamStages = 2;
/// Dynamic shared memory of one block on the default ring: the ring (rows padded by 64 bytes so
/// that the consumers' 16-byte reads of 8 rows are free of bank conflicts), the consumers'
/// partial sums (two buffers) and the ring's barriers (bytes). The thirds ring takes less.
inline constexpr std::size_t kStreamSharedBytes =
    kStreamStages * (kStreamTileColumns * (kStreamStageK * 2 + 64) + 16) + 2 * 8 * 8 * 32 * 4;
static_assert(kStreamSharedBytes <= 227 * 1024, "a Hopper block opts in to at most 227 KiB");
static_assert(2 * kStreamSharedBytes > 228 * 1024, "one block per SM");

/// The ring a launch streams its weights through.
enum class StreamRing {
  kByShape,     ///< stream_ring(in)
  kTwoOf2048,   ///< two stages of 2,048 k (the default ring; a tile's last stage shorter where
                ///< 2,048 does not divide in)
  kThreeOf1280  ///< three stages of 1,280 k (2.5 KiB copies; 123 KiB of stages)
};

/// The ring for `in`: kThreeOf1280 where 1,280 divides in and 2,048 does not (SDAR-4B's 2,560:
/// its tiles' stages are all 40 KiB and three are in flight, 120 KiB, instead of a 64 KiB stage
/// and a 16 KiB one of 1 KiB copies; per launch at 4 rows chained under PDL SDAR-4B's gate/up
/// 29.1 -> 26.2 us, qkv 10.5 -> 8.8; +4.4% tok/s at 1 x 1,024 on an H200,
/// bench/results/2026-11-30-stream-thirds-h200), else kTwoOf2048. Never kByShape.
StreamRing stream_ring(std::int64_t in);

/// Dynamic shared memory (bytes) of a launch with the fused RMSNorm: kStreamSharedBytes and the
/// normalised rows, rows x (in + 8) bf16.
std::size_t stream_norm_shared_bytes(std::int64_t rows, std::int64_t in);

/// Whether the streaming kernel takes the fused RMSNorm for `rows` x `in` (on top of
/// stream_gemm_fits): 1 <= rows <= 16, in <= 4,096, stream_norm_shared_bytes and the prologue's
/// static shared memory within a Hopper block's 227 KiB (SDAR-4B's 2,560: up to 15 rows), eps > 0,
/// residual and weight 16-byte aligned.
bool stream_norm_fits(std::int64_t rows, std::int64_t in, const GemmNorm& norm);

/// Whether the streaming kernel computes this GEMM: 1 <= rows <= kStreamRowsLimit, in a positive
/// multiple of 32, out a positive multiple of kStreamTileColumns, x, w and y (fp32 output or the
/// SwiGLU epilogue's bf16) 16-byte aligned.
bool stream_gemm_fits(std::int64_t rows, std::int64_t in, std::int64_t out, const void* x,
                      const void* w, const void* y);

/// The share of the blocks' tile slots that `out` / 16 tiles fill on `sms` blocks: tiles over
/// ceil(tiles / sms) x sms, in (0, 1]. A block runs whole tiles, so the GEMM lasts as long as its
/// busiest block: at 0.61 (SDAR-4B's o and down projections, 160 tiles on 132 SMs) the skinny
/// kernel is faster. 0 for out < 16 or sms < 1.
double stream_gemm_fill(std::int64_t out, int sms);

/// k of one round of the split walk (launch_stream_gemm's `split_slots`): one 32-wide chunk per
/// consumer warp. Cuts between blocks fall on whole rounds.
inline constexpr std::int64_t kStreamSplitRoundK = 256;

/// Whether a launch on `blocks` blocks may take the split walk (launch_stream_gemm's
/// `split_slots`): in a multiple of kStreamSplitRoundK, and more 16-column tiles than blocks but
/// not a multiple of them (whole tiles would leave some blocks a tile more than others: SDAR-4B's
/// o and down projections, 160 tiles on 132 SMs, fill 0.61). Host-only.
bool stream_split_fits(std::int64_t in, std::int64_t out, int blocks);

/// k (elements) that the busiest of `blocks` blocks streams less on the split walk than on whole
/// tiles: ceil(tiles / blocks) x in less ceil(tiles x in / 256 / blocks) x 256 (0 where
/// stream_split_fits does not hold). SDAR-4B on 132 SMs: o 3,072, down 7,424.
std::int64_t stream_split_saving_k(std::int64_t in, std::int64_t out, int blocks);

// kStreamSplitMinSavingK, the least saving for which Gemm takes the split walk, is in
// dice/engine/cuda_options.h, where the CLI's help reads it too.

/// Device memory (bytes) of the hand-over slots of split launches on up to `blocks` blocks: per
/// block a tile's 16 x 16 fp32 sums, then a 32-bit flag per block. Zero them once before the first
/// launch; every launch leaves them zero. 0 for blocks < 1.
std::size_t stream_split_slot_bytes(int blocks);

/// The dynamic tail of a whole-tile launch (launch_stream_gemm's `dynamic`): each block streams
/// `static_tiles` tiles in a contiguous run (block b: [b s, (b + 1) s)), and the tiles past
/// blocks x s are claimed one at a time from a counter in global memory, so a block whose share
/// of the memory system runs slower takes fewer of them instead of ending the launch last.
/// The same bits as whole tiles (a tile is one block's, its sum order fixed by in).
struct StreamDynamic {
  /// Two zeroed 32-bit counters (kStreamDynamicCounterBytes): the claims, and the blocks done.
  /// Every launch leaves them zero. Launches on one pair must be stream-ordered (with `pdl` a
  /// launch claims only after its programmatic wait).
  unsigned* counters = nullptr;
  /// Tiles each block takes statically, >= 1 (stream_dynamic_static_tiles).
  std::int64_t static_tiles = 1;
};

/// Bytes of a StreamDynamic's counters.
inline constexpr std::size_t kStreamDynamicCounterBytes = 2 * sizeof(std::uint32_t);

/// Tiles each of min(blocks, out / 16) blocks takes statically when a share `dynamic_share` of
/// the out / 16 tiles is to be claimed at run time: floor(tiles / blocks x (1 - share)); 0 where
/// that leaves a block none, where fewer than `min_tiles` tiles fall to a block on average, or
/// for a share outside (0, 1) (then the launch takes no dynamic tail). Host-only.
std::int64_t stream_dynamic_static_tiles(std::int64_t out, int blocks, double dynamic_share,
                                         double min_tiles);

/// Whether a streaming launch may take the dynamic tail (launch_stream_gemm's `dynamic`): whole
/// tiles written, not added to y (`accumulate`), without a fused norm or the split walk. The one
/// rule the launcher's check and Gemm's choice (Gemm::run_stream) share.
inline bool stream_dynamic_applies(bool accumulate, const GemmNorm* norm,
                                   const float* split_slots) {
  return !accumulate && norm == nullptr && split_slots == nullptr;
}

/// Whether a streaming launch reads its first tile's old outputs before its programmatic wait
/// (launch_stream_gemm's `y_ready`): reads_y_early (skinny_gemm.h), on whole tiles only (no
/// `split_slots`). The one rule the launcher and Gemm's count (Gemm::early_y_launches) share.
inline bool stream_reads_y_early(bool y_ready, bool accumulate, bool pdl, bool early_weights,
                                 const float* split_slots) {
  return reads_y_early(y_ready, accumulate, pdl, early_weights) && split_slots == nullptr;
}

/// Launches y = x w^T (+ y with `accumulate`), or with `swiglu_act` the SwiGLU epilogue
/// (act[rows, out / 2] bf16 = silu(gate) * up of the output pairs, w's rows alternating gate and
/// up, swiglu.cuh; y not written), on min(blocks, out / 16) persistent blocks (`blocks`: the
/// SMs), each taking a contiguous run of 16-column tiles. `early_weights`: the producer fills the
/// ring before the kernel's programmatic wait (weights are read-only during a forward). `ring`:
/// the stages weights stream through (kByShape: stream_ring(in); a launch with `norm` takes
/// kTwoOf2048 whatever it asks). The sum of an output runs over its k in a fixed order (32-wide
/// chunk c to warp c % 8, each warp's chunks in order, then the warps in order), so the bits
/// depend on neither `blocks`, `ring` nor timing; they differ from the skinny kernel's.
/// Capture-safe. `pdl`: programmatic dependent launch (launch.cuh); the kernel lets the next one be
/// scheduled at its start, before its wait. `norm`: x is not read; after its wait each block
/// normalises the rows itself into shared memory (rms_norm.cuh's normalise_rows: the same bits as
/// rms_norm_vec_kernel's output, so the same y as that kernel then this one), one launch instead of
/// two. Throws dice::Error for a shape it does not take (stream_gemm_fits, and stream_norm_fits
/// with a norm), accumulate with swiglu_act, blocks < 1, or a failed launch.
/// `split_slots` (stream_split_slot_bytes(blocks), zeroed; not with `norm`): the split walk
/// instead of whole tiles (stream_gemm.cu's header): each of the `blocks` blocks streams within
/// 256 k of the mean share, and the two blocks that share a tile meet through a slot. Its bits are
/// fixed by the shape and `blocks` (not by `ring` or timing) and differ from the unsplit launch's.
/// Launches on one set of slots must be stream-ordered (at most one runs at a time: with `pdl`
/// the next one writes them only after its wait). Throws dice::Error where stream_split_fits does
/// not hold or with `norm`.
/// `y_ready` (with accumulate, pdl and early_weights; whole tiles only): the caller guarantees
/// that y's old values are final once this launch's blocks start (Gemm::run), so each block reads
/// those of its first tile before its programmatic wait; the same bits.
/// `dynamic` (where stream_dynamic_applies): the dynamic tail (StreamDynamic) instead of a
/// contiguous run of tiles a block; the same bits as without it. Throws dice::Error where it does
/// not apply, without counters, or with static_tiles below 1 or past tiles / blocks.
void launch_stream_gemm(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                        std::int64_t out, bool accumulate, void* swiglu_act, int blocks,
                        cudaStream_t stream, bool pdl, bool early_weights,
                        const GemmNorm* norm = nullptr, StreamRing ring = StreamRing::kByShape,
                        float* split_slots = nullptr, bool y_ready = false,
                        const StreamDynamic* dynamic = nullptr);

}  // namespace dice::engine::cuda
