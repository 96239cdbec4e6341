// The streaming skinny bf16 GEMM (stream_gemm.h): y[rows, out] = x[rows, in] w[out, in]^T for at
// most 16 rows, weights streamed through a ring of shared-memory stages.
//
// Work: the out / 16 tiles of 16 output columns are dealt to the grid's blocks in contiguous runs
// (block b: tiles [T b / P, T (b + 1) / P)); a block walks its tiles in order and each tile's k in
// stages of K (the last one shorter when in is not a multiple). The ring (Ring<K, S>): S = 2
// stages of K = 2,048, or 3 of 1,280 (stream_ring). Stage i of a block is ring slot i % S,
// guarded by two mbarriers: `full` (the producer's expect_tx arrival, completed by the bulk
// copies' bytes) and `empty` (one arrival per consumer warp once it has read the slot).
//
// Producer: lane 0 of warp 8 issues a stage as 16 bulk copies, one per weight row (row r of the
// tile at byte r * (2 K + 64) of the slot), with the L2 evict-first policy. With early weights
// it fills the whole ring before griddepcontrol.wait, i.e. while the kernel before this one still
// runs under programmatic dependent launch (weights are read-only during a forward).
//
// Consumers: warps 0-7. In a stage, warp v takes the 32-wide k chunks v, v + 8, ... and runs the
// skinny kernel's fragments on them (skinny_gemm.cu's header): lane (g, t) reads 16 bytes of row
// g (and g + 8, the second n8 tile) at chunk offset 16 t from the slot, and x's rows g and g + 8
// at the same k from global memory (L1/L2; issued before the wait for the slot). Both n8 tiles'
// weights are read before the chunk's MMAs: with each read right before its MMA the kernel was
// 2.2% slower in the forward (bench/results/2026-11-28-stream-gemm-h100, call 6). With the
// 64-byte row padding, the 8 lanes of each quarter-warp hit 8 distinct 16-byte bank groups. At a
// tile's last stage the warps' partial sums go to shared memory (two buffers, alternating by
// tile, so one named barrier per tile suffices) and 256 threads each finish one output: the sum
// over the warps in warp order, written (or added to y), or with SwiGLU the (gate, up) pair of
// one lane as bf16(silu(gate) * up) (swiglu.cuh). Every output's sum order is fixed by in (chunk
// c to warp c % 8, each warp's chunks in order, then the warps in order), independent of the
// grid.
//
// Split walk (kSplit; stream_split_fits, for shapes whose tiles fill the blocks poorly, as
// SDAR-4B's down projection: 160 tiles on 132 SMs): the work is the tiles x R rounds of 256 k
// (one 32-wide chunk per consumer warp; R = in / 256), in tile order, each tile's in k order, and
// block b takes rounds [U b / P, U (b + 1) / P) of the U, cut into stages of at most the ring's k
// that never cross a tile. Every block then streams within one round of the mean, so at most two
// blocks share a tile (U / P >= R: more tiles than blocks): block b + 1 starts with its tail (k
// from a cut to in), block b ends with its head (k from 0 to the cut). The tail's block writes its
// 16 x 16 sums (over its warps, in warp order) to the hand-over slot b in global memory, and one
// thread releases the slot's flag after a barrier. One thread of block b acquires the flag at the
// end of the segment before the head (set by then in practice: the tail is the first thing block
// b + 1 streams, and no longer than block b's walk before its head), ahead of that segment's
// barrier, so that every thread may read its outputs' tail sums; they read them before the head's
// last stage, overlapping the stage's weights. The epilogue adds them (head + tail), and one
// thread clears the flag for the next launch. An output's bits are fixed by in, out and the grid
// (where the cuts fall), run to run; they differ from whole tiles'. The hand-over cost ~1.1-1.5 us
// a launch with every thread acquiring and a fence before the release, less as it is (SDAR-4B's
// down projection 16.2-16.5 -> 16.0 us; bench/results/2026-11-30-stream-split-h200).
//
// Dynamic tail (kDynamic; StreamDynamic, for launches whose blocks take many tiles, as the
// lm_head: 72 a block on 132 SMs): block b streams tiles [b s, (b + 1) s) in order, then claims
// tiles past P s one at a time from a counter in global memory (atomicAdd by the producer, each
// claim issued a tile ahead of its use, after the programmatic wait: the launch before on the same
// counters has ended by then). The producer writes each stage's tile to shared memory before the
// stage's arrival (-1 and a plain arrival past the last), and the consumers read it after their
// wait on the stage. With static runs the launch lasts as long as its slowest block, and the
// blocks' shares of the memory system differ: the lm_head's step spread 182-241 us on SDAR-4B
// (median 215; its bytes at the copy rate 184), 183-187 with the tail
// (bench/results/2026-12-01-dynamic-tail-h200). A tile is one block's, with the same sum order:
// the same bits as whole tiles. The last block to finish resets the counters.
//
// Fused norm (kNorm): x is RMSNorm(residual). After their wait the consumers (256 threads, the
// norm kernel's block size) normalise the rows into shared memory past the barriers with
// normalise_rows (rms_norm.cuh; the norm kernel's layout and arithmetic, their own named barrier)
// and read x from there: the same x bits, so the same y. Each thread reads its elements of the
// rows once (held in registers between the sum and the scaling) and, with early weights, its
// share of the norm weight before the wait. The producer's ring fill, issued before the wait,
// runs on meanwhile.

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_check.h"
#include "device_memory.h"
#include "dice/core/error.h"
#include "launch.cuh"
#include "mbarrier.cuh"
#include "rms_norm.cuh"
#include "skinny_mma.cuh"
#include "stream_gemm.h"
#include "stream_ring.cuh"
#include "swiglu.cuh"

namespace dice::engine::cuda {

namespace {

using namespace stream;  // the block layout and ring (stream_ring.cuh)
static_assert(kConsumers == 256, "the fused norm is normalise_rows: 256 threads");
/// Static shared memory the fused norm's prologue may take: normalise_rows' scratch, with room
/// for its alignment (128 bytes, the dynamic shared memory's) before the dynamic shared memory.
constexpr std::size_t kNormStaticBytes = 1024;
static_assert(kNormaliseRowsStaticBytes + 128 <= kNormStaticBytes);

/// Bytes past the ring of a dynamic-tail launch: its stage_tile entries (2 x its stages).
constexpr std::size_t kDynamicStageTileBytes = 64;
using DefaultRing = Ring<static_cast<int>(kStreamStageK), kStreamStages>;
using ThirdsRing = Ring<static_cast<int>(kStreamThirdsStageK), 3>;
static_assert(kStreamSharedBytes == DefaultRing::kSharedBytes);
static_assert(ThirdsRing::kSharedBytes <= kStreamSharedBytes, "no less room beside a block");
static_assert(2 * 3 * sizeof(std::int32_t) <= kDynamicStageTileBytes &&
                  kStreamSharedBytes + kDynamicStageTileBytes <= 227 * 1024 &&
                  DefaultRing::kSharedBytes % 4 == 0 && ThirdsRing::kSharedBytes % 4 == 0,
              "room and alignment for the dynamic tail's stage tiles");

/// k of one round of the split walk: one 32-wide chunk per consumer warp.
constexpr int kRoundK = 32 * kConsumerWarps;
static_assert(kStreamSplitRoundK == kRoundK);
static_assert(kStreamStageK % kRoundK == 0 && kStreamThirdsStageK % kRoundK == 0);
/// Floats of one hand-over slot: a tile's 16 x 16 sums, output e = 32 reg + lane as the epilogue's
/// threads own them.
constexpr int kSlotFloats = kConsumers;
static_assert(kSlotFloats == kStreamTileColumns * kStreamTileColumns);

/// One stage of the split walk: the tile, its first k and its k (elements), and whether it is the
/// last stage of the tile in this block.
struct SplitStage {
  std::int32_t tile, k0, k;
  bool tile_end;
};

/// The split walk's stages over rounds [pos, end) (the file's header), `rounds` per tile.
template <int StageK>
struct SplitWalk {
  std::int32_t pos, end, rounds;
  __device__ bool more() const { return pos < end; }
  __device__ SplitStage next() {
    const std::int32_t tile = pos / rounds;
    const std::int32_t tile_stop = (tile + 1) * rounds;
    const std::int32_t stop = min(min(end, tile_stop), pos + StageK / kRoundK);
    const SplitStage stage{tile, (pos - tile * rounds) * kRoundK, (stop - pos) * kRoundK,
                           stop == tile_stop || stop == end};
    pos = stop;
    return stage;
  }
};

/// This block's split walk: rounds [U b / P, U (b + 1) / P) of U = tiles x in / 256.
template <int StageK>
__device__ __forceinline__ SplitWalk<StageK> split_walk(std::int32_t tiles, std::int32_t in) {
  const std::int32_t rounds = in / kRoundK;
  const std::int64_t total = static_cast<std::int64_t>(tiles) * rounds;
  const auto grid = static_cast<std::int64_t>(gridDim.x);
  const auto block = static_cast<std::int64_t>(blockIdx.x);
  return {static_cast<std::int32_t>(total * block / grid),
          static_cast<std::int32_t>(total * (block + 1) / grid), rounds};
}

/// Releases a hand-over flag at GPU scope: the block's slot writes before it (a block barrier
/// before the store; the release is cumulative over what happened before it).
__device__ __forceinline__ void release_flag(unsigned* flag) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(1u) : "memory");
}

/// Spins until a hand-over flag is set (acquire at GPU scope: the slot's writes before its release
/// are visible after).
__device__ __forceinline__ void wait_flag(const unsigned* flag) {
  unsigned set = 0;
  do {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(set) : "l"(flag) : "memory");
  } while (set == 0);
}

/// kSwiglu: the SwiGLU epilogue into act; kNorm: x is RMSNorm(norm.residual), made by the
/// consumers into shared memory past the barriers; kSplit: the split walk, with `slots` the
/// hand-over slots (gridDim.x x kSlotFloats floats, then gridDim.x flags); kDynamic: whole tiles,
/// `static_tiles` a block in a contiguous run, the rest claimed at run time through `claims`
/// (the file's header, "Dynamic tail").
template <bool kSwiglu, bool kNorm, bool kSplit, typename R, bool kDynamic = false>
__global__ void __launch_bounds__(kThreads, 1)
    stream_gemm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                       float* __restrict__ y, std::int32_t rows, std::int32_t in, std::int32_t out,
                       bool accumulate, __nv_bfloat16* __restrict__ act, bool early_weights,
                       GemmNorm norm, float* __restrict__ slots, bool early_y,
                       unsigned* __restrict__ claims, std::int32_t static_tiles) {
  static_assert(!kDynamic || (!kNorm && !kSplit), "the dynamic tail is on plain whole tiles");
  constexpr int kStageK = R::kStageK;
  constexpr int kStages = R::kStages;
  constexpr int kChunksPerWarp = R::kChunksPerWarp;
  // kDynamic: the tile of stage i, at i % (2 kStages), written by the producer before the stage's
  // arrival on its full barrier (release; the consumers' wait acquires it), -1 past the last
  // stage (past the ring in dynamic shared memory, kDynamicStageTileBytes). The producer
  // rewrites an entry only once its slot is free a second time, i.e. after every consumer warp
  // has finished the tile's epilogue.
  extern __shared__ __align__(128) unsigned char shared[];
  auto* const stage_tile = reinterpret_cast<std::int32_t*>(shared + R::kSharedBytes);
  // The next kernel is scheduled once every block of this one runs, so its blocks cannot keep
  // one of these off an SM; they wait on the SMs' spare room (launch.cuh, "Early start").
  allow_next_grid();
  const RingView<R> view = ring_view<R>(shared);
  float* partial = view.partial;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const std::int32_t tiles = out / kRows;
  const auto grid = static_cast<std::int64_t>(gridDim.x);
  const auto block = static_cast<std::int64_t>(blockIdx.x);
  const auto tile_begin = static_cast<std::int32_t>(tiles * block / grid);
  const auto tile_end = static_cast<std::int32_t>(tiles * (block + 1) / grid);
  const std::int32_t k_stages = (in + kStageK - 1) / kStageK;
  const std::int32_t count = (tile_end - tile_begin) * k_stages;
  init_ring(view);

  if (warp == kConsumerWarps) {  // the producer
    if (lane == 0) {
      const std::uint64_t policy = evict_first_policy();
      // Stages 0, 1, ... while more(i): the ring's first kStages before the programmatic wait
      // with early weights (after it without), then each once its slot is free.
      const auto produce = [&](const auto& more, const auto& issue) {
        std::int32_t i = 0;
        if (early_weights)
          for (; i < kStages && more(i); ++i) issue(i);
        wait_for_prior_grid();
        if (!early_weights)
          for (; i < kStages && more(i); ++i) issue(i);
        for (; more(i); ++i) {
          barrier_wait(&view.empty[i % kStages], static_cast<std::uint32_t>((i / kStages - 1) & 1));
          issue(i);
        }
      };
      if constexpr (kDynamic) {
        // The block's static run first (its first stages before the wait with early weights),
        // then tiles claimed one at a time: each claim is issued a tile ahead of its use, so its
        // round trip overlaps a tile's stream. The last block through resets the counters.
        const std::int32_t first = static_cast<std::int32_t>(block) * static_tiles;
        const std::int32_t static_count = static_tiles * k_stages;
        const auto issue = [&](std::int32_t i, std::int32_t tile) {
          stage_tile[i % (2 * kStages)] = tile;
          const std::int32_t k0 = (i % k_stages) * kStageK;
          issue_stage(view, w, in, i, tile, k0, min(kStageK, in - k0), policy);
        };
        std::int32_t i = 0;
        if (early_weights)
          for (; i < kStages && i < static_count; ++i) issue(i, first + i / k_stages);
        wait_for_prior_grid();
        const auto dealt = static_cast<std::int32_t>(gridDim.x) * static_tiles;
        unsigned next = atomicAdd(&claims[0], 1u);
        std::int32_t tile = 0;
        for (;; ++i) {
          if (i < static_count) {
            tile = first + i / k_stages;
          } else if (i % k_stages == 0) {
            tile = dealt + static_cast<std::int32_t>(next);
            if (tile < tiles) next = atomicAdd(&claims[0], 1u);
          }
          if (i >= kStages)
            barrier_wait(&view.empty[i % kStages],
                         static_cast<std::uint32_t>((i / kStages - 1) & 1));
          if (tile >= tiles) {
            stage_tile[i % (2 * kStages)] = -1;
            barrier_arrive(&view.full[i % kStages]);
            break;
          }
          issue(i, tile);
        }
        if (atomicAdd(&claims[1], 1u) == gridDim.x - 1) {
          atomicExch(&claims[0], 0u);
          atomicExch(&claims[1], 0u);
        }
      } else if constexpr (kSplit) {
        auto walk = split_walk<kStageK>(tiles, in);
        produce([&](std::int32_t) { return walk.more(); },
                [&](std::int32_t i) {
                  const SplitStage stage = walk.next();
                  issue_stage(view, w, in, i, stage.tile, stage.k0, stage.k, policy);
                });
      } else {
        produce([&](std::int32_t i) { return i < count; },
                [&](std::int32_t i) {
                  const std::int32_t k0 = (i % k_stages) * kStageK;
                  issue_stage(view, w, in, i, tile_begin + i / k_stages, k0, min(kStageK, in - k0),
                              policy);
                });
      }
    }
    return;
  }

  // The norm weight is a model weight: with early weights it is read before the wait too.
  NormWeight norm_weight;
  if constexpr (kNorm)
    if (early_weights) norm_weight = load_norm_weight(norm.weight, in);
  // With early_y (launch_stream_gemm), the old value of this thread's output of the block's first
  // tile, before the wait: the epilogue's global round trip for it is gone from the launch's end.
  float y_first = 0.0f;
  if constexpr (!kSplit && !kSwiglu) {
    if (early_y) {
      const int e = static_cast<int>(threadIdx.x);
      const int2 o = output_of<2>(e / 32, e % 32);
      if (o.x < rows)
        y_first = y[static_cast<std::int64_t>(o.x) * out +
                    static_cast<std::int64_t>(tile_begin) * kRows + o.y];
    }
  }
  wait_for_prior_grid();
  const int g = lane / 4, t = lane % 4;
  const __nv_bfloat16* x_rows = x;
  std::int32_t x_stride = in;
  if constexpr (kNorm) {
    if (!early_weights) norm_weight = load_norm_weight(norm.weight, in);
    auto* normed = reinterpret_cast<__nv_bfloat16*>(shared + R::kSharedBytes);
    normalise_rows(norm.residual, norm_weight, norm.eps, rows, in, normed,
                   [] { consumers_sync(); });
    x_rows = normed;
    x_stride = in + 8;
  }
  const __nv_bfloat16* x_lane = x_rows + static_cast<std::int64_t>(g) * x_stride + 8 * t;
  const bool low = g < rows, high = g + 8 < rows;
  float acc[2][4];
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) acc[j][r] = 0.0f;
  int buffer = 0;

  // The split walk has its own copy of the stage loop below: routed through these lambdas, the
  // whole-tile kernels took 40-80 more instructions (cuobjdump), and that loop has been slower for
  // fewer instructions before (bench/results/2026-11-28-stream-trigger-h200, call 8); as it is,
  // their SASS is what it was before the split walk. Both copies share the stage's x loads and
  // MMAs (stream_ring.cuh's load_x_chunks and stage_mmas: the whole-tile kernels' instructions
  // as when they had them inline; bench/results/2026-11-30-x-chunks-h200).
  if constexpr (kSplit) {
    // Stage i (slot i % kStages) of `chunks` 32-wide chunks from k0 into acc.
    const auto consume = [&](std::int32_t i, std::int32_t k0, std::int32_t chunks) {
      // x first: its L1/L2 latency overlaps the wait for the slot.
      uint4 xl[kChunksPerWarp], xh[kChunksPerWarp];
      load_x_chunks<R, kNorm>(x_lane, x_stride, k0, chunks, low, high, warp, xl, xh);
      stage_mmas(xl, xh, chunks, view, i, acc);
    };
    // The warps' sums of the tile to shared memory (one buffer of two), acc back to zero, one
    // barrier.
    const auto partials = [&]() -> const Partial& { return stage_partials(partial, buffer, acc); };
    // The epilogue of tile `tile`: one output per thread (a (gate, up) pair per lane with SwiGLU),
    // each the warps' total plus, with `has_tail` (a head tile), the tail's sums (tail[0], and the
    // up's tail[1] with SwiGLU; tail_values).
    const auto finish = [&](const Partial& part, std::int32_t tile, bool has_tail,
                            const float(&tail)[2]) {
      const std::int64_t n0 = static_cast<std::int64_t>(tile) * kRows;
      const int e = static_cast<int>(threadIdx.x);
      if constexpr (kSwiglu) {
        if (e < kRegs / 2 * 32) {
          const int reg = 2 * (e / 32), l = e % 32;
          const int2 o = output_of<2>(reg, l);
          if (o.x < rows) {
            float gate = warps_total(part, reg, l), up = warps_total(part, reg + 1, l);
            if (has_tail) {
              gate += tail[0];
              up += tail[1];
            }
            act[static_cast<std::int64_t>(o.x) * (out / 2) + (n0 + o.y) / 2] =
                __float2bfloat16_rn(silu_times(gate, up));
          }
        }
      } else {
        const int reg = e / 32, l = e % 32;
        const int2 o = output_of<2>(reg, l);
        if (o.x < rows) {
          float sum = warps_total(part, reg, l);
          if (has_tail) sum += tail[0];
          float* dst = y + static_cast<std::int64_t>(o.x) * out + n0 + o.y;
          *dst = accumulate ? *dst + sum : sum;
        }
      }
    };
    // The tail's sums this thread's outputs take from slot b (finish's `tail`), once its flag is
    // set: read before the head's last stage, so that their latency overlaps its weights'.
    const auto tail_values = [&](const float* slot, float(&tail)[2]) {
      const int e = static_cast<int>(threadIdx.x);
      if constexpr (kSwiglu) {
        const int reg = 2 * (e / 32), l = e % 32;
        if (e < kRegs / 2 * 32) {
          tail[0] = __ldcg(slot + reg * 32 + l);
          tail[1] = __ldcg(slot + (reg + 1) * 32 + l);
        }
      } else {
        tail[0] = __ldcg(slot + e);
      }
    };
    auto* const flags = reinterpret_cast<unsigned*>(slots + grid * kSlotFloats);
    auto walk = split_walk<kStageK>(tiles, in);
    const std::int32_t first_tile = walk.pos / walk.rounds;
    const bool tail_first = walk.pos % walk.rounds != 0, head_last = walk.end % walk.rounds != 0;
    float tail[2] = {0.0f, 0.0f};
    for (std::int32_t i = 0; walk.more(); ++i) {
      const SplitStage stage = walk.next();
      const bool head = head_last && !walk.more();  // the walk's last stage ends a head
      // The tail sums this thread's outputs take: the flag was acquired before the barrier that
      // ended the segment before the head, so their latency overlaps this stage's weights.
      if (head) tail_values(slots + block * kSlotFloats, tail);
      consume(i, stage.k0, stage.k / 32);
      if (!stage.tile_end) continue;
      // Before the head (all that is left lies in one tile): thread 0 acquires the flag that
      // block b + 1 released at the end of its tail (which streams no longer than this block's
      // walk so far), ahead of the barrier in partials(), which orders the other threads' reads
      // of the slot after it.
      if (head_last && walk.more() && walk.end - walk.pos < walk.rounds && threadIdx.x == 0)
        wait_flag(&flags[block]);
      if (tail_first && stage.tile == first_tile) {
        // The tail of a tile whose head block b - 1 ends with: its sums to slot b - 1, a barrier,
        // then one thread's release of the flag (cumulative: the other threads' writes before the
        // barrier are visible to whoever acquires it).
        const Partial& part = partials();
        const int e = static_cast<int>(threadIdx.x);
        slots[(block - 1) * kSlotFloats + e] = warps_total(part, e / 32, e % 32);
        consumers_sync();
        if (threadIdx.x == 0) release_flag(&flags[block - 1]);
      } else {
        finish(partials(), stage.tile, head, tail);
        // A head's slot was read (partials()' barrier): clear its flag for the next launch.
        if (head && threadIdx.x == 0) flags[block] = 0u;
      }
    }
  } else {
    for (std::int32_t i = 0; kDynamic || i < count; ++i) {
      const std::int32_t ks = i % k_stages;
      const std::int32_t k0 = ks * kStageK;
      const std::int32_t chunks = min(kStageK, in - k0) / 32;
      // x first: its L1/L2 latency overlaps the wait for the slot.
      uint4 xl[kChunksPerWarp], xh[kChunksPerWarp];
      load_x_chunks<R, kNorm>(x_lane, x_stride, k0, chunks, low, high, warp, xl, xh);
      std::int32_t tile = tile_begin + i / k_stages;
      if constexpr (kDynamic) {
        // The stage's tile (its full barrier acquires the producer's entry); stage_mmas' own wait
        // on the same phase then returns at once.
        barrier_wait(&view.full[i % kStages], static_cast<std::uint32_t>((i / kStages) & 1));
        tile = stage_tile[i % (2 * kStages)];
        if (tile < 0) break;
      }
      stage_mmas(xl, xh, chunks, view, i, acc);
      if (ks != k_stages - 1) continue;

      // The tile's last stage: partial sums, one barrier, one output per thread.
      // (Not stage_partials: with the buffer's flip after the outputs, as here, the whole-tile
      // kernels keep the instructions they had; through it they take 8-16 more.)
      const Partial& part = store_warp_sums(partial, buffer, acc);
      consumers_sync();
      const std::int64_t n0 = static_cast<std::int64_t>(tile) * kRows;
      const int e = static_cast<int>(threadIdx.x);
      if constexpr (kSwiglu) {
        if (e < kRegs / 2 * 32) {
          const int reg = 2 * (e / 32), l = e % 32;
          const int2 o = output_of<2>(reg, l);
          if (o.x < rows) {
            const float gate = warps_total(part, reg, l), up = warps_total(part, reg + 1, l);
            act[static_cast<std::int64_t>(o.x) * (out / 2) + (n0 + o.y) / 2] =
                __float2bfloat16_rn(silu_times(gate, up));
          }
        }
      } else {
        const int reg = e / 32, l = e % 32;
        const int2 o = output_of<2>(reg, l);
        if (o.x < rows) {
          const float sum = warps_total(part, reg, l);
          float* dst = y + static_cast<std::int64_t>(o.x) * out + n0 + o.y;
          *dst = accumulate ? (early_y && i < k_stages ? y_first : *dst) + sum : sum;
        }
      }
      buffer ^= 1;
    }
  }
}

}  // namespace

StreamRing stream_ring(std::int64_t in) {
  return in > 0 && in % kStreamThirdsStageK == 0 && in % kStreamStageK != 0
             ? StreamRing::kThreeOf1280
             : StreamRing::kTwoOf2048;
}

std::size_t stream_norm_shared_bytes(std::int64_t rows, std::int64_t in) {
  return kStreamSharedBytes + gemm_norm_shared_bytes(rows, in);
}

bool stream_norm_fits(std::int64_t rows, std::int64_t in, const GemmNorm& norm) {
  return norm_prologue_fits(rows, in, norm) && in >= 4 && in % 4 == 0 &&
         stream_norm_shared_bytes(rows, in) + kNormStaticBytes <= 227 * 1024;
}

bool stream_gemm_fits(std::int64_t rows, std::int64_t in, std::int64_t out, const void* x,
                      const void* w, const void* y) {
  return rows >= 1 && rows <= kStreamRowsLimit && in > 0 && in % 32 == 0 &&
         in <= (std::int64_t{1} << 30) && out > 0 && out % kStreamTileColumns == 0 &&
         out <= (std::int64_t{1} << 30) && aligned_to(x, 16) && aligned_to(w, 16) &&
         aligned_to(y, 16);
}

bool stream_split_fits(std::int64_t in, std::int64_t out, int blocks) {
  const std::int64_t tiles = out / kStreamTileColumns;
  return blocks >= 1 && in > 0 && in % kStreamSplitRoundK == 0 && tiles > blocks &&
         tiles % blocks != 0;
}

std::int64_t stream_split_saving_k(std::int64_t in, std::int64_t out, int blocks) {
  if (!stream_split_fits(in, out, blocks)) return 0;
  const std::int64_t tiles = out / kStreamTileColumns;
  const std::int64_t rounds = tiles * (in / kStreamSplitRoundK);
  return (tiles + blocks - 1) / blocks * in - (rounds + blocks - 1) / blocks * kStreamSplitRoundK;
}

std::size_t stream_split_slot_bytes(int blocks) {
  return blocks < 1 ? 0
                    : static_cast<std::size_t>(blocks) *
                          (kSlotFloats * sizeof(float) + sizeof(std::uint32_t));
}

double stream_gemm_fill(std::int64_t out, int sms) {
  const std::int64_t tiles = out / kStreamTileColumns;
  if (tiles < 1 || sms < 1) return 0.0;
  const std::int64_t waves = (tiles + sms - 1) / sms;
  return static_cast<double>(tiles) / static_cast<double>(waves * sms);
}

std::int64_t stream_dynamic_static_tiles(std::int64_t out, int blocks, double dynamic_share,
                                         double min_tiles) {
  const std::int64_t tiles = out / kStreamTileColumns;
  if (tiles < 1 || blocks < 1 || !(dynamic_share > 0.0 && dynamic_share < 1.0)) return 0;
  const std::int64_t grid = std::min<std::int64_t>(blocks, tiles);
  const double per_block = static_cast<double>(tiles) / static_cast<double>(grid);
  if (per_block < min_tiles) return 0;
  return static_cast<std::int64_t>(per_block * (1.0 - dynamic_share));
}

void launch_stream_gemm(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                        std::int64_t out, bool accumulate, void* swiglu_act, int blocks,
                        cudaStream_t stream, bool pdl, bool early_weights, const GemmNorm* norm,
                        StreamRing ring, float* split_slots, bool y_ready,
                        const StreamDynamic* dynamic) {
  const void* y_or_act = swiglu_act != nullptr ? swiglu_act : y;
  const void* x_or_residual = norm != nullptr ? static_cast<const void*>(norm->residual) : x;
  if (!stream_gemm_fits(rows, in, out, x_or_residual, w, y_or_act))
    throw Error("streaming skinny GEMM: rows " + std::to_string(rows) + " in " +
                std::to_string(in) + " out " + std::to_string(out) +
                " is not a shape it takes (rows 1.." + std::to_string(kStreamRowsLimit) +
                ", in a multiple of 32, out a multiple of " + std::to_string(kStreamTileColumns) +
                ", 16-byte aligned)");
  if (norm != nullptr && !stream_norm_fits(rows, in, *norm))
    throw Error("streaming skinny GEMM with a fused RMSNorm: rows " + std::to_string(rows) +
                " in " + std::to_string(in) + " is not a shape its norm takes (rows 1.." +
                std::to_string(kNormRowsLimit) + ", in up to " +
                std::to_string(4 * kNormVec * 256) +
                ", the normalised rows within shared memory, eps > 0, 16-byte aligned residual "
                "and weight)");
  if (swiglu_act != nullptr && accumulate)
    throw Error("streaming skinny GEMM with a SwiGLU epilogue: rows " + std::to_string(rows) +
                " out " + std::to_string(out) +
                " asks to accumulate, which the epilogue does not do");
  if (blocks < 1)
    throw Error("streaming skinny GEMM: " + std::to_string(blocks) +
                " blocks (expected at least one)");
  if (split_slots != nullptr && (norm != nullptr || !stream_split_fits(in, out, blocks)))
    throw Error("streaming skinny GEMM, split: in " + std::to_string(in) + " out " +
                std::to_string(out) + " on " + std::to_string(blocks) +
                " blocks is not a shape the split walk takes (in a multiple of " +
                std::to_string(kStreamSplitRoundK) + ", more 16-column tiles than blocks and not " +
                "a multiple of them, no fused norm)");
  const std::int64_t tiles = out / kStreamTileColumns;
  const auto grid = static_cast<unsigned>(std::min<std::int64_t>(blocks, tiles));
  if (dynamic != nullptr &&
      (!stream_dynamic_applies(accumulate, norm, split_slots) || dynamic->counters == nullptr ||
       dynamic->static_tiles < 1 || dynamic->static_tiles * grid > tiles))
    throw Error("streaming skinny GEMM with a dynamic tail: rows " + std::to_string(rows) + " in " +
                std::to_string(in) + " out " + std::to_string(out) + " on " + std::to_string(grid) +
                " blocks, " + std::to_string(dynamic->static_tiles) +
                " static tiles a block: expected counters, no accumulate, norm or split walk, " +
                "and 1 to tiles / blocks static tiles");
  const bool swiglu = swiglu_act != nullptr;
  const bool split = split_slots != nullptr;
  const StreamRing chosen = ring == StreamRing::kByShape ? stream_ring(in) : ring;
  const bool thirds = norm == nullptr && chosen == StreamRing::kThreeOf1280;
  using Kernel = decltype(&stream_gemm_kernel<false, false, false, DefaultRing>);
  // [split][swiglu] for each ring without the norm.
  constexpr Kernel kThirds[2][2] = {{stream_gemm_kernel<false, false, false, ThirdsRing>,
                                     stream_gemm_kernel<true, false, false, ThirdsRing>},
                                    {stream_gemm_kernel<false, false, true, ThirdsRing>,
                                     stream_gemm_kernel<true, false, true, ThirdsRing>}};
  constexpr Kernel kDefault[2][2] = {{stream_gemm_kernel<false, false, false, DefaultRing>,
                                      stream_gemm_kernel<true, false, false, DefaultRing>},
                                     {stream_gemm_kernel<false, false, true, DefaultRing>,
                                      stream_gemm_kernel<true, false, true, DefaultRing>}};
  // [swiglu] with the dynamic tail, for each ring.
  constexpr Kernel kThirdsDynamic[2] = {stream_gemm_kernel<false, false, false, ThirdsRing, true>,
                                        stream_gemm_kernel<true, false, false, ThirdsRing, true>};
  constexpr Kernel kDefaultDynamic[2] = {stream_gemm_kernel<false, false, false, DefaultRing, true>,
                                         stream_gemm_kernel<true, false, false, DefaultRing, true>};
  const Kernel kernel =
      dynamic != nullptr ? (thirds ? kThirdsDynamic[swiglu] : kDefaultDynamic[swiglu])
      : thirds           ? kThirds[split][swiglu]
      : norm != nullptr  ? (swiglu ? stream_gemm_kernel<true, true, false, DefaultRing>
                                   : stream_gemm_kernel<false, true, false, DefaultRing>)
                         : kDefault[split][swiglu];
  const std::size_t shared = (thirds            ? ThirdsRing::kSharedBytes
                              : norm != nullptr ? stream_norm_shared_bytes(rows, in)
                                                : kStreamSharedBytes) +
                             (dynamic != nullptr ? kDynamicStageTileBytes : 0);
  DICE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(shared)));
  const char* name =
      norm != nullptr ? (swiglu ? "stream_gemm_kernel (norm, SwiGLU)" : "stream_gemm_kernel (norm)")
      : split ? (swiglu ? "stream_gemm_kernel (split, SwiGLU)" : "stream_gemm_kernel (split)")
      : dynamic != nullptr
          ? (swiglu ? "stream_gemm_kernel (dynamic, SwiGLU)" : "stream_gemm_kernel (dynamic)")
          : (swiglu ? "stream_gemm_kernel (SwiGLU)" : "stream_gemm_kernel");
  launch_kernel(name, kernel, grid, kThreads, shared, stream, pdl,
                static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w), y,
                static_cast<std::int32_t>(rows), static_cast<std::int32_t>(in),
                static_cast<std::int32_t>(out), accumulate, static_cast<__nv_bfloat16*>(swiglu_act),
                early_weights, norm != nullptr ? *norm : GemmNorm{}, split_slots,
                stream_reads_y_early(y_ready, accumulate, pdl, early_weights, split_slots),
                dynamic != nullptr ? dynamic->counters : nullptr,
                static_cast<std::int32_t>(dynamic != nullptr ? dynamic->static_tiles : 0));
}

}  // namespace dice::engine::cuda
