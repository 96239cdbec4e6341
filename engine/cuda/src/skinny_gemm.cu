// The skinny bf16 GEMM (skinny_gemm.h): y[rows, out] = x[rows, in] w[out, in]^T for few rows.
//
// Fragments of mma.m16n8k16.row.col (PTX ISA): with g = lane / 4 and t = lane % 4, B (16 x 8,
// col) regs {b0b1, b2b3} hold (k 2t..2t+1, n g) and (k 2t+8..2t+9, n g); A (16 x 16, row) regs
// hold (g, 2t..), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..); C holds (g, 2t), (g, 2t+1),
// (g+8, 2t), (g+8, 2t+1). The lower-indexed element sits in the lower 16 bits.
//
// w is [out, in] row-major, so 8 rows of w over 32 consecutive k are one 16-byte load per lane:
// lane (g, t) loads w[n0 + g][k0 + 8t .. k0 + 8t + 7] as 4 registers r0..r3. A dot product does
// not depend on the order of k, so the chunk runs as two k16 MMAs over a fixed permutation of k:
// MMA 1 takes b = (r0, r1), i.e. logical k {2t, 2t+1, 2t+8, 2t+9} = real k0 + 8t + {0, 1, 2, 3};
// MMA 2 takes b = (r2, r3) (real k0 + 8t + {4..7}). x is loaded with the same permutation: lane
// (g, t) loads x[m0 + g][k0 + 8t ..] (xl) and x[m0 + g + 8][..] (xh), and MMA 1 takes a =
// (xl.0, xh.0, xl.1, xh.1), MMA 2 a = (xl.2, xh.2, xl.3, xh.3). Rows at or past `rows` are zero
// registers (no loads).
//
// Grid: one block per 8 n_tiles output columns; its kSkinnyWarps warps split the k chunks into
// contiguous shares (warp w: chunks [C w / W, C (w + 1) / W)), each warp computing every column
// of the block over its share with several 16-byte weight loads in flight (n_tiles x unroll =
// 8), then the warps' partial sums meet in shared memory and are added in warp order: the sum
// order of an output depends on neither timing nor n_tiles.
//
// With a fused norm (GemmNorm), x is RMSNorm(residual) computed by the block itself: it sums
// the rows' squares exactly as rms_norm_vec_kernel does (same thread layout, rms_norm.cuh's
// rounded arithmetic, block_sum's order), writes the normalised bf16 rows into shared memory
// (rows padded by 16 bytes against bank conflicts), and the warps read their A fragments from
// there: the same x bits as the norm kernel's output, so the same y bits, one launch fewer.
//
// With a SwiGLU epilogue, y is not written: w's rows alternate gate and up (swiglu.cuh), so an
// output pair (2i, 2i + 1) of one row sits in one lane's C registers (r, r + 1), and the block
// writes bf16(silu(gate) * up) at [row, i] of the down projection's input: the sums in the same
// warp order and swiglu.cuh's arithmetic, so the same bits as the plain epilogue then
// launch_swiglu, one launch (and the fp32 gate/up round trip) fewer.
//
// With staging (SkinnyStaging: the o projection under PDL, which starts while the attention runs),
// each warp copies its share's chunks past the first U into its area of dynamic shared memory
// with cp.async before the wait (the first U go to registers as early weights), in batches of
// batch_rounds rounds each landed before the next, and reads its own copies back after it: the
// same values in the same order, so the same bits, and no weight load left after the wait.
//
// Accumulating, a thread reads its outputs' old values right after the wait, beside its first x
// loads, and adds its sums to them at the end: the same bits as reading them there, one global
// round trip fewer at the end of the launch (+0.8% on SDAR-4B at 1 sequence, H200:
// bench/results/2026-12-01-attention-o-overlap-h200).

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_check.h"
#include "device_memory.h"
#include "device_utils.cuh"
#include "dice/core/error.h"
#include "launch.cuh"
#include "rms_norm.cuh"
#include "skinny_gemm.h"
#include "skinny_mma.cuh"
#include "swiglu.cuh"

namespace dice::engine::cuda {

namespace {

/// 16 bytes of weights, read once per forward: not kept in L1, first out of L2.
__device__ __forceinline__ uint4 load_streaming(const __nv_bfloat16* p, std::uint64_t policy) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}

/// 16 bytes of weights copied into shared memory (cp.async, L2 evict-first), read later by the
/// same thread after cp_async_wait_all().
__device__ __forceinline__ void copy_streaming(void* dst, const __nv_bfloat16* src,
                                               std::uint64_t policy) {
  const auto d = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "l"(policy)
               : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/// The A fragments of chunk `chunk`: x_lane points at row g, k = 8t, rows `stride` elements
/// apart; rows m * 16 + g (xl) and m * 16 + g + 8 (xh) at or past `rows` are zeros.
template <int MT, bool kShared>
__device__ __forceinline__ void load_x(const __nv_bfloat16* x_lane, std::int32_t stride,
                                       std::int32_t rows_left, std::int32_t chunk, uint4 (&xl)[MT],
                                       uint4 (&xh)[MT]) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const __nv_bfloat16* lo = x_lane + (m * 16) * stride + chunk * 32;
    xl[m] = m * 16 < rows_left ? load16<kShared>(lo) : zero;
    xh[m] = m * 16 + 8 < rows_left ? load16<kShared>(lo + 8 * stride) : zero;
  }
}

static_assert(kSkinnyWarps * 32 == 256 && kGemmNormRowsLimit == kNormRowsLimit,
              "the fused norm is normalise_rows (rms_norm.cuh): 256 threads, up to 16 rows");

/// MT m16 tiles x NT n8 tiles per block; U chunks of weights loaded before the first MMA.
/// kNorm: x is RMSNorm(norm.residual), made by the block into dynamic shared memory (MT == 1).
/// kSwiglu: act [rows, out / 2] (bf16) = silu(gate) * up of the output pairs, y not written.
template <int MT, int NT, int U, bool kNorm, bool kSwiglu>
__global__ void __launch_bounds__(kSkinnyWarps * 32, 2)
    skinny_gemm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                       float* __restrict__ y, std::int32_t rows, std::int32_t in, std::int32_t out,
                       bool accumulate, GemmNorm norm, __nv_bfloat16* __restrict__ act,
                       bool early_weights, std::int32_t staged, std::int32_t batch_rounds,
                       bool early_y) {
  static_assert(!kNorm || MT == 1, "the fused norm takes at most 16 rows");
  constexpr int kRegs = MT * NT * 4;  // accumulators per lane
  __shared__ float partial[kSkinnyWarps][kRegs][32];
  extern __shared__ __align__(16) unsigned char normed_raw[];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x) * NT * 8;
  const std::int32_t chunks = in / 32;
  const std::int32_t begin = chunks * warp / kSkinnyWarps;
  const std::int32_t end = chunks * (warp + 1) / kSkinnyWarps;

  // This lane's first weight (row n0 + g, k = 8t) and x element (row g, k = 8t); n8 tile j is
  // 8 j rows further, m16 tile m 16 m rows further. rows_left: rows past this lane's row g.
  // With kNorm, x is the normalised rows in shared memory (row stride in + 8).
  const __nv_bfloat16* w_lane = w + (n0 + g) * in + 8 * t;
  const std::uint64_t policy = evict_first_policy();
  // The weights of the first U chunks, loaded before anything that depends on the kernel before
  // this one: with `early_weights` before wait_for_prior_grid() (weights are read-only during a
  // forward: launch.cuh, "Early start"), and with kNorm before the norm prologue.
  uint4 b[U][NT];
  const auto load_b = [&](std::int32_t c0) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < NT; ++j)
        b[u][j] = load_streaming(w_lane + j * 8 * in + (c0 + u) * 32, policy);
  };
  const bool first_loaded = begin + U <= end;
  // Staged chunks (skinny_staged_chunks): [begin + U, begin + U + stage) copied into this warp's
  // area of dynamic shared memory before the wait, with the first U in registers, so that no
  // weight load is left after it; each lane reads back only its own 16-byte copies (no barrier).
  std::int32_t stage = 0;
  uint4* stage_area = nullptr;
  if constexpr (!kNorm) {
    if (early_weights && first_loaded && staged > 0) {
      stage = min(staged, (end - begin - U) / U * U);
      stage_area =
          reinterpret_cast<uint4*>(normed_raw) + static_cast<std::size_t>(warp) * staged * NT * 32;
      for (std::int32_t r = 0; r < stage; ++r) {
#pragma unroll
        for (int j = 0; j < NT; ++j)
          copy_streaming(stage_area + (r * NT + j) * 32 + lane,
                         w_lane + j * 8 * in + (begin + U + r) * 32, policy);
        // A batch lands before the next is issued (SkinnyStaging::batch_rounds).
        if (batch_rounds > 0 && (r + 1) % batch_rounds == 0) cp_async_wait_all();
      }
    }
  }
  if (early_weights && first_loaded) load_b(begin);
  // The epilogue's outputs of this thread (e = threadIdx.x + kThreads i) and, with `accumulate`,
  // their old values, read beside the first x loads instead of after the k loop (one global
  // round trip fewer at the end of the launch); with early_y (launch_skinny_gemm) before the wait.
  constexpr int kThreads = kSkinnyWarps * 32;
  constexpr int kOutputs = kSwiglu ? 1 : (kRegs * 32 + kThreads - 1) / kThreads;
  float y_old[kOutputs];
  const auto read_y_old = [&] {
    if constexpr (!kSwiglu) {
#pragma unroll
      for (int i = 0; i < kOutputs; ++i) {
        const int e = static_cast<int>(threadIdx.x) + kThreads * i;
        const int2 o = output_of<NT>(e / 32, e % 32);
        y_old[i] = accumulate && e < kRegs * 32 && o.x < rows
                       ? y[static_cast<std::int64_t>(o.x) * out + n0 + o.y]
                       : 0.0f;
      }
    }
  };
  if (early_y) read_y_old();
  wait_for_prior_grid();
  if constexpr (kSwiglu) allow_next_grid();  // the down projection may start (launch.cuh)
  if (!early_weights && first_loaded) load_b(begin);
  const __nv_bfloat16* x_rows = x;
  std::int32_t x_stride = in;
  if constexpr (kNorm) {
    auto* normed = reinterpret_cast<__nv_bfloat16*>(normed_raw);
    normalise_rows(norm.residual, load_norm_weight(norm.weight, in), norm.eps, rows, in, normed,
                   [] { __syncthreads(); });
    x_rows = normed;
    x_stride = in + 8;
  }
  const __nv_bfloat16* x_lane = x_rows + g * x_stride + 8 * t;
  const std::int32_t rows_left = rows - g;
  if (!early_y) read_y_old();

  float acc[MT][NT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[m][j][r] = 0.0f;

  std::int32_t c = begin;
  for (; c + U <= end; c += U) {
    if (c != begin) {                         // (the first U chunks are in registers)
      const std::int32_t r0 = c - begin - U;  // this iteration's place among the staged chunks
      if (r0 < stage) {
        if (r0 == 0) cp_async_wait_all();  // this thread's own copies have landed
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int j = 0; j < NT; ++j) b[u][j] = stage_area[((r0 + u) * NT + j) * 32 + lane];
      } else {
        load_b(c);
      }
    }
    // The x fragments of all U chunks are loaded before the first MMA too, not one chunk at a
    // time between the MMAs (Nsight Compute, 1.7B at 1 sequence: 4.6% less time per launch;
    // tokens/s unchanged within noise: bench/results/2026-11-23-engine-pdl-h100).
    uint4 xl[U][MT], xh[U][MT];
#pragma unroll
    for (int u = 0; u < U; ++u) load_x<MT, kNorm>(x_lane, x_stride, rows_left, c + u, xl[u], xh[u]);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_chunk(acc[m][j], xl[u][m], xh[u][m], b[u][j]);
  }
  for (; c < end; ++c) {  // the share's last chunks, one at a time
    uint4 b[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) b[j] = load_streaming(w_lane + j * 8 * in + c * 32, policy);
    uint4 xl[MT], xh[MT];
    load_x<MT, kNorm>(x_lane, x_stride, rows_left, c, xl, xh);
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int j = 0; j < NT; ++j) mma_chunk(acc[m][j], xl[m], xh[m], b[j]);
  }

#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) partial[warp][(m * NT + j) * 4 + r][lane] = acc[m][j][r];
  __syncthreads();
  if constexpr (kSwiglu) {
    // Pairs (reg, reg + 1), reg even: gate (even column) and up of one row, input (n0 + column)
    // / 2 of the down projection.
    for (int e = static_cast<int>(threadIdx.x); e < kRegs / 2 * 32; e += kThreads) {
      const int reg = 2 * (e / 32), l = e % 32;
      const int2 o = output_of<NT>(reg, l);
      if (o.x >= rows) continue;
      const float gate = warps_total(partial, reg, l), up = warps_total(partial, reg + 1, l);
      act[static_cast<std::int64_t>(o.x) * (out / 2) + (n0 + o.y) / 2] =
          __float2bfloat16_rn(silu_times(gate, up));
    }
  } else {
#pragma unroll
    for (int i = 0; i < kOutputs; ++i) {
      const int e = static_cast<int>(threadIdx.x) + kThreads * i;
      const int reg = e / 32, l = e % 32;
      const int2 o = output_of<NT>(reg, l);
      if (e >= kRegs * 32 || o.x >= rows) continue;
      const float sum = warps_total(partial, reg, l);
      y[static_cast<std::int64_t>(o.x) * out + n0 + o.y] = accumulate ? y_old[i] + sum : sum;
    }
  }
}

/// Weight loads of 16 bytes in flight per lane before the first MMA: 8 with one m16 tile, fewer
/// with more (the x fragments take the registers; ptxas -v shows no spills inside the loop).
constexpr int loads_per_lane(int m_tiles) {
  return m_tiles == 1 ? 8 : m_tiles == 2 ? 4 : 2;
}

/// Chunks per iteration (the kernel's U) with m_tiles x n_tiles tiles.
constexpr int unroll_of(int m_tiles, int n_tiles) {
  return loads_per_lane(m_tiles) / n_tiles > 0 ? loads_per_lane(m_tiles) / n_tiles : 1;
}

template <int MT, int NT, bool kNorm, bool kSwiglu>
void launch_tiles(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                  std::int64_t out, bool accumulate, const GemmNorm& norm, void* act,
                  cudaStream_t stream, bool pdl, bool early_weights, SkinnyStaging staging,
                  bool y_ready) {
  constexpr int kUnroll = unroll_of(MT, NT);
  const auto kernel = skinny_gemm_kernel<MT, NT, kUnroll, kNorm, kSwiglu>;
  std::size_t shared = 0;
  std::int32_t staged = 0;
  if constexpr (kNorm) {
    shared = gemm_norm_shared_bytes(rows, in);
    DICE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kSkinnyNormSharedLimit)));
  } else if ((staged = skinny_launch_staged_chunks(staging, early_weights, rows, in, NT)) > 0) {
    shared = skinny_stage_bytes(staged, NT);
    DICE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(shared)));
  }
  const auto blocks = static_cast<unsigned>(out / (8 * NT));
  const char* name = kNorm ? (kSwiglu ? "skinny_gemm_kernel (fused RMSNorm, SwiGLU)"
                                      : "skinny_gemm_kernel (fused RMSNorm)")
                           : (kSwiglu ? "skinny_gemm_kernel (SwiGLU)" : "skinny_gemm_kernel");
  launch_kernel(name, kernel, blocks, kSkinnyWarps * 32, shared, stream, pdl,
                static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w), y,
                static_cast<std::int32_t>(rows), static_cast<std::int32_t>(in),
                static_cast<std::int32_t>(out), accumulate, norm, static_cast<__nv_bfloat16*>(act),
                early_weights, staged, staging.batch_rounds,
                !kSwiglu && reads_y_early(y_ready, accumulate, pdl, early_weights));
}

using Launcher = void (*)(const void*, const void*, float*, std::int64_t, std::int64_t,
                          std::int64_t, bool, const GemmNorm&, void*, cudaStream_t, bool, bool,
                          SkinnyStaging, bool);

/// The launcher of MT m16 tiles and n_tiles n8 tiles (one of skinny_n_tile_options: MT x n <= 8).
template <int MT, bool kNorm, bool kSwiglu>
Launcher launcher_of_n_tiles(int n_tiles) {
  if (n_tiles == 1) return launch_tiles<MT, 1, kNorm, kSwiglu>;
  if constexpr (MT * 4 <= 8)
    if (n_tiles == 4) return launch_tiles<MT, 4, kNorm, kSwiglu>;
  return launch_tiles<MT, 2, kNorm, kSwiglu>;
}

/// The launcher for m_tiles x n_tiles; kNorm takes one m16 tile (skinny_norm_fits).
template <bool kNorm, bool kSwiglu>
Launcher launcher_for(int m_tiles, int n_tiles) {
  if constexpr (kNorm) {
    return launcher_of_n_tiles<1, true, kSwiglu>(n_tiles);
  } else {
    if (m_tiles == 1) return launcher_of_n_tiles<1, false, kSwiglu>(n_tiles);
    if (m_tiles == 2) return launcher_of_n_tiles<2, false, kSwiglu>(n_tiles);
    return launcher_of_n_tiles<4, false, kSwiglu>(n_tiles);
  }
}

}  // namespace

bool skinny_gemm_fits(bool bf16, std::int64_t rows, std::int64_t in, std::int64_t out,
                      std::int64_t max_rows, const void* x, const void* w, const void* y) {
  return bf16 && rows >= 1 && rows <= max_rows && rows <= kSkinnyRowsLimit && in > 0 &&
         in % 32 == 0 && in <= (std::int64_t{1} << 30) && out > 0 && out % 8 == 0 &&
         out / 8 <= std::int64_t{1} << 30 && aligned_to(x, 16) && aligned_to(w, 16) &&
         aligned_to(y, 16);
}

int skinny_m_tiles(std::int64_t rows) {
  return rows <= 16 ? 1 : rows <= 32 ? 2 : 4;
}

std::vector<int> skinny_n_tile_options(std::int64_t rows, std::int64_t out) {
  std::vector<int> options;
  for (const int n : {1, 2, 4})
    if (out % (8 * n) == 0 && skinny_m_tiles(rows) * n <= 8) options.push_back(n);
  return options;
}

int skinny_default_n_tiles(std::int64_t rows, std::int64_t out, int sms) {
  const std::vector<int> options = skinny_n_tile_options(rows, out);
  for (auto it = options.rbegin(); it != options.rend(); ++it)
    if (out / (8 * *it) >= 2 * static_cast<std::int64_t>(sms)) return *it;
  return 1;
}

std::int32_t skinny_staged_chunks(std::int64_t rows, std::int64_t in, int n_tiles) {
  const int unroll = unroll_of(skinny_m_tiles(rows), n_tiles);
  const std::int64_t longest = (in / 32 + kSkinnyWarps - 1) / kSkinnyWarps;
  const std::int64_t chunks = std::max<std::int64_t>(0, longest - unroll) / unroll * unroll;
  return skinny_stage_bytes(static_cast<std::int32_t>(chunks), n_tiles) <= kSkinnyStageLimit
             ? static_cast<std::int32_t>(chunks)
             : 0;
}

std::size_t skinny_stage_bytes(std::int32_t chunks, int n_tiles) {
  return static_cast<std::size_t>(chunks) * kSkinnyWarps * static_cast<std::size_t>(n_tiles) * 512;
}

std::size_t gemm_norm_shared_bytes(std::int64_t rows, std::int64_t in) {
  return static_cast<std::size_t>(std::max<std::int64_t>(rows, 0)) *
         static_cast<std::size_t>(std::max<std::int64_t>(in + 8, 0)) * 2;
}

bool norm_prologue_fits(std::int64_t rows, std::int64_t in, const GemmNorm& norm) {
  return rows >= 1 && rows <= kGemmNormRowsLimit && in <= 4 * kNormVec * 256 && norm.eps > 0.0f &&
         aligned_to(norm.residual, 16) && aligned_to(norm.weight, 16);
}

bool skinny_norm_fits(std::int64_t rows, std::int64_t in, const GemmNorm& norm) {
  return norm_prologue_fits(rows, in, norm) && in % 32 == 0 &&
         gemm_norm_shared_bytes(rows, in) <= kSkinnyNormSharedLimit;
}

void launch_skinny_gemm(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                        std::int64_t out, bool accumulate, int n_tiles, cudaStream_t stream,
                        bool pdl, const GemmNorm* norm, void* swiglu_act, bool early_weights,
                        SkinnyStaging staging, bool y_ready) {
  bool known = false;
  for (const int n : skinny_n_tile_options(rows, out)) known = known || n == n_tiles;
  const void* x_or_norm = norm != nullptr ? static_cast<const void*>(norm->residual) : x;
  const void* y_or_act = swiglu_act != nullptr ? swiglu_act : y;
  if (!skinny_gemm_fits(true, rows, in, out, kSkinnyRowsLimit, x_or_norm, w, y_or_act) || !known)
    throw Error("skinny GEMM: rows " + std::to_string(rows) + " in " + std::to_string(in) +
                " out " + std::to_string(out) + " with " + std::to_string(n_tiles) +
                " n8 tiles per block is not a shape it takes (rows 1.." +
                std::to_string(kSkinnyRowsLimit) +
                ", in a multiple of 32, out a multiple of 8 n tiles, 16-byte aligned)");
  if (norm != nullptr && !skinny_norm_fits(rows, in, *norm))
    throw Error("skinny GEMM with a fused RMSNorm: rows " + std::to_string(rows) + " in " +
                std::to_string(in) + " is not a shape it takes (rows 1.." +
                std::to_string(kGemmNormRowsLimit) +
                ", in at most 4,096, eps > 0, residual and weight 16-byte aligned)");
  if (staging.batch_rounds < 0 || staging.batch_rounds > kStageBatchRoundsLimit)
    throw Error("skinny GEMM: staging batch of " + std::to_string(staging.batch_rounds) +
                " rounds is outside 0.." + std::to_string(kStageBatchRoundsLimit));
  if (swiglu_act != nullptr && accumulate)
    throw Error("skinny GEMM with a SwiGLU epilogue: rows " + std::to_string(rows) + " out " +
                std::to_string(out) + " asks to accumulate, which the epilogue does not do");
  const GemmNorm args = norm != nullptr ? *norm : GemmNorm{};
  const int m_tiles = skinny_m_tiles(rows);
  const bool swiglu = swiglu_act != nullptr;
  const Launcher launch = norm != nullptr ? (swiglu ? launcher_for<true, true>(m_tiles, n_tiles)
                                                    : launcher_for<true, false>(m_tiles, n_tiles))
                                          : (swiglu ? launcher_for<false, true>(m_tiles, n_tiles)
                                                    : launcher_for<false, false>(m_tiles, n_tiles));
  launch(x, w, y, rows, in, out, accumulate, args, swiglu_act, stream, pdl, early_weights, staging,
         y_ready);  // the fused-norm launchers ignore the staging
}

}  // namespace dice::engine::cuda
