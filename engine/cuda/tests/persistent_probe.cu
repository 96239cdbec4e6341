#include "persistent_probe.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "dice/core/error.h"
#include "dice/engine/cuda_options.h"
#include "gemm.h"
#include "launch.cuh"
#include "mbarrier.cuh"
#include "ops.h"
#include "skinny_mma.cuh"
#include "stream_ring.cuh"

namespace dice::engine::cuda {
namespace {

using namespace stream;  // the streaming GEMM's block layout and ring (stream_ring.cuh)

/// One GEMM of the persistent kernel: w [out, in], x [16, in] (rows past `rows` unread), and the
/// next phase's input, whose first next_in columns this phase writes (bf16).
struct Phase {
  const __nv_bfloat16* w;
  const __nv_bfloat16* x;
  __nv_bfloat16* next;
  std::int32_t in, out, next_in;
  // The flagged form of x and next: per pair of columns one 64-bit word, the two bf16 values in
  // its low half and the run's epoch in its high half.
  const std::uint64_t* flagged_x;
  std::uint64_t* flagged_next;
};

/// 4 words of a flagged input at p (16-byte aligned: 8 bf16): `relaxed` loads at GPU scope (each
/// word single-copy atomic, so its value and epoch come together; L2, where the writers' stores
/// land), or plain loads (L1; for words already seen with the epoch: each is written once a run).
__device__ __forceinline__ void flagged_issue(const std::uint64_t* p, bool relaxed,
                                              std::uint64_t (&w)[4]) {
  if (relaxed) {
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(w[0]), "=l"(w[1])
                 : "l"(p)
                 : "memory");
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(w[2]), "=l"(w[3])
                 : "l"(p + 2)
                 : "memory");
  } else {
    const auto* q = reinterpret_cast<const ulonglong2*>(p);
    const ulonglong2 a = q[0], b = q[1];
    w[0] = a.x;
    w[1] = a.y;
    w[2] = b.x;
    w[3] = b.y;
  }
}

/// The 8 bf16 of flagged_issue's words, once each carries `epoch`: a stale word is loaded again
/// (relaxed) until it does. Traps after 2^26 tries (a writer that never comes).
__device__ __forceinline__ uint4 flagged_value(const std::uint64_t* p, unsigned epoch,
                                               std::uint64_t (&w)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    unsigned spins = 0;
    while (static_cast<unsigned>(w[j] >> 32) != epoch) {
      if (++spins > (1u << 26)) __trap();
      asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w[j]) : "l"(p + j) : "memory");
    }
  }
  return make_uint4(static_cast<unsigned>(w[0]), static_cast<unsigned>(w[1]),
                    static_cast<unsigned>(w[2]), static_cast<unsigned>(w[3]));
}

/// Advances the run's epoch (one thread; before each flagged run).
__global__ void bump_epoch_kernel(unsigned* epoch) {
  *epoch += 1;
}

/// This block's units of a phase: (tile, k stage) pairs in tile order, dealt evenly by stage.
struct UnitRange {
  std::int32_t begin, end, k_stages;
};

template <int StageK>
__device__ UnitRange units_of(const Phase& p) {
  const std::int32_t k_stages = (p.in + StageK - 1) / StageK;
  const std::int64_t units = static_cast<std::int64_t>(p.out / kRows) * k_stages;
  return {static_cast<std::int32_t>(units * blockIdx.x / gridDim.x),
          static_cast<std::int32_t>(units * (blockIdx.x + 1) / gridDim.x), k_stages};
}

/// Counts the block in on `counter` once its consumers' writes are done (a barrier, then one
/// release add: cumulative over what the barrier ordered before it).
__device__ __forceinline__ void count_in(unsigned* counter) {
  consumers_sync();
  if (threadIdx.x == 0)
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
}

/// Waits until every block has counted in on `counter` (one thread acquires, then a barrier).
/// Traps after 2 s: the blocks must all be resident (one per SM).
__device__ __forceinline__ void wait_all(const unsigned* counter) {
  if (threadIdx.x == 0) {
    std::uint64_t start = 0, now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    unsigned seen = 0;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
      if (seen >= gridDim.x) break;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
      if (now - start > 2'000'000'000ull) __trap();
    }
  }
  consumers_sync();
}

/// The producer's wait before issuing stage i: for a launch under PDL (`pdl`) the prior grid
/// before stage kStages (the ring's first stages are early weights), and stage i's slot freed
/// by the consumers (i >= kStages). One thread.
template <typename R>
__device__ __forceinline__ void await_slot(const RingView<R>& v, std::int32_t i, bool pdl) {
  if (pdl && i == R::kStages) wait_for_prior_grid();
  if (i >= R::kStages)
    barrier_wait(&v.empty[i % R::kStages], static_cast<std::uint32_t>((i / R::kStages - 1) & 1));
}

/// Stage i of ring R: the 16 rows of tile `tile` of w [out, in] from k0, as much k as is left
/// up to the stage's (stream::issue_stage). One thread.
template <typename R>
__device__ __forceinline__ void issue_tile_stage(const RingView<R>& v, const __nv_bfloat16* w,
                                                 std::int32_t in, std::int32_t i, std::int32_t tile,
                                                 std::int32_t k0, std::uint64_t policy) {
  issue_stage(v, w, in, i, tile, k0, min(R::kStageK, in - k0), policy);
}

/// Stage i of plain input x [16, in] (from k0, `chunks` 32-wide chunks): the lane's x loaded
/// first (plain loads: written during the kernel, never read here before), then stage_mmas.
template <typename R>
__device__ __forceinline__ void consume_stage(const __nv_bfloat16* x, std::int32_t in,
                                              std::int32_t k0, std::int32_t chunks,
                                              std::int32_t rows, const RingView<R>& v,
                                              std::int32_t i, float (&acc)[2][4]) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const __nv_bfloat16* x_lane = x + static_cast<std::int64_t>(g) * in + 8 * t;
  uint4 xl[R::kChunksPerWarp], xh[R::kChunksPerWarp];
  load_x_chunks<R, true>(x_lane, in, k0, chunks, g < rows, g + 8 < rows, warp, xl, xh);
  stage_mmas(xl, xh, chunks, v, i, acc);
}

/// stage_partials, then one output a thread: column tile * 16 + c of `next` [16, next_in] as
/// bf16 for c within next_in (the probe's chain; the partial sums of a block whose units end
/// mid-tile stand for the tile's).
__device__ __forceinline__ void write_outputs(float* partial, int& buffer, float (&acc)[2][4],
                                              std::int32_t tile, std::int32_t rows,
                                              __nv_bfloat16* next, std::int32_t next_in) {
  const Partial& part = stage_partials(partial, buffer, acc);
  const int e = static_cast<int>(threadIdx.x);
  const int2 o = output_of<2>(e / 32, e % 32);
  const std::int32_t column = tile * kRows + o.y;
  if (o.x < rows && column < next_in)
    next[static_cast<std::int64_t>(o.x) * next_in + column] =
        __float2bfloat16_rn(warps_total(part, e / 32, e % 32));
}

/// Every phase's weights streamed through one ring (stream_gemm.cu's producer and consumers);
/// with `wait`, phase p + 1's consumers read their input only after every block counted in
/// after phase p, and `extra` more barriers follow each phase, where bit p % gemms of
/// `wait_mask` is set (`count_only`: the blocks count in, nobody waits). The producer never
/// waits for a phase: its ring runs on into the next phase's weights.
template <int StageK, int Stages, bool kFlagged>
__global__ void __launch_bounds__(kThreads, 1)
    persistent_probe_kernel(const Phase* __restrict__ phases, std::int32_t count, std::int32_t rows,
                            unsigned* counters, bool wait, std::int32_t extra, bool pdl,
                            std::int32_t gemms, unsigned wait_mask, bool count_only,
                            const unsigned* epoch_of_run) {
  using R = Ring<StageK, Stages>;
  // Under PDL (one phase a launch): the next launch may be scheduled at once, as the streaming
  // GEMM's; the ring's first stages are issued before the wait (early weights).
  if (pdl) allow_next_grid();
  extern __shared__ __align__(128) unsigned char shared[];
  const RingView<R> view = ring_view<R>(shared);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  init_ring(view);

  if (warp == kConsumerWarps) {  // the producer
    if (lane == 0) {
      const std::uint64_t policy = evict_first_policy();
      std::int32_t i = 0;
      for (std::int32_t p = 0; p < count; ++p) {
        const Phase ph = phases[p];
        const UnitRange r = units_of<StageK>(ph);
        for (std::int32_t u = r.begin; u < r.end; ++u, ++i) {
          await_slot(view, i, pdl);
          issue_tile_stage(view, ph.w, ph.in, i, u / r.k_stages, (u % r.k_stages) * StageK, policy);
        }
      }
      if (pdl && i <= Stages) wait_for_prior_grid();
    }
    return;
  }
  if (pdl) wait_for_prior_grid();

  const int g = lane / 4, t = lane % 4;
  const bool low = g < rows, high = g + 8 < rows;
  constexpr bool flagged = kFlagged;  // epoch_of_run not null
  const unsigned epoch = kFlagged ? *epoch_of_run : 0u;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float acc[2][4] = {};
  int buffer = 0;
  std::int32_t i = 0;
  const auto synced = [&](std::int32_t p) { return wait && ((wait_mask >> (p % gemms)) & 1u); };
  for (std::int32_t p = 0; p < count; ++p) {
    const Phase ph = phases[p];
    if (p > 0 && synced(p - 1) && !count_only) wait_all(&counters[(p - 1) * (1 + extra)]);
    const UnitRange r = units_of<StageK>(ph);
    for (std::int32_t u = r.begin; u < r.end; ++u, ++i) {
      const std::int32_t ks = u % r.k_stages, k0 = ks * StageK;
      const std::int32_t chunks = min(StageK, ph.in - k0) / 32;
      if constexpr (flagged) {
        // The block's first pass over the phase's k checks the epochs from L2; later tiles read
        // the same words, final by then, through L1. Every load is issued before any check
        // (flagged_value), so a stage pays one round trip.
        const std::uint64_t* flagged_lane =
            ph.flagged_x + static_cast<std::int64_t>(g) * (ph.in / 2) + 4 * t;
        const bool first = u < r.begin + r.k_stages;
        const unsigned want = p > 0 ? epoch : 0u;  // the first phase's input: as it is
        uint4 xl[R::kChunksPerWarp], xh[R::kChunksPerWarp];
        std::uint64_t wl[R::kChunksPerWarp][4], wh[R::kChunksPerWarp][4];
#pragma unroll
        for (int v = 0; v < R::kChunksPerWarp; ++v) {
          const std::int32_t c = warp + v * kConsumerWarps;
          const std::int32_t k = k0 + c * 32;
          if (c < chunks && low) flagged_issue(flagged_lane + k / 2, first, wl[v]);
          if (c < chunks && high) flagged_issue(flagged_lane + 4 * ph.in + k / 2, first, wh[v]);
        }
#pragma unroll
        for (int v = 0; v < R::kChunksPerWarp; ++v) {
          const std::int32_t c = warp + v * kConsumerWarps;
          const std::int32_t k = k0 + c * 32;
          if (p == 0) {
            for (int j = 0; j < 4; ++j) wl[v][j] &= 0xffffffffull, wh[v][j] &= 0xffffffffull;
          }
          xl[v] = c < chunks && low ? flagged_value(flagged_lane + k / 2, want, wl[v]) : zero;
          xh[v] = c < chunks && high ? flagged_value(flagged_lane + 4 * ph.in + k / 2, want, wh[v])
                                     : zero;
        }
        stage_mmas(xl, xh, chunks, view, i, acc);
      } else {
        consume_stage<R>(ph.x, ph.in, k0, chunks, rows, view, i, acc);
      }
      if (ks != r.k_stages - 1 && u != r.end - 1) continue;
      // A tile's last stage here (or the block's last unit, mid-tile: its partial sums stand
      // for the tile's, a probe's shortcut).
      if constexpr (flagged) {
        const Partial& part = stage_partials(view.partial, buffer, acc);
        const int e = static_cast<int>(threadIdx.x);
        // A pair of columns a thread (regs 2 m, 2 m + 1: one row, columns 2 t and 2 t + 1),
        // one 64-bit relaxed store with the epoch: whoever sees the epoch sees the values.
        if (e >= kConsumers / 2) continue;
        const int reg = 2 * (e / 32), l = e % 32;
        const int2 o = output_of<2>(reg, l);
        const std::int32_t column = u / r.k_stages * kRows + o.y;
        if (o.x >= rows || column >= ph.next_in) continue;
        const unsigned pair =
            static_cast<unsigned>(
                __bfloat16_as_ushort(__float2bfloat16_rn(warps_total(part, reg, l)))) |
            static_cast<unsigned>(
                __bfloat16_as_ushort(__float2bfloat16_rn(warps_total(part, reg + 1, l))))
                << 16;
        const std::uint64_t word = (static_cast<std::uint64_t>(epoch) << 32) | pair;
        std::uint64_t* dst =
            ph.flagged_next + static_cast<std::int64_t>(o.x) * (ph.next_in / 2) + column / 2;
        asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(dst), "l"(word) : "memory");
      } else {
        write_outputs(view.partial, buffer, acc, u / r.k_stages, rows, ph.next, ph.next_in);
      }
    }
    if (!synced(p)) continue;
    count_in(&counters[p * (1 + extra)]);
    if (count_only) continue;
    for (std::int32_t b = 1; b <= extra; ++b) {
      count_in(&counters[p * (1 + extra) + b]);
      wait_all(&counters[p * (1 + extra) + b]);
    }
  }
}

template <int StageK, int Stages>
void launch_probe(const Phase* phases, std::int32_t count, int rows, int blocks, unsigned* counters,
                  const PersistentOrder& order, bool pdl, int gemms, const unsigned* epoch,
                  cudaStream_t stream) {
  using R = Ring<StageK, Stages>;
  static_assert(R::kSharedBytes <= 227 * 1024, "a Hopper block opts in to at most 227 KiB");
  auto* kernel = order.flagged ? persistent_probe_kernel<StageK, Stages, true>
                               : persistent_probe_kernel<StageK, Stages, false>;
  DICE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(R::kSharedBytes)));
  launch_kernel("persistent_probe_kernel", kernel, dim3(static_cast<unsigned>(blocks)),
                dim3(kThreads), R::kSharedBytes, stream, pdl, phases, count, rows, counters,
                order.wait && !order.flagged, order.extra_barriers, pdl, gemms, order.wait_mask,
                order.count_only, order.flagged ? epoch : nullptr);
}

/// The dynamic order (PersistentOrder::dynamic_stages): a phase's units, (tile, `group` k stages)
/// in tile order, are handed out through an atomic counter per phase (unit_counters[p]) instead
/// of dealt evenly, so a block that runs ahead takes more of them. The producer takes the next
/// unit while it issues the current one's stages, and passes each stage's (tile, k0, last) to the
/// consumers through shared memory behind a `ready` barrier per slot; a tile below zero ends the
/// block's phase. With `wait` the phases are ordered as persistent_probe_kernel's (a count-in and
/// a wait after each). The outputs are a unit's partial sums (the probe's shortcut).
template <int StageK, int Stages>
__global__ void __launch_bounds__(kThreads, 1)
    dynamic_probe_kernel(const Phase* __restrict__ phases, std::int32_t count, std::int32_t rows,
                         unsigned* counters, unsigned* unit_counters, bool wait, std::int32_t group,
                         bool pdl) {
  using R = Ring<StageK, Stages>;
  if (pdl) allow_next_grid();
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ int4 stage_info[Stages];      // tile, k0, last stage of its unit
  __shared__ std::uint64_t ready[Stages];  // stage_info[s] written
  const RingView<R> view = ring_view<R>(shared);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  // The ready barriers before init_ring's fence and block barrier, which cover them too.
  if (threadIdx.x == 0)
    for (int s = 0; s < Stages; ++s) barrier_init(&ready[s], 1);
  init_ring(view);

  if (warp == kConsumerWarps) {  // the producer
    if (lane == 0) {
      const std::uint64_t policy = evict_first_policy();
      std::int32_t i = 0;
      // Stage i's slot, once free (await_slot), with its info published.
      const auto take_slot = [&](std::int32_t tile, std::int32_t k0, bool last) {
        const std::int32_t s = i % Stages;
        await_slot(view, i, pdl);
        stage_info[s] = make_int4(tile, k0, last ? 1 : 0, 0);
        barrier_arrive(&ready[s]);
        return s;
      };
      for (std::int32_t p = 0; p < count; ++p) {
        const Phase ph = phases[p];
        const std::int32_t k_stages = (ph.in + StageK - 1) / StageK;
        const std::int32_t groups = (k_stages + group - 1) / group;
        const auto units = static_cast<unsigned>(ph.out / kRows * groups);
        unsigned u = atomicAdd(&unit_counters[p], 1u);
        while (u < units) {
          const unsigned next = atomicAdd(&unit_counters[p], 1u);  // its latency under u's
          const auto tile = static_cast<std::int32_t>(u / static_cast<unsigned>(groups));
          const std::int32_t g0 =
              static_cast<std::int32_t>(u % static_cast<unsigned>(groups)) * group;
          const std::int32_t g1 = min(g0 + group, k_stages);
          for (std::int32_t ks = g0; ks < g1; ++ks, ++i) {
            take_slot(tile, ks * StageK, ks == g1 - 1);
            issue_tile_stage(view, ph.w, ph.in, i, tile, ks * StageK, policy);
          }
          u = next;
        }
        // The end of this block's phase: a stage with no weights (its full barrier completes
        // on the arrival alone).
        const std::int32_t s = take_slot(-1, 0, true);
        barrier_expect(&view.full[s], 0);
        ++i;
      }
      if (pdl && i <= Stages) wait_for_prior_grid();
    }
    return;
  }
  if (pdl) wait_for_prior_grid();
  float acc[2][4] = {};
  int buffer = 0;
  std::int32_t i = 0;
  for (std::int32_t p = 0; p < count; ++p) {
    const Phase ph = phases[p];
    if (wait && p > 0) wait_all(&counters[p - 1]);
    for (;; ++i) {
      const std::int32_t s = i % Stages;
      barrier_wait(&ready[s], static_cast<std::uint32_t>((i / Stages) & 1));
      const int4 info = stage_info[s];
      if (info.x < 0) {
        barrier_wait(&view.full[s], static_cast<std::uint32_t>((i / Stages) & 1));
        __syncwarp();
        if (lane == 0) barrier_arrive(&view.empty[s]);
        ++i;
        break;
      }
      consume_stage<R>(ph.x, ph.in, info.y, min(StageK, ph.in - info.y) / 32, rows, view, i, acc);
      if (info.z != 0) write_outputs(view.partial, buffer, acc, info.x, rows, ph.next, ph.next_in);
    }
    if (wait) count_in(&counters[p]);
  }
}

template <int StageK, int Stages>
void launch_dynamic(const Phase* phases, std::int32_t count, int rows, int blocks,
                    unsigned* counters, unsigned* unit_counters, const PersistentOrder& order,
                    bool pdl, cudaStream_t stream) {
  using R = Ring<StageK, Stages>;
  static_assert(R::kSharedBytes <= 227 * 1024, "a Hopper block opts in to at most 227 KiB");
  auto* kernel = dynamic_probe_kernel<StageK, Stages>;
  DICE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(R::kSharedBytes)));
  launch_kernel("dynamic_probe_kernel", kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                R::kSharedBytes, stream, pdl, phases, count, rows, counters, unit_counters,
                order.wait, order.dynamic_stages, pdl);
}

/// f.template operator()<StageK, Stages>() for `ring`'s stage k and stage count: the one place
/// that maps ProbeRingShape to a ring. Throws dice::Error for a value outside the enum.
template <typename F>
decltype(auto) with_ring(ProbeRingShape ring, F&& f) {
  switch (ring) {
    case ProbeRingShape::kTwoOf2048:
      return f.template operator()<2048, 2>();
    case ProbeRingShape::kThreeOf2048:
      return f.template operator()<2048, 3>();
    case ProbeRingShape::kThreeOf1280:
      return f.template operator()<1280, 3>();
    case ProbeRingShape::kFourOf1280:
      return f.template operator()<1280, 4>();
    case ProbeRingShape::kFiveOf1280:
      return f.template operator()<1280, 5>();
    case ProbeRingShape::kFourOf1024:
      return f.template operator()<1024, 4>();
    case ProbeRingShape::kSixOf1024:
      return f.template operator()<1024, 6>();
  }
  throw Error("persistent probe: no such ring (" + std::to_string(static_cast<int>(ring)) + ")");
}
}  // namespace

PersistentProbe::PersistentProbe(int layers, std::vector<ProbeGemm> gemms)
    : layers_(layers), gemm_pdl_(16, true), gemm_plain_(16, false), gemms_(std::move(gemms)) {
  gemm_pdl_.set_programmatic_launch(true, true);
  const CudaBackendOptions defaults;
  for (Gemm* gemm : {&gemm_pdl_, &gemm_plain_})
    gemm->set_stream_gemm(true, defaults.stream_gemm_min_fill, defaults.stream_gemm_split);
  if (layers < 1 || gemms_.empty())
    throw Error("persistent probe: " + std::to_string(layers) + " layers of " +
                std::to_string(gemms_.size()) + " GEMMs");
  std::int64_t layer_elements = 0;
  for (const ProbeGemm& g : gemms_) {
    if (g.in < 256 || g.in % 256 != 0 || g.out < 16 || g.out % 16 != 0)
      throw Error("persistent probe: GEMM " + std::to_string(g.in) + " -> " +
                  std::to_string(g.out) + " (in a multiple of 256, out of 16)");
    layer_elements += g.in * g.out;
    max_in_ = std::max(max_in_, g.in);
    max_out_ = std::max(max_out_, g.out);
  }
  for (int l = 0; l < layers; ++l) {
    weights_.emplace_back(static_cast<std::size_t>(layer_elements * 2));
    launch_fill_random(CudaDType::kBF16, weights_.back().get(), layer_elements, 0.05f,
                       static_cast<std::uint64_t>(100 + l), nullptr);
  }
  const std::int64_t slots = static_cast<std::int64_t>(layers) * gemms_.size() + 1;
  inputs_ = DeviceBuffer(static_cast<std::size_t>(slots * 16 * max_in_ * 2));
  launch_fill_random(CudaDType::kBF16, inputs_.get(), slots * 16 * max_in_, 1.0f, 7, nullptr);
  outputs_ = DeviceBuffer(static_cast<std::size_t>(16 * max_out_ * 4));
  std::vector<Phase> table;
  auto* base = static_cast<__nv_bfloat16*>(inputs_.get());
  flagged_ = DeviceBuffer(static_cast<std::size_t>(slots * 16 * max_in_ / 2 * 8));
  DICE_CUDA_CHECK(cudaMemset(flagged_.get(), 0, flagged_.bytes()));
  epoch_ = DeviceBuffer(4);
  DICE_CUDA_CHECK(cudaMemset(epoch_.get(), 0, 4));
  auto* flagged = static_cast<std::uint64_t*>(flagged_.get());
  for (int l = 0; l < layers_; ++l) {
    const auto* w = static_cast<const __nv_bfloat16*>(weights_[static_cast<std::size_t>(l)].get());
    for (std::size_t j = 0; j < gemms_.size(); ++j) {
      const std::size_t slot = static_cast<std::size_t>(l) * gemms_.size() + j;
      const ProbeGemm& next = gemms_[(j + 1) % gemms_.size()];
      table.push_back({w, base + slot * 16 * max_in_, base + (slot + 1) * 16 * max_in_,
                       static_cast<std::int32_t>(gemms_[j].in),
                       static_cast<std::int32_t>(gemms_[j].out), static_cast<std::int32_t>(next.in),
                       flagged + slot * 16 * max_in_ / 2, flagged + (slot + 1) * 16 * max_in_ / 2});
      w += gemms_[j].in * gemms_[j].out;
    }
  }
  phases_ = DeviceBuffer(table.size() * sizeof(Phase));
  DICE_CUDA_CHECK(cudaMemcpy(phases_.get(), table.data(), phases_.bytes(), cudaMemcpyHostToDevice));
  counters_ = DeviceBuffer(table.size() * (1 + kMaxExtraBarriers) * 4);
  unit_counters_ = DeviceBuffer(table.size() * 4);
  DICE_CUDA_CHECK(cudaDeviceSynchronize());
}

std::int64_t PersistentProbe::layer_weight_bytes() const {
  std::int64_t bytes = 0;
  for (const ProbeGemm& g : gemms_) bytes += g.in * g.out * 2;
  return bytes;
}

void PersistentProbe::enqueue_persistent(int rows, int blocks, ProbeRingShape ring,
                                         const PersistentOrder& order, cudaStream_t stream) {
  check_launch(rows, blocks, order);
  if (order.flagged && !flagged_fits())
    throw Error(
        "persistent probe: flagged inputs need every GEMM's out at least the next one's in");
  const auto count = static_cast<std::int32_t>(layers_ * gemms_.size());
  if (order.flagged) {
    launch_kernel("bump_epoch_kernel", bump_epoch_kernel, dim3(1), dim3(1), 0, stream, false,
                  static_cast<unsigned*>(epoch_.get()));
  } else if (order.wait) {
    DICE_CUDA_CHECK(cudaMemsetAsync(counters_.get(), 0, counters_.bytes(), stream));
  }
  if (order.dynamic_stages > 0)
    DICE_CUDA_CHECK(cudaMemsetAsync(unit_counters_.get(), 0, unit_counters_.bytes(), stream));
  launch(static_cast<const Phase*>(phases_.get()), count, rows, blocks, ring, order, false, stream);
}

void PersistentProbe::enqueue_phase_launches(int rows, int blocks, ProbeRingShape ring, bool pdl,
                                             cudaStream_t stream, int dynamic_stages) {
  PersistentOrder order{false, 0};
  order.dynamic_stages = dynamic_stages;
  check_launch(rows, blocks, order);
  // One memset before the first launch: it would break the programmatic chain between two.
  if (dynamic_stages > 0)
    DICE_CUDA_CHECK(cudaMemsetAsync(unit_counters_.get(), 0, unit_counters_.bytes(), stream));
  const auto* phases = static_cast<const Phase*>(phases_.get());
  const auto count = static_cast<std::int64_t>(layers_) * static_cast<std::int64_t>(gemms_.size());
  for (std::int64_t p = 0; p < count; ++p)
    launch(phases + p, 1, rows, blocks, ring, order, pdl, stream);
}

bool PersistentProbe::all_units_taken(int blocks, ProbeRingShape ring, int dynamic_stages,
                                      cudaStream_t stream) const {
  // ([&]: nvcc rejects the conversion operator of a template lambda without captures.)
  const std::int64_t stage_k = with_ring(ring, [&]<int StageK, int>() { return StageK; });
  DICE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<unsigned> host(unit_counters_.bytes() / 4);
  DICE_CUDA_CHECK(cudaMemcpy(host.data(), unit_counters_.get(), unit_counters_.bytes(),
                             cudaMemcpyDeviceToHost));
  for (std::size_t p = 0; p < host.size(); ++p) {
    const ProbeGemm& g = gemms_[p % gemms_.size()];
    const std::int64_t k_stages = (g.in + stage_k - 1) / stage_k;
    const std::int64_t units = g.out / 16 * ((k_stages + dynamic_stages - 1) / dynamic_stages);
    if (host[p] != static_cast<unsigned>(units + blocks)) return false;
  }
  return true;
}

bool PersistentProbe::flagged_fits() const {
  for (std::size_t j = 0; j < gemms_.size(); ++j)
    if (gemms_[j].out < gemms_[(j + 1) % gemms_.size()].in) return false;
  return true;
}

int PersistentProbe::barriers(const PersistentOrder& order) const {
  if (!order.wait) return 0;
  int synced = 0;
  for (std::size_t j = 0; j < gemms_.size(); ++j) synced += (order.wait_mask >> j) & 1u ? 1 : 0;
  return layers_ * synced * (order.count_only ? 1 : 1 + order.extra_barriers);
}

void PersistentProbe::check_launch(int rows, int blocks, const PersistentOrder& order) {
  if (rows < 1 || rows > 16 || blocks < 1 || order.extra_barriers < 0 ||
      order.extra_barriers > kMaxExtraBarriers || order.dynamic_stages < 0 ||
      (order.dynamic_stages > 0 &&
       (order.flagged || order.extra_barriers > 0 || order.count_only || order.wait_mask != ~0u)))
    throw Error("persistent probe: rows " + std::to_string(rows) + " (1-16), blocks " +
                std::to_string(blocks) + " (1 or more), extra barriers " +
                std::to_string(order.extra_barriers) + " (0-" + std::to_string(kMaxExtraBarriers) +
                "), dynamic stages " + std::to_string(order.dynamic_stages) +
                " (0 or more; above 0 not with flagged inputs, extra barriers, count-ins only or "
                "a wait mask)");
}

void PersistentProbe::launch(const void* phases, int count, int rows, int blocks,
                             ProbeRingShape ring, const PersistentOrder& order, bool pdl,
                             cudaStream_t stream) {
  const auto* table = static_cast<const Phase*>(phases);
  auto* counters = static_cast<unsigned*>(counters_.get());
  // The phase's own unit counter, also for one phase a launch.
  auto* unit_counters = static_cast<unsigned*>(unit_counters_.get()) +
                        (table - static_cast<const Phase*>(phases_.get()));
  const auto gemms = static_cast<int>(gemms_.size());
  const auto* epoch = static_cast<const unsigned*>(epoch_.get());
  with_ring(ring, [&]<int StageK, int Stages>() {
    if (order.dynamic_stages > 0)
      launch_dynamic<StageK, Stages>(table, count, rows, blocks, counters, unit_counters, order,
                                     pdl, stream);
    else
      launch_probe<StageK, Stages>(table, count, rows, blocks, counters, order, pdl, gemms, epoch,
                                   stream);
  });
}

void PersistentProbe::enqueue_launches(int rows, bool pdl, cudaStream_t stream) {
  Gemm* gemm = pdl ? &gemm_pdl_ : &gemm_plain_;
  auto* base = static_cast<__nv_bfloat16*>(inputs_.get());
  for (int l = 0; l < layers_; ++l) {
    const auto* w = static_cast<const __nv_bfloat16*>(weights_[static_cast<std::size_t>(l)].get());
    for (std::size_t j = 0; j < gemms_.size(); ++j) {
      const std::size_t slot = static_cast<std::size_t>(l) * gemms_.size() + j;
      gemm->run(CudaDType::kBF16, base + slot * 16 * max_in_, w, outputs_.as<float>(), rows,
                gemms_[j].in, gemms_[j].out, false, stream);
      w += gemms_[j].in * gemms_[j].out;
    }
  }
}

std::int64_t PersistentProbe::stale_flagged_words(int rows, cudaStream_t stream) const {
  DICE_CUDA_CHECK(cudaStreamSynchronize(stream));
  unsigned epoch = 0;
  DICE_CUDA_CHECK(cudaMemcpy(&epoch, epoch_.get(), 4, cudaMemcpyDeviceToHost));
  std::vector<std::uint64_t> host(flagged_.bytes() / 8);
  DICE_CUDA_CHECK(
      cudaMemcpy(host.data(), flagged_.get(), flagged_.bytes(), cudaMemcpyDeviceToHost));
  std::int64_t stale = 0;
  const std::int64_t phases = static_cast<std::int64_t>(layers_) * gemms_.size();
  for (std::int64_t slot = 1; slot <= phases; ++slot) {
    const std::int64_t in = gemms_[static_cast<std::size_t>(slot % gemms_.size())].in;
    for (std::int64_t row = 0; row < rows; ++row)
      for (std::int64_t pair = 0; pair < in / 2; ++pair)
        stale +=
            host[static_cast<std::size_t>(slot * 16 * max_in_ / 2 + row * (in / 2) + pair)] >> 32 !=
                    epoch
                ? 1
                : 0;
  }
  return stale;
}

int PersistentProbe::counters_passed(int blocks, cudaStream_t stream) const {
  DICE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<unsigned> host(counters_.bytes() / 4);
  DICE_CUDA_CHECK(
      cudaMemcpy(host.data(), counters_.get(), host.size() * 4, cudaMemcpyDeviceToHost));
  int passed = 0;
  for (const unsigned c : host) passed += c >= static_cast<unsigned>(blocks) ? 1 : 0;
  return passed;
}

}  // namespace dice::engine::cuda
