// The cluster bf16 GEMM (cluster_gemm.h): y[rows, out] = x[rows, in] w[out, in]^T for 17-128 rows.
//
// Shared memory of a block: `kStages` stages, each w's tile (128 rows of w = output columns, 64 k)
// then x's tile (NT rows, 64 k), rows padded from 128 to 144 bytes so that the 8 row addresses
// of an ldmatrix phase fall in distinct banks. Every thread copies 16-byte chunks with cp.async
// (w marked evict-first in L2; x's rows at or past `rows` zero-filled), one commit group per
// stage; stage i + kStages - 1 is issued while stage i is consumed.
//
// Fragments (PTX ISA, "Matrix fragments for mma.m16n8k16"): warp v owns columns 16v..16v+15 as
// the MMA's m dimension (A = w, row-major in k) and every row of x as n (B = x^T, x's rows are
// columns of B, contiguous in k), so ldmatrix without .trans gives both: A's four 8x8 matrices
// (columns 0-7 / 8-15 x k 0-7 / 8-15) and, per 16 rows of x, B's fragments of two n8 tiles. The
// accumulators hold D[column][row].
//
// After the k loop each block writes its D (fp32) into shared memory as [row][128 + 4] and the
// cluster (the `splits` blocks of one column tile, rank = k range) meets at a barrier; block c
// then sums rows [rows c / splits, rows (c + 1) / splits) over the ranks in rank order through
// distributed shared memory, adds y (accumulate) or applies SwiGLU, and stores with 16-byte
// vectors; a second barrier keeps every block's shared memory alive until the others have read
// it.

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cluster_gemm.h"
#include "cuda_check.h"
#include "dice/core/error.h"
#include "launch.cuh"
#include "swiglu.cuh"

namespace dice::engine::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;  // 8 warps x 16 columns = kClusterGemmColumns
constexpr int kBM = static_cast<int>(kClusterGemmColumns);
constexpr int kBK = static_cast<int>(kClusterGemmStageK);
constexpr int kRowBytes = kBK * 2 + 16;  // one padded shared row (144 bytes)
constexpr int kRedStride = kBM + 4;      // floats per row of the merge buffer

template <int NT>
constexpr int stages_for() {
  return NT == 64 ? 6 : 5;
}
template <int NT>
constexpr int stage_bytes() {
  return (kBM + NT) * kRowBytes;
}
template <int NT>
constexpr int shared_bytes() {
  return stages_for<NT>() * stage_bytes<NT>();
}
static_assert(64 * kRedStride * 4 <= shared_bytes<64>(), "the merge buffer reuses the stages");
static_assert(128 * kRedStride * 4 <= shared_bytes<128>(), "the merge buffer reuses the stages");

__device__ __forceinline__ std::uint64_t evict_first_policy() {
  std::uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

/// 16 bytes global -> shared, L2 evict-first (weights: read once per forward).
__device__ __forceinline__ void copy_streaming(std::uint32_t dst, const void* src,
                                               std::uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "l"(policy)
               : "memory");
}

/// 16 bytes global -> shared, or 16 zero bytes when !valid (src is then not read).
__device__ __forceinline__ void copy_or_zero(std::uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void commit_group() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// NT: rows of x per block (64 or 128; rows <= NT). kSwiglu: act [rows, out / 2] (bf16) =
/// silu(gate) * up of the output pairs, y not written.
template <int NT, bool kSwiglu>
__global__ void __launch_bounds__(kThreads, 1)
    cluster_gemm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                        float* __restrict__ y, std::int32_t rows, std::int32_t in, std::int32_t out,
                        bool accumulate, __nv_bfloat16* __restrict__ act, bool early_weights) {
  constexpr int kStages = stages_for<NT>();
  extern __shared__ __align__(128) unsigned char shared[];
  const cg::cluster_group cluster = cg::this_cluster();
  const int splits = static_cast<int>(cluster.num_blocks());
  const int split = static_cast<int>(cluster.block_rank());
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x / splits) * kBM;
  const int stages_total = in / kBK;
  const int k_first = stages_total * split / splits;
  const int steps = stages_total * (split + 1) / splits - k_first;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const auto base = static_cast<std::uint32_t>(__cvta_generic_to_shared(shared));
  const std::uint64_t policy = evict_first_policy();

  const auto load_w = [&](int step) {
    const std::uint32_t dst = base + (step % kStages) * stage_bytes<NT>();
    const __nv_bfloat16* src = w + n0 * in + static_cast<std::int64_t>(k_first + step) * kBK;
#pragma unroll
    for (int i = 0; i < kBM * 8 / kThreads; ++i) {
      const int c = tid + i * kThreads, r = c / 8, chunk = c % 8;
      copy_streaming(dst + r * kRowBytes + chunk * 16,
                     src + static_cast<std::int64_t>(r) * in + chunk * 8, policy);
    }
  };
  const auto load_x = [&](int step) {
    const std::uint32_t dst = base + (step % kStages) * stage_bytes<NT>() + kBM * kRowBytes;
    const __nv_bfloat16* src = x + static_cast<std::int64_t>(k_first + step) * kBK;
#pragma unroll
    for (int i = 0; i < NT * 8 / kThreads; ++i) {
      const int c = tid + i * kThreads, r = c / 8, chunk = c % 8;
      const bool valid = r < rows;
      copy_or_zero(dst + r * kRowBytes + chunk * 16,
                   src + static_cast<std::int64_t>(valid ? r : 0) * in + chunk * 8, valid);
    }
  };

  // The first stages' weights before the wait (weights are read-only during a forward:
  // launch.cuh, "Early start"); x, written by the kernel before, after it.
  const int first = min(kStages - 1, steps);
  if (early_weights)
    for (int s = 0; s < first; ++s) load_w(s);
  wait_for_prior_grid();
  if constexpr (kSwiglu) allow_next_grid();  // the down projection may start (launch.cuh)
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < first) {
      if (!early_weights) load_w(s);
      load_x(s);
    }
    commit_group();
  }

  float acc[NT / 8][4];
#pragma unroll
  for (int j = 0; j < NT / 8; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) acc[j][r] = 0.0f;
  // ldmatrix row addresses of this lane: matrix q = lane / 8, its row lane % 8. A: columns
  // 16 warp + 8 (q & 1) + row, k 8 (q >> 1); B: rows of x 8 (q >> 1) + row, k 8 (q & 1).
  const int q = lane / 8, row8 = lane % 8;
  const std::uint32_t a_offset = (16 * warp + 8 * (q & 1) + row8) * kRowBytes + 16 * (q >> 1);
  const std::uint32_t b_offset = kBM * kRowBytes + (8 * (q >> 1) + row8) * kRowBytes + 16 * (q & 1);
  for (int step = 0; step < steps; ++step) {
    wait_groups<kStages - 2>();
    __syncthreads();  // stage `step` landed for every thread; stage step - 1 is free
    if (step + kStages - 1 < steps) {
      load_w(step + kStages - 1);
      load_x(step + kStages - 1);
    }
    commit_group();
    const std::uint32_t stage = base + (step % kStages) * stage_bytes<NT>();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      std::uint32_t a[4];
      ldmatrix_x4(a, stage + a_offset + kk * 32);
#pragma unroll
      for (int jp = 0; jp < NT / 16; ++jp) {
        std::uint32_t b[4];
        ldmatrix_x4(b, stage + b_offset + jp * 16 * kRowBytes + kk * 32);
        mma_bf16(acc[2 * jp], a, b[0], b[1]);
        mma_bf16(acc[2 * jp + 1], a, b[2], b[3]);
      }
    }
  }
  wait_groups<0>();
  __syncthreads();  // every stage consumed: the merge buffer takes their place

  float* red = reinterpret_cast<float*>(shared);
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int j = 0; j < NT / 8; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      red[(8 * j + 2 * t + r % 2) * kRedStride + 16 * warp + g + 8 * (r / 2)] = acc[j][r];
  if (splits > 1)
    cluster.sync();
  else
    __syncthreads();

  const int row_begin = rows * split / splits, row_end = rows * (split + 1) / splits;
  constexpr int kVectors = kBM / 4;
  for (int e = tid; e < (row_end - row_begin) * kVectors; e += kThreads) {
    const int row = row_begin + e / kVectors, m = (e % kVectors) * 4;
    const int at = row * kRedStride + m;
    float4 sum = *reinterpret_cast<const float4*>(splits > 1 ? cluster.map_shared_rank(red, 0) + at
                                                             : red + at);
    for (int s = 1; s < splits; ++s) {
      const float4 v = *reinterpret_cast<const float4*>(cluster.map_shared_rank(red, s) + at);
      sum.x += v.x;
      sum.y += v.y;
      sum.z += v.z;
      sum.w += v.w;
    }
    if constexpr (kSwiglu) {
      *reinterpret_cast<__nv_bfloat162*>(act + static_cast<std::int64_t>(row) * (out / 2) +
                                         (n0 + m) / 2) =
          __floats2bfloat162_rn(silu_times(sum.x, sum.y), silu_times(sum.z, sum.w));
    } else {
      auto* dst = reinterpret_cast<float4*>(y + static_cast<std::int64_t>(row) * out + n0 + m);
      if (accumulate) {
        const float4 d = *dst;
        sum = make_float4(d.x + sum.x, d.y + sum.y, d.z + sum.z, d.w + sum.w);
      }
      *dst = sum;
    }
  }
  if (splits > 1) cluster.sync();  // the other blocks may still read this one's buffer
}

template <int NT, bool kSwiglu>
auto kernel_for() {
  return cluster_gemm_kernel<NT, kSwiglu>;
}

/// Raises the kernel's dynamic shared memory limit (once per kernel and device is enough, but
/// the call is cheap and capture-safe).
template <int NT, bool kSwiglu>
void allow_shared() {
  DICE_CUDA_CHECK(cudaFuncSetAttribute(
      kernel_for<NT, kSwiglu>(), cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes<NT>()));
}

template <int NT, bool kSwiglu>
int resident_of(int splits) {
  allow_shared<NT, kSwiglu>();
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(splits);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(splits));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = shared_bytes<NT>();
  config.attrs = &attribute;
  config.numAttrs = 1;
  int clusters = 0;
  DICE_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel_for<NT, kSwiglu>(), &config));
  return clusters;
}

template <int NT, bool kSwiglu>
void launch_rows(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                 std::int64_t out, bool accumulate, int splits, cudaStream_t stream, bool pdl,
                 void* act, bool early_weights) {
  allow_shared<NT, kSwiglu>();
  const auto tiles = static_cast<unsigned>(out / kBM);
  launch_kernel_in_clusters(
      kSwiglu ? "cluster_gemm_kernel (SwiGLU)" : "cluster_gemm_kernel", kernel_for<NT, kSwiglu>(),
      tiles * static_cast<unsigned>(splits), kThreads, shared_bytes<NT>(),
      static_cast<unsigned>(splits), stream, pdl, static_cast<const __nv_bfloat16*>(x),
      static_cast<const __nv_bfloat16*>(w), y, static_cast<std::int32_t>(rows),
      static_cast<std::int32_t>(in), static_cast<std::int32_t>(out), accumulate,
      static_cast<__nv_bfloat16*>(act), early_weights);
}

/// `text` with each "{}" replaced by the next argument (nvcc cannot compile fmt's checked format
/// strings, so the messages of this file are assembled here).
template <typename... Args>
std::string message(const std::string& text, Args... args) {
  std::string out;
  std::size_t from = 0;
  const auto put = [&](const std::string& value) {
    const std::size_t at = text.find("{}", from);
    out += text.substr(from, at - from) + value;
    from = at + 2;
  };
  (put(std::to_string(args)), ...);
  return out + text.substr(from);
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool cluster_gemm_fits(bool bf16, std::int64_t rows, std::int64_t in, std::int64_t out,
                       std::int64_t max_rows, const void* x, const void* w, const void* y) {
  return bf16 && rows >= 1 && rows <= max_rows && rows <= kClusterGemmRowsLimit && in > 0 &&
         in % kClusterGemmStageK == 0 && in <= (std::int64_t{1} << 30) && out > 0 &&
         out % kClusterGemmColumns == 0 && out <= (std::int64_t{1} << 30) && aligned16(x) &&
         aligned16(w) && aligned16(y);
}

int cluster_gemm_splits(std::int64_t tiles, std::int64_t in, std::span<const int> resident) {
  if (tiles < 1 || in < kClusterGemmStageK || in % kClusterGemmStageK != 0)
    throw Error(
        message("cluster GEMM: {} column tiles of {} k (expected at least one tile "
                "and a positive multiple of {})",
                tiles, in, kClusterGemmStageK));
  const std::int64_t stages = in / kClusterGemmStageK;
  const auto most = static_cast<int>(
      std::min<std::int64_t>({kClusterGemmMaxSplits, stages, std::ssize(resident)}));
  int best = 0;
  std::int64_t best_cost = 0;
  for (int s = 1; s <= most; ++s) {
    const std::int64_t r = resident[static_cast<std::size_t>(s - 1)];
    if (r < 1) continue;
    const std::int64_t cost = (tiles + r - 1) / r * ((stages + s - 1) / s) + (s > 1 ? 1 : 0);
    if (best == 0 || cost < best_cost) {
      best = s;
      best_cost = cost;
    }
  }
  if (best == 0)
    throw Error(message("cluster GEMM: no cluster of 1 to {} blocks fits on this device", most));
  return best;
}

int cluster_gemm_resident(std::int64_t rows, int splits, bool swiglu) {
  if (splits < 1 || splits > kClusterGemmMaxSplits)
    throw Error(
        message("cluster GEMM: {} splits (expected 1 to {})", splits, kClusterGemmMaxSplits));
  if (rows <= 64) return swiglu ? resident_of<64, true>(splits) : resident_of<64, false>(splits);
  return swiglu ? resident_of<128, true>(splits) : resident_of<128, false>(splits);
}

void launch_cluster_gemm(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                         std::int64_t out, bool accumulate, int splits, cudaStream_t stream,
                         bool pdl, void* swiglu_act, bool early_weights) {
  const bool swiglu = swiglu_act != nullptr;
  if (!cluster_gemm_fits(true, rows, in, out, kClusterGemmRowsLimit, x, w,
                         swiglu ? swiglu_act : static_cast<const void*>(y)))
    throw Error(message(
        "cluster GEMM: rows {} in {} out {} is not a shape it takes (rows 1..{}, in a multiple "
        "of {}, out a multiple of {}, 16-byte aligned)",
        rows, in, out, kClusterGemmRowsLimit, kClusterGemmStageK, kClusterGemmColumns));
  if (swiglu && accumulate)
    throw Error(
        message("cluster GEMM with a SwiGLU epilogue: rows {} out {} asks to accumulate, which the "
                "epilogue does not do",
                rows, out));
  if (splits == 0) {
    int resident[kClusterGemmMaxSplits];
    for (int s = 1; s <= kClusterGemmMaxSplits; ++s)
      resident[s - 1] = cluster_gemm_resident(rows, s, swiglu);
    splits = cluster_gemm_splits(out / kClusterGemmColumns, in, resident);
  }
  if (splits < 1 || splits > kClusterGemmMaxSplits || splits > in / kClusterGemmStageK)
    throw Error(message("cluster GEMM: {} splits of {} k (expected 1 to {}, at most in / {})",
                        splits, in, kClusterGemmMaxSplits, kClusterGemmStageK));
  if (rows <= 64) {
    if (swiglu)
      launch_rows<64, true>(x, w, y, rows, in, out, false, splits, stream, pdl, swiglu_act,
                            early_weights);
    else
      launch_rows<64, false>(x, w, y, rows, in, out, accumulate, splits, stream, pdl, nullptr,
                             early_weights);
  } else if (swiglu) {
    launch_rows<128, true>(x, w, y, rows, in, out, false, splits, stream, pdl, swiglu_act,
                           early_weights);
  } else {
    launch_rows<128, false>(x, w, y, rows, in, out, accumulate, splits, stream, pdl, nullptr,
                            early_weights);
  }
}

}  // namespace dice::engine::cuda
