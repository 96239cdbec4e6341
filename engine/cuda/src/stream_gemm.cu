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
#include "swiglu.cuh"

namespace dice::engine::cuda {

namespace {

constexpr int kConsumerWarps = kSkinnyWarps;
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kThreads = kConsumers + 32;  // and one producer warp
constexpr int kRegs = 8;                   // C registers of a tile: two n8 tiles x 4
constexpr int kRows = static_cast<int>(kStreamTileColumns);  // weight rows of a tile and a stage
constexpr std::size_t kPartialFloats = static_cast<std::size_t>(kConsumerWarps) * kRegs * 32;
constexpr std::size_t kPartialBytes = 2 * kPartialFloats * 4;
static_assert(kConsumers == kRegs * 32, "one output per consumer thread in the epilogue");
static_assert(kConsumers == 256, "the fused norm is normalise_rows: 256 threads");
/// Static shared memory the fused norm's prologue may take: normalise_rows' scratch, with room
/// for its alignment (128 bytes, the dynamic shared memory's) before the dynamic shared memory.
constexpr std::size_t kNormStaticBytes = 1024;
static_assert(kNormaliseRowsStaticBytes + 128 <= kNormStaticBytes);

/// A ring of `Stages` stages of `StageK` k (stream_ring, StreamRing).
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
using DefaultRing = Ring<static_cast<int>(kStreamStageK), kStreamStages>;
using ThirdsRing = Ring<static_cast<int>(kStreamThirdsStageK), 3>;
static_assert(kStreamSharedBytes == DefaultRing::kSharedBytes);
static_assert(ThirdsRing::kSharedBytes <= kStreamSharedBytes, "no less room beside a block");

__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
}

/// kSwiglu: the SwiGLU epilogue into act; kNorm: x is RMSNorm(norm.residual), made by the
/// consumers into shared memory past the barriers.
template <bool kSwiglu, bool kNorm, typename R>
__global__ void __launch_bounds__(kThreads, 1)
    stream_gemm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                       float* __restrict__ y, std::int32_t rows, std::int32_t in, std::int32_t out,
                       bool accumulate, __nv_bfloat16* __restrict__ act, bool early_weights,
                       GemmNorm norm) {
  constexpr int kStageK = R::kStageK;
  constexpr int kStages = R::kStages;
  constexpr int kRowPitch = R::kRowPitch;
  constexpr std::size_t kStageBytes = R::kStageBytes;
  constexpr int kChunksPerWarp = R::kChunksPerWarp;
  // The next kernel is scheduled once every block of this one runs, so its blocks cannot keep
  // one of these off an SM; they wait on the SMs' spare room (launch.cuh, "Early start").
  allow_next_grid();
  extern __shared__ __align__(128) unsigned char shared[];
  unsigned char* ring = shared;
  auto* partial = reinterpret_cast<float*>(shared + kStages * kStageBytes);
  auto* full = reinterpret_cast<std::uint64_t*>(shared + kStages * kStageBytes + kPartialBytes);
  std::uint64_t* empty = full + kStages;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const std::int32_t tiles = out / kRows;
  const auto grid = static_cast<std::int64_t>(gridDim.x);
  const auto tile_begin =
      static_cast<std::int32_t>(tiles * static_cast<std::int64_t>(blockIdx.x) / grid);
  const auto tile_end =
      static_cast<std::int32_t>(tiles * (static_cast<std::int64_t>(blockIdx.x) + 1) / grid);
  const std::int32_t k_stages = (in + kStageK - 1) / kStageK;
  const std::int32_t count = (tile_end - tile_begin) * k_stages;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], kConsumerWarps);
    }
    barrier_init_fence();
  }
  __syncthreads();

  if (warp == kConsumerWarps) {  // the producer
    if (lane == 0) {
      const std::uint64_t policy = evict_first_policy();
      const auto issue = [&](std::int32_t i) {
        const std::int32_t s = i % kStages;
        const std::int32_t tile = tile_begin + i / k_stages;
        const std::int32_t k0 = (i % k_stages) * kStageK;
        const std::int32_t row_k = min(kStageK, in - k0);
        const __nv_bfloat16* src = w + static_cast<std::int64_t>(tile) * kRows * in + k0;
        unsigned char* dst = ring + static_cast<std::size_t>(s) * kStageBytes;
        const auto row_bytes = static_cast<std::uint32_t>(row_k * 2);
        barrier_expect(&full[s], kRows * row_bytes);
#pragma unroll 4
        for (int r = 0; r < kRows; ++r)
          bulk_copy(dst + r * kRowPitch, src + static_cast<std::int64_t>(r) * in, row_bytes,
                    &full[s], policy);
      };
      const std::int32_t first = min(count, kStages);
      if (early_weights)
        for (std::int32_t i = 0; i < first; ++i) issue(i);
      wait_for_prior_grid();
      if (!early_weights)
        for (std::int32_t i = 0; i < first; ++i) issue(i);
      for (std::int32_t i = first; i < count; ++i) {
        barrier_wait(&empty[i % kStages], static_cast<std::uint32_t>((i / kStages - 1) & 1));
        issue(i);
      }
    }
    return;
  }

  // The norm weight is a model weight: with early weights it is read before the wait too.
  NormWeight norm_weight;
  if constexpr (kNorm)
    if (early_weights) norm_weight = load_norm_weight(norm.weight, in);
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
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float acc[2][4];
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) acc[j][r] = 0.0f;
  int buffer = 0;

  for (std::int32_t i = 0; i < count; ++i) {
    const std::int32_t s = i % kStages;
    const std::int32_t ks = i % k_stages;
    const std::int32_t k0 = ks * kStageK;
    const std::int32_t chunks = min(kStageK, in - k0) / 32;
    // x first: its L1/L2 latency overlaps the wait for the slot.
    uint4 xl[kChunksPerWarp], xh[kChunksPerWarp];
#pragma unroll
    for (int u = 0; u < kChunksPerWarp; ++u) {
      const std::int32_t c = warp + u * kConsumerWarps;
      const std::int32_t k = k0 + c * 32;
      const __nv_bfloat16* lo = x_lane + k;
      const __nv_bfloat16* hi = x_lane + static_cast<std::int64_t>(8) * x_stride + k;
      xl[u] = c < chunks && low ? load16<kNorm>(lo) : zero;
      xh[u] = c < chunks && high ? load16<kNorm>(hi) : zero;
    }
    barrier_wait(&full[s], static_cast<std::uint32_t>((i / kStages) & 1));
    const unsigned char* slot =
        ring + static_cast<std::size_t>(s) * kStageBytes + g * kRowPitch + 16 * t;
#pragma unroll
    for (int u = 0; u < kChunksPerWarp; ++u) {
      const std::int32_t c = warp + u * kConsumerWarps;
      if (c < chunks) {
        uint4 b[2];
#pragma unroll
        for (int j = 0; j < 2; ++j)
          b[j] = *reinterpret_cast<const uint4*>(slot + j * 8 * kRowPitch + c * 64);
#pragma unroll
        for (int j = 0; j < 2; ++j) mma_chunk(acc[j], xl[u], xh[u], b[j]);
      }
    }
    __syncwarp();
    if (lane == 0) barrier_arrive(&empty[s]);
    if (ks != k_stages - 1) continue;

    // The tile's last stage: partial sums, one barrier, one output per thread.
    auto& part =
        *reinterpret_cast<float(*)[kConsumerWarps][kRegs][32]>(partial + buffer * kPartialFloats);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        part[warp][j * 4 + r][lane] = acc[j][r];
        acc[j][r] = 0.0f;
      }
    consumers_sync();
    const std::int64_t n0 = static_cast<std::int64_t>(tile_begin + i / k_stages) * kRows;
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
        *dst = accumulate ? *dst + sum : sum;
      }
    }
    buffer ^= 1;
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

double stream_gemm_fill(std::int64_t out, int sms) {
  const std::int64_t tiles = out / kStreamTileColumns;
  if (tiles < 1 || sms < 1) return 0.0;
  const std::int64_t waves = (tiles + sms - 1) / sms;
  return static_cast<double>(tiles) / static_cast<double>(waves * sms);
}

void launch_stream_gemm(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                        std::int64_t out, bool accumulate, void* swiglu_act, int blocks,
                        cudaStream_t stream, bool pdl, bool early_weights, const GemmNorm* norm,
                        StreamRing ring) {
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
  const std::int64_t tiles = out / kStreamTileColumns;
  const auto grid = static_cast<unsigned>(std::min<std::int64_t>(blocks, tiles));
  const bool swiglu = swiglu_act != nullptr;
  const StreamRing chosen = ring == StreamRing::kByShape ? stream_ring(in) : ring;
  const bool thirds = norm == nullptr && chosen == StreamRing::kThreeOf1280;
  const auto kernel = thirds            ? (swiglu ? stream_gemm_kernel<true, false, ThirdsRing>
                                                  : stream_gemm_kernel<false, false, ThirdsRing>)
                      : norm != nullptr ? (swiglu ? stream_gemm_kernel<true, true, DefaultRing>
                                                  : stream_gemm_kernel<false, true, DefaultRing>)
                                        : (swiglu ? stream_gemm_kernel<true, false, DefaultRing>
                                                  : stream_gemm_kernel<false, false, DefaultRing>);
  const std::size_t shared = thirds            ? ThirdsRing::kSharedBytes
                             : norm != nullptr ? stream_norm_shared_bytes(rows, in)
                                               : kStreamSharedBytes;
  DICE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(shared)));
  const char* name =
      norm != nullptr ? (swiglu ? "stream_gemm_kernel (norm, SwiGLU)" : "stream_gemm_kernel (norm)")
                      : (swiglu ? "stream_gemm_kernel (SwiGLU)" : "stream_gemm_kernel");
  launch_kernel(name, kernel, grid, kThreads, shared, stream, pdl,
                static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w), y,
                static_cast<std::int32_t>(rows), static_cast<std::int32_t>(in),
                static_cast<std::int32_t>(out), accumulate, static_cast<__nv_bfloat16*>(swiglu_act),
                early_weights, norm != nullptr ? *norm : GemmNorm{});
}

}  // namespace dice::engine::cuda
