// The weight-streaming wgmma GEMM (wgmma_gemm.h): y[rows, out] = x[rows, in] w[out, in]^T for
// 17-64 rows, compiled for sm_90a only (wgmma and the TMA are Hopper's).
//
// Shared memory (dynamic, 1,024-byte aligned for the 128-byte swizzle): `stages` stages
// (wgmma_stages), each kHalves (stage_k / 64) x tiles (64 rows x 64 k bf16, 8 KiB), then kHalves w
// tiles (tile_n rows x 64 k, 128 bytes a row), as the TMA writes them with
// CU_TENSOR_MAP_SWIZZLE_128B: row r's 16-byte chunk c at
// chunk c ^ (r % 8). A wgmma shared-memory descriptor (PTX ISA, "Matrix Descriptor Format") of such
// a K-major tile has the tile's address, stride byte offset 1,024 (8 rows of 128 bytes) and swizzle
// mode 128B; the k16 steps inside the 128-byte row advance its address by 32 bytes.
//
// One warpgroup (128 threads) runs the block. Thread 0 prefetches both tensor maps and issues the
// TMA copies: for the first stages, the weights before griddepcontrol.wait with early weights
// (weights do not depend on the kernel before), x after it; every stage's mbarrier expects both
// tiles' bytes. Per stage the warpgroup waits on the stage's mbarrier, runs 4 wgmma k16 steps a
// half into fp32 registers (D fragment of m64nNk16: thread t of warp w holds rows 16 w + t / 4 (+
// 8) and columns 8 c + 2 (t % 4) (+ 1) of n8 chunk c, registers 4 c + {0, 1} and 4 c + {2, 3}),
// waits for them, and the block syncs; thread 0 then refills the stage with the copies `stages`
// stages ahead.
//
// Split-K: the splits of one column tile are one cluster (dims 1 x splits). Each block writes its
// partial 64 x tile_n sums into shared memory (rows padded by 8 floats: the float2 stores of a
// half warp hit 32 distinct banks), the cluster syncs, and block r adds rows
// [r rows / splits, (r + 1) rows / splits) of every block's partial in rank (split) order through
// distributed shared memory, then y (y + sum with accumulate); a second cluster barrier keeps every
// block's shared memory alive until all have read it (a relaxed arrive: no thread waits for its y
// stores to complete first; per launch 1-5% faster on the SDAR shapes, tokens/s even,
// bench/results/2026-11-30-wgmma-barrier-h200). A thread loads its output's partials from
// all the splits before adding them (the remote loads in flight together; the same sum order):
// per launch at 64 rows under PDL SDAR-1.7B's o 5.96 -> 5.43 us, +1.1% tok/s on SDAR-1.7B at
// 16 x 1,024, SDAR-4B even (bench/results/2026-11-30-wgmma-epilogue-h200).
//
// The q/k epilogue (kQk, WgmmaQkRope; stage k 128, at most 4 splits): instead of y, warp w of a
// block takes rows row_begin + w + 4 j (j < 4) of its head vector, lane l its dimensions
// 4l..4l+3: all four rows' partial sums first, then their norms and rotations
// (qk_norm_rope.cuh), then the stores into q and the cache. At tile_n 128 a column tile is a head
// vector and the cluster is its splits (1 x splits). At tile_n 64 a head vector is two column
// tiles, and the cluster is both tiles' splits (2 x splits, rank tile + 2 split): the rows are
// shared among its 2 splits blocks, and lane l loads its partials from the blocks of tile l / 16,
// in split order (the same sum as each tile's own epilogue).

#include <cooperative_groups.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>

#include "cuda_check.h"
#include "device_memory.h"
#include "device_query.h"
#include "dice/core/error.h"
#include "launch.cuh"
#include "mbarrier.cuh"
#include "qk_norm_rope.cuh"
#include "rms_norm.cuh"
#include "swiglu.cuh"
#include "wgmma_gemm.h"

namespace dice::engine::cuda {

namespace {

constexpr int kMaxStages = 8;
constexpr int kMinStages = 2;
constexpr int kThreads = 128;
constexpr std::uint32_t kXStageBytes = 64 * 128;

constexpr std::size_t kMaxDynamicShared = 227 * 1024;  // what a Hopper block may opt in to
/// Square sums each of a row's two threads holds for the norm fold's input side (kWgmmaFoldMaxIn).
constexpr int kFoldPartsPerThread = static_cast<int>(kWgmmaFoldMaxIn / (2 * kFoldColumns));
static_assert(2 * kWgmmaRowsLimit <= kThreads);

/// A stage of `halves` 64-k halves: the x tiles (8 KiB each), then the w tiles (tile_n x 128
/// bytes each), each 1,024-byte aligned for the 128-byte swizzle.
constexpr std::uint32_t stage_bytes(int tile_n, int halves = 1) {
  return static_cast<std::uint32_t>(halves) *
         (kXStageBytes + static_cast<std::uint32_t>(tile_n) * 128);
}
constexpr int reduce_stride(int tile_n) {
  return tile_n + 8;
}
constexpr std::size_t dynamic_shared_bytes(int tile_n, int stages, int halves = 1) {
  return static_cast<std::size_t>(stages) * stage_bytes(tile_n, halves) + 1024;
}
/// The most stages of `halves` halves within kMaxDynamicShared (at most kMaxStages).
constexpr int max_stages(int tile_n, int halves) {
  const std::size_t fit = (kMaxDynamicShared - 1024) / stage_bytes(tile_n, halves);
  return fit < static_cast<std::size_t>(kMaxStages) ? static_cast<int>(fit) : kMaxStages;
}
static_assert(64 * reduce_stride(128) * 4 <= kMinStages * stage_bytes(128));
static_assert(64 * reduce_stride(64) * 4 <= kMinStages * stage_bytes(64));
static_assert(max_stages(128, 1) == kMaxStages && max_stages(128, 2) >= kMinStages);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// A 2-D TMA copy of the box at (c0 = k, c1 = row) of `map` into `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, std::uint64_t* bar,
                                         int c0, int c1, std::uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(shared_address(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(shared_address(bar)), "r"(c0), "r"(c1),
      "l"(policy)
      : "memory");
}

/// The descriptor of a K-major tile with 128-byte swizzle at shared address `address`.
__device__ __forceinline__ std::uint64_t tile_descriptor(std::uint32_t address) {
  return static_cast<std::uint64_t>((address & 0x3FFFF) >> 4) | (std::uint64_t{1} << 16) |
         (std::uint64_t{1024 >> 4} << 32) | (std::uint64_t{1} << 62);
}

template <int N>
__device__ __forceinline__ void fence_registers(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/// wgmma.mma_async m64n64k16, f32 += bf16 x bf16, A and B from shared memory (descriptors),
/// both K-major; d: this thread's 32 accumulators (PTX ISA, "Register fragments, m64nNk16").
__device__ __forceinline__ void wgmma_n64(float (&d)[32], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, "
      "%8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b));
}

/// wgmma.mma_async m64n128k16, f32 += bf16 x bf16, A and B from shared memory (descriptors),
/// both K-major; d: this thread's 64 accumulators (PTX ISA, "Register fragments, m64nNk16").
__device__ __forceinline__ void wgmma_n128(float (&d)[64], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, "
      "%8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, "
      "%40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, "
      "%56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(a), "l"(b));
}

template <int kTileN>
__device__ __forceinline__ void wgmma_tile(float (&d)[kTileN / 2], std::uint64_t a,
                                           std::uint64_t b) {
  if constexpr (kTileN == 128)
    wgmma_n128(d, a, b);
  else
    wgmma_n64(d, a, b);
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

template <int kTileN, bool kSwiglu, int kHalves, bool kQk>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm_kernel(const __grid_constant__ CUtensorMap x_map,
                      const __grid_constant__ CUtensorMap w_map, float* __restrict__ y,
                      __nv_bfloat16* __restrict__ act, std::int32_t rows, std::int32_t in,
                      std::int32_t out, std::int32_t stages, bool accumulate, bool early_weights,
                      const WgmmaNormFold fold, const __grid_constant__ WgmmaQkRope qk) {
  // Column tiles a head vector spans in the q/k epilogue (1 otherwise): the cluster's x.
  constexpr int kQkTiles = kQk ? wgmma_qk_tiles(kTileN) : 1;
  static_assert(!kQk || (kQkTiles > 0 && !kSwiglu));
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char shared_raw[];
  __shared__ alignas(8) std::uint64_t full[kMaxStages];
  unsigned char* const base = shared_raw + ((1024 - shared_address(shared_raw) % 1024) % 1024);
  constexpr std::uint32_t kStageBytes = stage_bytes(kTileN, kHalves);
  const int tid = static_cast<int>(threadIdx.x);
  const int n0 = static_cast<int>(blockIdx.x) * kTileN;
  const int split = static_cast<int>(blockIdx.y), splits = static_cast<int>(gridDim.y);
  const int k_blocks = in / (64 * kHalves);
  const int kb_begin = split * k_blocks / splits;
  const int count = (split + 1) * k_blocks / splits - kb_begin;
  const auto x_tile = [&](int s, int h) { return base + s * kStageBytes + h * kXStageBytes; };
  const auto w_tile = [&](int s, int h) {
    return base + s * kStageBytes + kHalves * kXStageBytes + h * (kTileN * 128);
  };
  // Stage s holds k block kb's halves: k (kb kHalves + h) 64, h < kHalves.
  const auto load_w = [&](int s, int kb, std::uint64_t policy) {
#pragma unroll
    for (int h = 0; h < kHalves; ++h)
      tma_load(w_tile(s, h), &w_map, &full[s], (kb * kHalves + h) * 64, n0, policy);
  };
  const auto load_x = [&](int s, int kb, std::uint64_t policy) {
#pragma unroll
    for (int h = 0; h < kHalves; ++h)
      tma_load(x_tile(s, h), &x_map, &full[s], (kb * kHalves + h) * 64, 0, policy);
  };

  // The block's share of the rows in the epilogue: one of the cluster's kQkTiles x splits.
  const int share = split * kQkTiles + static_cast<int>(blockIdx.x) % kQkTiles;
  const int shares = splits * kQkTiles;
  const int row_begin = share * rows / shares, row_end = (share + 1) * rows / shares;
  const int warp = tid / 32, lane = tid % 32;

  // The q/k epilogue's inputs (WgmmaQkRope): warp w's rows row_begin + w + 4 j, j <
  // kQkRowsPerWarp, of head vector v, the one this column tile is (or is half of); lane l holds
  // its dimensions 4l..4l+3.
  // Metadata, RoPE pairs and the norm weight are constants of the pass and the model (read early
  // with early weights); the square sums come from the kernel before (read after the wait).
  constexpr int kWarps = kThreads / 32;
  constexpr int kQkRowsPerWarp = static_cast<int>(kWgmmaQkRowsPerBlock) / kWarps;
  const auto qk_row = [&](int j) { return row_begin + warp + kWarps * j; };
  const int qk_v = n0 / kQkHeadDim;
  const bool qk_rotate = kQk && qk_v < qk.shape.heads + qk.shape.kv_heads;
  int qk_rows_end = row_end;
  float4 qk_w = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float2 qk_cs[kQkRowsPerWarp][4] = {};
  __nv_bfloat16* qk_dst[kQkRowsPerWarp] = {};
  float qk_sums[kQkRowsPerWarp][kQkFoldRaw] = {};
  const auto qk_constants = [&] {
    qk_rows_end = min(row_end, qk.meta->rows);
    const RowInfo* infos = pass_section<RowInfo>(qk.meta, qk.meta->rows_offset);
    if (qk_rotate)
      qk_w = reinterpret_cast<const float4*>(qk_v < qk.shape.heads ? qk.q_norm : qk.k_norm)[lane];
#pragma unroll
    for (int j = 0; j < kQkRowsPerWarp; ++j) {
      const int row = qk_row(j);
      if (row >= qk_rows_end) continue;
      const RowInfo info = infos[row];
      qk_dst[j] =
          qk_head_destination(qk.shape, info, row, qk_v, static_cast<__nv_bfloat16*>(qk.q_out),
                              static_cast<__nv_bfloat16*>(qk.cache.k),
                              static_cast<__nv_bfloat16*>(qk.cache.v)) +
          4 * lane;
      if (qk_rotate) qk_rope_pairs(qk.rope, info.position, lane, qk_cs[j]);
    }
  };

  std::uint64_t w_policy = 0, x_policy = 0;
  if (tid == 0) {
    // The TMA unit reads each tensor map from the kernel's parameters on its first copy: fetch
    // them now, while the barriers are set up (0.05-0.1 us a launch,
    // bench/results/2026-11-28-wgmma-producer-h200).
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(&x_map))
                 : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(&w_map))
                 : "memory");
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(w_policy));
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(x_policy));
    for (int s = 0; s < stages; ++s) barrier_init(&full[s], 1);
    barrier_init_fence();
  }
  __syncthreads();
  const int first = count < stages ? count : stages;
  if (tid == 0) {
    for (int s = 0; s < first; ++s) {
      barrier_expect(&full[s], kStageBytes);
      if (early_weights) load_w(s, kb_begin + s, w_policy);
    }
  }
  // (after the first weight copies are issued: these loads wait on one another)
  if constexpr (kQk)
    if (early_weights) qk_constants();
  wait_for_prior_grid();
  if constexpr (kQk) {
    if (!early_weights) qk_constants();
    // Loaded here, added in the epilogue: an addition here would wait for them before the k
    // loop (Nsight Compute: 18% of one launch's stall samples,
    // bench/results/2026-11-30-qkv-wgmma-h200).
    if (qk.square_sums != nullptr) {
#pragma unroll
      for (int j = 0; j < kQkRowsPerWarp; ++j)
        if (qk_row(j) < qk_rows_end)
          qk_fold_raw(qk.square_sums, qk_row(j), qk.fold_width, lane, qk_sums[j]);
    }
  }
  // The next kernel may start (its blocks wait for this grid's end before reading it): the next
  // GEMM brings its first weights while this one streams (+1.5-2.3% tok/s at 16 sequences
  // against no trigger, bench/results/2026-11-25-wgmma-gemm-h100).
  allow_next_grid();
  if (tid == 0) {
    for (int s = 0; s < first; ++s) {
      if (!early_weights) load_w(s, kb_begin + s, w_policy);
      load_x(s, kb_begin + s, x_policy);
    }
  }

  // The norm fold's input side (WgmmaNormFold): threads 2 j and 2 j + 1 load the even and odd
  // square sums of the block's row row_begin + j now, into registers, so that the loads complete
  // under the k loop; the epilogue adds them.
  const bool fold_in = kSwiglu && fold.in_square_sums != nullptr;
  const int fold_row = row_begin + tid / 2, fold_half = tid % 2;
  float fold_parts[kFoldPartsPerThread];
#pragma unroll
  for (int j = 0; j < kFoldPartsPerThread; ++j) fold_parts[j] = 0.0f;
  if (fold_in && fold_row < row_end) {
    const int parts = in / kFoldColumns;
    const float* sums = fold.in_square_sums + static_cast<std::int64_t>(fold_row) * parts;
#pragma unroll
    for (int j = 0; j < kFoldPartsPerThread; ++j)
      if (2 * j + fold_half < parts) fold_parts[j] = sums[2 * j + fold_half];
  }

  float acc[kTileN / 2];
#pragma unroll
  for (int i = 0; i < kTileN / 2; ++i) acc[i] = 0.0f;
  for (int i = 0; i < count; ++i) {
    const int s = i % stages;
    barrier_wait(&full[s], static_cast<std::uint32_t>((i / stages) & 1));
    fence_registers(acc);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      const std::uint64_t a = tile_descriptor(shared_address(x_tile(s, h)));
      const std::uint64_t b = tile_descriptor(shared_address(w_tile(s, h)));
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) wgmma_tile<kTileN>(acc, a + 2 * kk, b + 2 * kk);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    fence_registers(acc);
    __syncthreads();  // every warp's MMAs on stage s are done: it may be refilled
    if (tid == 0 && i + stages < count) {
      const int kb = kb_begin + i + stages;
      barrier_expect(&full[s], kStageBytes);
      load_w(s, kb, w_policy);
      load_x(s, kb, x_policy);
    }
  }

  // The input side's 1 / r of this block's rows: even sums in order, odd sums in order, then
  // even + odd (the cluster barrier below orders the writes before the epilogue's reads).
  __shared__ float row_scale[kWgmmaRowsLimit];
  if (fold_in) {
    float half_total = 0.0f;
#pragma unroll
    for (int j = 0; j < kFoldPartsPerThread; ++j) half_total = __fadd_rn(half_total, fold_parts[j]);
    const float odd = __shfl_xor_sync(0xffffffffu, half_total, 1);
    if (fold_half == 0 && fold_row < row_end)
      row_scale[fold_row - row_begin] =
          __fdiv_rn(1.0f, __fsqrt_rn(folded_mean_square(__fadd_rn(half_total, odd), in, fold.eps)));
  }
  // Partial sums into shared memory (the stages are free: every copy was consumed).
  constexpr int kStride = reduce_stride(kTileN);
  float* const partial = reinterpret_cast<float*>(base);
  const int row0 = warp * 16 + lane / 4;
#pragma unroll
  for (int c = 0; c < kTileN / 8; ++c)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = 8 * c + 2 * (lane % 4);
      *reinterpret_cast<float2*>(&partial[(row0 + 8 * h) * kStride + col]) =
          make_float2(acc[4 * c + 2 * h], acc[4 * c + 2 * h + 1]);
    }
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  // Every split's partial of the 4 outputs at `offset` of column tile `tile` of the cluster first
  // (the loads in flight together), then their sum in split order. Split q of tile t is cluster
  // rank t + kQkTiles q. kMaxSplits: the most splits the launch may have.
  const auto split_sum = [&]<int kMaxSplits = kWgmmaMaxSplits>(int offset, int tile = 0) {
    float4 part[kMaxSplits];
#pragma unroll
    for (int q = 0; q < kMaxSplits; ++q)
      if (q < splits)
        part[q] = *reinterpret_cast<const float4*>(
            cluster.map_shared_rank(partial, tile + kQkTiles * q) + offset);
    float4 sum = part[0];
#pragma unroll
    for (int q = 1; q < kMaxSplits; ++q)
      if (q < splits) {
        sum.x += part[q].x;
        sum.y += part[q].y;
        sum.z += part[q].z;
        sum.w += part[q].w;
      }
    return sum;
  };
  if constexpr (kQk) {
    // A warp's rows' head vectors in phases, so that the rows' loads, and their shuffle and
    // square-root chains, overlap: every row's partial sums, then every row's outputs (rows past
    // the pass's too, from rows of the partial buffer, which has kWgmmaRowsLimit), then the
    // stores of the pass's rows.
    const float eps = static_cast<float>(qk.shape.eps);
    const bool folded = qk.square_sums != nullptr;
    float4 sums[kQkRowsPerWarp], outs[kQkRowsPerWarp];
#pragma unroll
    for (int j = 0; j < kQkRowsPerWarp; ++j) {
      const int row = min(qk_row(j), static_cast<int>(kWgmmaRowsLimit) - 1);
      sums[j] = split_sum.template operator()<kWgmmaQkMaxSplits>(row * kStride + 4 * lane % kTileN,
                                                                 4 * lane / kTileN);
    }
#pragma unroll
    for (int j = 0; j < kQkRowsPerWarp; ++j) {
      const float r2 =
          folded ? qk_fold_r2(qk_fold_part_of(qk_sums[j], qk.fold_width, lane), qk.fold_width, eps)
                 : 1.0f;
      outs[j] = qk_vector_out(sums[j], qk_rotate, qk_w, qk_cs[j], folded, r2, eps, lane);
    }
#pragma unroll
    for (int j = 0; j < kQkRowsPerWarp; ++j)
      if (qk_row(j) < qk_rows_end) store4(qk_dst[j], outs[j].x, outs[j].y, outs[j].z, outs[j].w);
  }
  constexpr int kVectors = kTileN / 4;
  // Rows of a kVectors-thread group are whole (kThreads % kVectors == 0), so a 16-lane half warp
  // is all in or all out of the loop: the output side's shuffles run over the half's mask.
  static_assert(kThreads % kVectors == 0 && kVectors % 16 == 0);
  for (int idx = tid; !kQk && idx < (row_end - row_begin) * kVectors; idx += kThreads) {
    const int row = row_begin + idx / kVectors, c4 = idx % kVectors;
    float4 sum = split_sum(row * kStride + 4 * c4);
    if constexpr (kSwiglu) {
      if (fold_in) {
        const float scale = row_scale[row - row_begin];
        sum = make_float4(__fmul_rn(sum.x, scale), __fmul_rn(sum.y, scale), __fmul_rn(sum.z, scale),
                          __fmul_rn(sum.w, scale));
      }
      // Columns (gate, up) pairs: act[row, (n0 + 4 c4) / 2 + {0, 1}].
      __nv_bfloat162 pair;
      pair.x = __float2bfloat16_rn(silu_times(sum.x, sum.y));
      pair.y = __float2bfloat16_rn(silu_times(sum.z, sum.w));
      *reinterpret_cast<__nv_bfloat162*>(act + static_cast<std::int64_t>(row) * (out / 2) +
                                         (n0 + 4 * c4) / 2) = pair;
    } else {
      float4* const dst =
          reinterpret_cast<float4*>(y + static_cast<std::int64_t>(row) * out + n0) + c4;
      if (accumulate) {
        const float4 old = *dst;
        sum = make_float4(old.x + sum.x, old.y + sum.y, old.z + sum.z, old.w + sum.w);
      }
      *dst = sum;
      if (fold.norm_weight != nullptr) {
        const int col = n0 + 4 * c4;
        const float4 g = *reinterpret_cast<const float4*>(fold.norm_weight + col);
        __nv_bfloat16* const normed =
            static_cast<__nv_bfloat16*>(fold.normed) + static_cast<std::int64_t>(row) * out + col;
        store4(normed, __fmul_rn(sum.x, g.x), __fmul_rn(sum.y, g.y), __fmul_rn(sum.z, g.z),
               __fmul_rn(sum.w, g.w));
        // The 16 lanes of this 64-column group (c4 / 16) add their squares in a fixed tree.
        float squares = add_squares(0.0f, sum);
        const unsigned half_mask = 0xFFFFu << (lane & 16);
#pragma unroll
        for (int offset = 8; offset > 0; offset /= 2)
          squares = __fadd_rn(squares, __shfl_xor_sync(half_mask, squares, offset));
        if (c4 % 16 == 0)
          fold.square_sums[static_cast<std::int64_t>(row) * (out / kFoldColumns) +
                           col / kFoldColumns] = squares;
      }
    }
  }
  // The block's remote reads are done (each fed a store issued before this), so the arrive needs
  // no release: with one, every thread would first wait for its y stores to complete.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#else
  __trap();
#endif
}

/// cuTensorMapEncodeTiled from the driver the runtime uses (no link against libcuda).
void* tensor_map_encoder() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  DICE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                   cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || fn == nullptr)
    throw Error("wgmma GEMM: the driver has no cuTensorMapEncodeTiled (CUDA 12.0 or later needed)");
  return fn;
}

/// The tensor map of a row-major bf16 [rows, in] matrix read in boxes of 64 k x box_rows rows
/// with the 128-byte swizzle (rows past `rows` read as zeros).
CUtensorMap bf16_map(PFN_cuTensorMapEncodeTiled_v12000 encode, const void* base, std::int64_t rows,
                     std::int64_t in, int box_rows, const char* what) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(in), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(in) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult status =
      encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
             element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS)
    throw Error(std::string("wgmma GEMM: cuTensorMapEncodeTiled failed for ") + what + " [" +
                std::to_string(rows) + ", " + std::to_string(in) + "] (CUresult " +
                std::to_string(static_cast<int>(status)) + ")");
  return map;
}

/// Raises the kernel's dynamic shared-memory limit to its largest launch (max_stages stages).
template <int kTileN, bool kSwiglu, int kHalves, bool kQk = false>
void allow_shared_memory() {
  DICE_CUDA_CHECK(cudaFuncSetAttribute(
      wgmma_gemm_kernel<kTileN, kSwiglu, kHalves, kQk>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(dynamic_shared_bytes(kTileN, max_stages(kTileN, kHalves), kHalves))));
}

/// The launch configuration of clusters of `tiles` column tiles x `splits` splits along k over
/// out / kTileN column tiles. `attributes` (two) receives the cluster dimension and the
/// programmatic launch flag; with `pdl` false only the first is in the config.
template <int kTileN, int kHalves>
cudaLaunchConfig_t launch_config(cudaLaunchAttribute (&attributes)[2], std::int64_t out, int splits,
                                 int stages, cudaStream_t stream, bool pdl, int tiles = 1) {
  attributes[0] = {};
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = static_cast<unsigned>(tiles);
  attributes[0].val.clusterDim.y = static_cast<unsigned>(splits);
  attributes[0].val.clusterDim.z = 1;
  attributes[1] = {};
  attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(out / kTileN), static_cast<unsigned>(splits));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = dynamic_shared_bytes(kTileN, stages, kHalves);
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = pdl ? 2 : 1;
  return config;
}

template <int kTileN, bool kSwiglu, int kHalves, bool kQk = false>
void launch_tile(const CUtensorMap& x_map, const CUtensorMap& w_map, float* y, void* act,
                 std::int64_t rows, std::int64_t in, std::int64_t out, bool accumulate, int splits,
                 int stages, cudaStream_t stream, bool pdl, bool early_weights,
                 const WgmmaNormFold& fold, const WgmmaQkRope& qk) {
  const auto kernel = wgmma_gemm_kernel<kTileN, kSwiglu, kHalves, kQk>;
  cudaLaunchAttribute attributes[2];
  const cudaLaunchConfig_t config = launch_config<kTileN, kHalves>(
      attributes, out, splits, stages, stream, pdl, kQk ? wgmma_qk_tiles(kTileN) : 1);
  check_cuda(cudaLaunchKernelEx(&config, kernel, x_map, w_map, y, static_cast<__nv_bfloat16*>(act),
                                static_cast<std::int32_t>(rows), static_cast<std::int32_t>(in),
                                static_cast<std::int32_t>(out), static_cast<std::int32_t>(stages),
                                accumulate, pdl && early_weights, fold, qk),
             "wgmma_gemm_kernel", __FILE__, __LINE__);
}

/// Throws dice::Error naming what a q/k epilogue launch (WgmmaQkRope) lacks.
void check_qk_rope(const WgmmaQkRope& qk, std::int64_t rows, std::int64_t out, int tile_n,
                   int splits, int stage_k, bool accumulate, bool other_epilogue) {
  const LayerShape& s = qk.shape;
  const auto fail = [&](const std::string& what) {
    throw Error("wgmma GEMM with the q/k epilogue: rows " + std::to_string(rows) + " out " +
                std::to_string(out) + " tile_n " + std::to_string(tile_n) + " splits " +
                std::to_string(splits) + " stage k " + std::to_string(stage_k) + ": " + what);
  };
  if (wgmma_qk_tiles(tile_n) == 0 || stage_k != 128) fail("needs tile_n 64 or 128 and stage k 128");
  if (accumulate || other_epilogue) fail("does not accumulate, fold or apply SwiGLU");
  if (s.head_dim != kQkHeadDim || s.heads <= 0 || s.kv_heads <= 0 ||
      out != static_cast<std::int64_t>(s.heads + 2 * s.kv_heads) * kQkHeadDim)
    fail("needs head_dim 128 and out = (heads + 2 kv_heads) x 128 (heads " +
         std::to_string(s.heads) + ", kv_heads " + std::to_string(s.kv_heads) + ", head_dim " +
         std::to_string(s.head_dim) + ")");
  const std::int64_t shares = static_cast<std::int64_t>(splits) * wgmma_qk_tiles(tile_n);
  if ((rows + shares - 1) / shares > kWgmmaQkRowsPerBlock)
    fail("a block sums at most 16 rows of its head vectors: needs more splits");
  if (splits > kWgmmaQkMaxSplits) fail("at most 4 splits");
  if (qk.q_norm == nullptr || qk.k_norm == nullptr || qk.rope == nullptr || qk.q_out == nullptr ||
      qk.cache.k == nullptr || qk.cache.v == nullptr)
    fail("a null norm weight, RoPE table, q output or cache");
  if (!aligned_to(qk.q_out, 8) || !aligned_to(qk.cache.k, 8) || !aligned_to(qk.cache.v, 8) ||
      !aligned_to(qk.q_norm, 16) || !aligned_to(qk.k_norm, 16) || !aligned_to(qk.rope, 8))
    fail("outputs must be 8-byte aligned, norm weights 16-byte aligned");
  if (qk.square_sums != nullptr && (qk.fold_width <= 0 || qk.fold_width % kFoldColumns != 0 ||
                                    qk.fold_width > kQkFoldRaw * 32 * kFoldColumns))
    fail("a folded norm width of " + std::to_string(qk.fold_width) +
         " (a positive multiple of 64 up to 4,096 needed)");
}

}  // namespace

int wgmma_qk_rope_splits(std::int64_t rows, std::int64_t in, std::int64_t out, int sms, int stage_k,
                         int tile_n) {
  const int tiles = wgmma_qk_tiles(tile_n);
  if (stage_k != 128 || rows <= 0 || tiles == 0) return 0;
  const std::int64_t per_split = kWgmmaQkRowsPerBlock * tiles;
  const std::int64_t least = (rows + per_split - 1) / per_split;
  const int most = std::min(wgmma_max_splits(in, stage_k), kWgmmaQkMaxSplits);
  if (least > most) return 0;
  return std::clamp(wgmma_default_splits(in, out, tile_n, sms, stage_k), static_cast<int>(least),
                    most);
}

bool wgmma_gemm_fits(std::int64_t rows, std::int64_t in, std::int64_t out, int tile_n,
                     const void* x, const void* w, const void* y) {
  return (tile_n == 64 || tile_n == 128) && rows >= 1 && rows <= kWgmmaRowsLimit && in > 0 &&
         in % kWgmmaTileK == 0 && in <= (std::int64_t{1} << 24) && out > 0 && out % tile_n == 0 &&
         out / tile_n <= std::int64_t{1} << 30 && aligned_to(x, 16) && aligned_to(w, 16) &&
         aligned_to(y, 16);
}

int wgmma_stages(int tile_n, std::int64_t blocks, int sms, int shared_per_sm, int stage_k) {
  const int halves = stage_k == 128 ? 2 : 1;
  // At least two blocks per SM: a cluster's blocks must find room on SMs of one GPC (at one block
  // per SM with 8 stages, SDAR-1.7B's o in clusters of 4 took 14.3 against 8.6 us at 6 stages).
  const std::int64_t per_sm = std::clamp<std::int64_t>((blocks + sms - 1) / std::max(sms, 1), 2, 3);
  // Each block also has 1 KiB reserved by the system, 1 KiB of alignment slack and its static
  // barriers: 7 stages of 16 KiB leave no room for a second block (SDAR-1.7B's gate/up, 192
  // blocks, took 31.4 us at 7 stages against 22.2 us at 4).
  const std::int64_t room = shared_per_sm / per_sm - 4096;
  return static_cast<int>(std::clamp<std::int64_t>(room / stage_bytes(tile_n, halves), kMinStages,
                                                   max_stages(tile_n, halves)));
}

int wgmma_max_splits(std::int64_t in, int stage_k) {
  if ((stage_k != 64 && stage_k != 128) || in < stage_k || in % stage_k != 0) return 0;
  return static_cast<int>(std::min<std::int64_t>(kWgmmaMaxSplits, in / stage_k));
}

std::vector<int> wgmma_split_options(std::int64_t in, int stage_k) {
  std::vector<int> options(static_cast<std::size_t>(wgmma_max_splits(in, stage_k)));
  std::iota(options.begin(), options.end(), 1);
  return options;
}

int wgmma_default_splits(std::int64_t in, std::int64_t out, int tile_n, int sms, int stage_k) {
  const std::int64_t tiles = out / tile_n;
  const int most = wgmma_max_splits(in, stage_k);
  for (int s = 1; s <= most; ++s)
    if (16 * tiles * s >= 15 * static_cast<std::int64_t>(sms)) return s;
  return most > 0 ? most : 1;
}

std::int64_t wgmma_block_k(std::int64_t in, std::int64_t out, int tile_n, int sms, int stage_k) {
  return in / wgmma_default_splits(in, out, tile_n, sms, stage_k);
}

std::int64_t wgmma_auto_min_block_k(double peak_bytes_per_s, int sms) {
  if (!(peak_bytes_per_s > 0.0) || !std::isfinite(peak_bytes_per_s) || sms <= 0)
    return std::numeric_limits<std::int64_t>::max();
  // (finite: at most ~1e21 bytes/s from int attributes, so k stays far below INT64_MAX)
  const double k = kWgmmaMinBlockSeconds * peak_bytes_per_s /
                   (static_cast<double>(kWgmmaTileN) * 2.0 * static_cast<double>(sms));
  return static_cast<std::int64_t>(std::ceil(k / static_cast<double>(kWgmmaTileK))) * kWgmmaTileK;
}

bool wgmma_gemm_supported() {
  return device_attribute(cudaDevAttrComputeCapabilityMajor) == 9;
}

WgmmaGemm::WgmmaGemm() {
  int device = 0;
  DICE_CUDA_CHECK(cudaGetDevice(&device));
  if (!wgmma_gemm_supported())
    throw Error("wgmma GEMM: device " + std::to_string(device) +
                " is not compute capability 9.x; the kernels are built for sm_90a only");
  sms_ = device_attribute(cudaDevAttrMultiProcessorCount);
  shared_per_sm_ = device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
  encode_ = tensor_map_encoder();
  allow_shared_memory<64, false, 1>();
  allow_shared_memory<64, true, 1>();
  allow_shared_memory<128, false, 1>();
  allow_shared_memory<128, true, 1>();
  allow_shared_memory<64, false, 2>();
  allow_shared_memory<64, true, 2>();
  allow_shared_memory<128, false, 2>();
  allow_shared_memory<128, true, 2>();
  allow_shared_memory<64, false, 2, true>();
  allow_shared_memory<128, false, 2, true>();
}

void WgmmaGemm::launch(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                       std::int64_t out, bool accumulate, int tile_n, int splits,
                       cudaStream_t stream, bool pdl, bool early_weights, void* swiglu_act,
                       int stage_k, const WgmmaNormFold& fold, const WgmmaQkRope& qk) const {
  const bool known_split = splits >= 1 && splits <= wgmma_max_splits(in, stage_k);
  const void* y_or_act = swiglu_act != nullptr ? swiglu_act : y;
  if (!wgmma_gemm_fits(rows, in, out, tile_n, x, w, y_or_act) || !known_split)
    throw Error("wgmma GEMM: rows " + std::to_string(rows) + " in " + std::to_string(in) + " out " +
                std::to_string(out) + " with tile_n " + std::to_string(tile_n) + ", " +
                std::to_string(splits) + " splits and stage k " + std::to_string(stage_k) +
                " is not a shape it takes (rows 1..64, stage k 64 or 128 dividing in, out a "
                "multiple of tile_n 64 or 128, 1..min(8, in / stage k) splits, 16-byte aligned)");
  if (swiglu_act != nullptr && accumulate)
    throw Error("wgmma GEMM with a SwiGLU epilogue: rows " + std::to_string(rows) + " out " +
                std::to_string(out) + " asks to accumulate, which the epilogue does not do");
  const bool output_side =
      fold.norm_weight != nullptr || fold.normed != nullptr || fold.square_sums != nullptr;
  if (output_side &&
      (swiglu_act != nullptr || fold.norm_weight == nullptr || fold.normed == nullptr ||
       fold.square_sums == nullptr || out % kFoldColumns != 0 || !aligned_to(fold.normed, 8) ||
       !aligned_to(fold.norm_weight, 16)))
    throw Error("wgmma GEMM norm fold: the output side (out " + std::to_string(out) +
                ") needs norm_weight (16-byte aligned), normed (8-byte aligned) and square_sums, "
                "out a multiple of 64 and no SwiGLU epilogue");
  if (fold.in_square_sums != nullptr &&
      (swiglu_act == nullptr || in % kFoldColumns != 0 || in > kWgmmaFoldMaxIn))
    throw Error("wgmma GEMM norm fold: the input side (in " + std::to_string(in) +
                ") needs the SwiGLU epilogue and in a multiple of 64, at most 4,096");
  if (qk.meta != nullptr)
    check_qk_rope(qk, rows, out, tile_n, splits, stage_k, accumulate,
                  swiglu_act != nullptr || output_side || fold.in_square_sums != nullptr);
  const auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(encode_);
  const CUtensorMap x_map = bf16_map(encode, x, rows, in, 64, "x");
  const CUtensorMap w_map = bf16_map(encode, w, out, in, tile_n, "w");
  const int stages = wgmma_stages(tile_n, (out / tile_n) * splits, sms_, shared_per_sm_, stage_k);
  const bool swiglu = swiglu_act != nullptr;
  if (qk.meta != nullptr)
    return (tile_n == 64 ? launch_tile<64, false, 2, true>
                         : launch_tile<128, false, 2, true>)(x_map, w_map, nullptr, nullptr, rows,
                                                             in, out, false, splits, stages, stream,
                                                             pdl, early_weights, fold, qk);
  const auto launch =
      stage_k == 128
          ? (tile_n == 128 ? (swiglu ? launch_tile<128, true, 2> : launch_tile<128, false, 2>)
                           : (swiglu ? launch_tile<64, true, 2> : launch_tile<64, false, 2>))
          : (tile_n == 128 ? (swiglu ? launch_tile<128, true, 1> : launch_tile<128, false, 1>)
                           : (swiglu ? launch_tile<64, true, 1> : launch_tile<64, false, 1>));
  launch(x_map, w_map, y, swiglu_act, rows, in, out, accumulate, splits, stages, stream, pdl,
         early_weights, fold, qk);
}

int WgmmaGemm::max_active_clusters(std::int64_t in, std::int64_t out, int tile_n, int splits,
                                   int stage_k) const {
  if ((tile_n != 64 && tile_n != 128) || out <= 0 || out % tile_n != 0 || splits < 1 ||
      splits > wgmma_max_splits(in, stage_k))
    throw Error("wgmma GEMM occupancy: in " + std::to_string(in) + " out " + std::to_string(out) +
                " with tile_n " + std::to_string(tile_n) + ", stage k " + std::to_string(stage_k) +
                " and " + std::to_string(splits) + " splits is not a launch it makes");
  const int stages = wgmma_stages(tile_n, (out / tile_n) * splits, sms_, shared_per_sm_, stage_k);
  cudaLaunchAttribute attributes[2];
  int clusters = 0;
  const auto query = [&]<int kTileN, int kHalves>() {
    const cudaLaunchConfig_t config =
        launch_config<kTileN, kHalves>(attributes, out, splits, stages, nullptr, false);
    DICE_CUDA_CHECK(cudaOccupancyMaxActiveClusters(
        &clusters, wgmma_gemm_kernel<kTileN, false, kHalves, false>, &config));
  };
  if (tile_n == 128)
    stage_k == 128 ? query.operator()<128, 2>() : query.operator()<128, 1>();
  else
    stage_k == 128 ? query.operator()<64, 2>() : query.operator()<64, 1>();
  return clusters;
}

}  // namespace dice::engine::cuda
