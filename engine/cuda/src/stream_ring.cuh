#pragma once
// The streaming skinny GEMM's block layout and weight ring (stream_gemm.cu's header says how they
// work), shared with the test probes that stream the same way (tests/persistent_probe.cu): eight
// consumer warps and one producer warp, a ring of shared-memory stages of 16 weight rows filled
// by one bulk copy per row, a full and an empty mbarrier per stage, and two buffers of the warps'
// partial sums of a 16 x 16 tile.

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "mbarrier.cuh"
#include "skinny_gemm.h"
#include "skinny_mma.cuh"
#include "stream_gemm.h"

namespace dice::engine::cuda::stream {

inline constexpr int kConsumerWarps = kSkinnyWarps;
inline constexpr int kConsumers = kConsumerWarps * 32;
inline constexpr int kThreads = kConsumers + 32;  // and one producer warp
inline constexpr int kRegs = 8;                   // C registers of a tile: two n8 tiles x 4
/// Weight rows of a tile and of a stage.
inline constexpr int kRows = static_cast<int>(kStreamTileColumns);
/// Floats of one buffer of the warps' partial sums ([warp][reg][lane]).
inline constexpr std::size_t kPartialFloats = static_cast<std::size_t>(kConsumerWarps) * kRegs * 32;
/// Bytes of the two partial-sum buffers.
inline constexpr std::size_t kPartialBytes = 2 * kPartialFloats * 4;
static_assert(kConsumers == kRegs * 32, "one output per consumer thread in the epilogue");

/// A ring of `Stages` stages of `StageK` k (stream_ring, StreamRing). Dynamic shared memory:
/// the stages, then the partial sums, then the full and empty barriers.
template <int StageK, int Stages>
struct Ring {
  static constexpr int kStageK = StageK, kStages = Stages;
  static constexpr int kRowPitch = kStageK * 2 + 64;  // bytes
  static constexpr std::size_t kStageBytes = static_cast<std::size_t>(kRows) * kRowPitch;
  /// 32-wide k chunks of a stage per consumer warp.
  static constexpr int kChunksPerWarp = kStageK / 32 / kConsumerWarps;
  static_assert(kStageK % (32 * kConsumerWarps) == 0, "chunk c of every stage on warp c % 8");
  static constexpr std::size_t kSharedBytes =
      kStages * (kStageBytes + 2 * sizeof(std::uint64_t)) + kPartialBytes;
};

/// Where a block's ring R lies in its dynamic shared memory `shared` (Ring's layout).
template <typename R>
struct RingView {
  unsigned char* ring;
  float* partial;
  std::uint64_t* full;
  std::uint64_t* empty;
};

template <typename R>
__device__ __forceinline__ RingView<R> ring_view(unsigned char* shared) {
  auto* full =
      reinterpret_cast<std::uint64_t*>(shared + R::kStages * R::kStageBytes + kPartialBytes);
  return {shared, reinterpret_cast<float*>(shared + R::kStages * R::kStageBytes), full,
          full + R::kStages};
}

/// Thread 0 initialises the ring's barriers (full: the producer's one arrival; empty: one
/// arrival per consumer warp), then every thread of the block meets them initialised.
template <typename R>
__device__ __forceinline__ void init_ring(const RingView<R>& v) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < R::kStages; ++s) {
      barrier_init(&v.full[s], 1);
      barrier_init(&v.empty[s], kConsumerWarps);
    }
    barrier_init_fence();
  }
  __syncthreads();
}

/// Issues stage i of ring R (slot i % kStages): the 16 weight rows of tile `tile` of w [out, in]
/// from k0, row_k k each (row_k * 2 bytes a multiple of 16), one bulk copy per row with the L2
/// `policy`, completing on the slot's full barrier. One thread.
template <typename R>
__device__ __forceinline__ void issue_stage(const RingView<R>& v, const __nv_bfloat16* w,
                                            std::int32_t in, std::int32_t i, std::int32_t tile,
                                            std::int32_t k0, std::int32_t row_k,
                                            std::uint64_t policy) {
  const std::int32_t s = i % R::kStages;
  const __nv_bfloat16* src = w + static_cast<std::int64_t>(tile) * kRows * in + k0;
  unsigned char* dst = v.ring + static_cast<std::size_t>(s) * R::kStageBytes;
  const auto row_bytes = static_cast<std::uint32_t>(row_k * 2);
  barrier_expect(&v.full[s], kRows * row_bytes);
#pragma unroll 4
  for (int r = 0; r < kRows; ++r)
    bulk_copy(dst + r * R::kRowPitch, src + static_cast<std::int64_t>(r) * in, row_bytes,
              &v.full[s], policy);
}

/// Consumer warp `warp`'s x chunks for stage_mmas: rows g (xl) and g + 8 (xh) of its 32-wide k
/// chunks c = warp + 8 u < `chunks` from k0, x_lane pointing at row g's k = 0 (lane t's 8
/// values) with `stride` elements a row; zeros for chunks past `chunks` and for rows past the x
/// (`low`: row g is one of them, `high`: row g + 8). kPlain: plain loads (x in shared memory, or
/// written during the kernel), else read-only ones (load16).
template <typename R, bool kPlain>
__device__ __forceinline__ void load_x_chunks(const __nv_bfloat16* x_lane, std::int32_t stride,
                                              std::int32_t k0, std::int32_t chunks, bool low,
                                              bool high, int warp, uint4 (&xl)[R::kChunksPerWarp],
                                              uint4 (&xh)[R::kChunksPerWarp]) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int u = 0; u < R::kChunksPerWarp; ++u) {
    const std::int32_t c = warp + u * kConsumerWarps;
    const std::int32_t k = k0 + c * 32;
    const __nv_bfloat16* lo = x_lane + k;
    const __nv_bfloat16* hi = x_lane + static_cast<std::int64_t>(8) * stride + k;
    xl[u] = c < chunks && low ? load16<kPlain>(lo) : zero;
    xh[u] = c < chunks && high ? load16<kPlain>(hi) : zero;
  }
}

/// Stage i's MMAs into acc for consumer warp `warp` (lane (g, t) = (lane / 4, lane % 4)): x
/// chunks xl (row g) and xh (row g + 8) of the warp's 32-wide k chunks c = warp + 8 u < `chunks`,
/// once the slot's weights landed (its full barrier); then the warp frees the slot (its lane 0
/// arrives on the empty barrier). Both n8 tiles' weights are read before the chunk's MMAs
/// (stream_gemm.cu's header says why).
template <typename R>
__device__ __forceinline__ void stage_mmas(const uint4 (&xl)[R::kChunksPerWarp],
                                           const uint4 (&xh)[R::kChunksPerWarp],
                                           std::int32_t chunks, const RingView<R>& v,
                                           std::int32_t i, float (&acc)[2][4]) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const std::int32_t s = i % R::kStages;
  barrier_wait(&v.full[s], static_cast<std::uint32_t>((i / R::kStages) & 1));
  const unsigned char* slot =
      v.ring + static_cast<std::size_t>(s) * R::kStageBytes + g * R::kRowPitch + 16 * t;
#pragma unroll
  for (int u = 0; u < R::kChunksPerWarp; ++u) {
    const std::int32_t c = warp + u * kConsumerWarps;
    if (c < chunks) {
      uint4 b[2];
#pragma unroll
      for (int j = 0; j < 2; ++j)
        b[j] = *reinterpret_cast<const uint4*>(slot + j * 8 * R::kRowPitch + c * 64);
#pragma unroll
      for (int j = 0; j < 2; ++j) mma_chunk(acc[j], xl[u], xh[u], b[j]);
    }
  }
  __syncwarp();
  if (lane == 0) barrier_arrive(&v.empty[s]);
}

/// A barrier of the consumer warps only (named barrier 1; the producer warp does not take part).
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
}

/// One buffer of the warps' partial sums of a 16 x 16 tile: [warp][C register][lane].
using Partial = float[kConsumerWarps][kRegs][32];

/// This consumer thread's sums in acc to its entries of partial buffer `buffer` of `partial`
/// (the ring's two buffers, RingView::partial), acc back to zero; returns the buffer. No barrier.
__device__ __forceinline__ Partial& store_warp_sums(float* partial, int buffer,
                                                    float (&acc)[2][4]) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  auto& part = *reinterpret_cast<Partial*>(partial + buffer * kPartialFloats);
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      part[warp][j * 4 + r][lane] = acc[j][r];
      acc[j][r] = 0.0f;
    }
  return part;
}

/// The consumer warps' sums in acc (zeroed after) to partial buffer `buffer` (store_warp_sums;
/// the next call takes the other, so one barrier a tile suffices), then one barrier of the
/// consumers; returns the buffer for the epilogue (warps_total).
__device__ __forceinline__ const Partial& stage_partials(float* partial, int& buffer,
                                                         float (&acc)[2][4]) {
  const Partial& part = store_warp_sums(partial, buffer, acc);
  buffer ^= 1;
  consumers_sync();
  return part;
}

}  // namespace dice::engine::cuda::stream
