// Attention over the paged KV cache for every AttnWork of a pass (forward_plan.h builds them):
// a tile of 16 query vectors (query rows x the heads of one KV head, GQA) against positions
// [kv_begin, kv_end) of its sequence, each query row clipped to its own kv_len. That one rule
// covers the block-causal prefill (a commit row sees the cache up to the end of its block), the
// denoising block (the whole cache plus the block itself, whose K/V the pass wrote to the cache
// first) and the fused store pass.
//
// Three kernels compute the same thing: attention_simple (CUDA cores, any dtype: the fp32 path
// and the fallback), attention_mma (bf16 tensor cores, mma.sync.m16n8k16 with fp32 accumulation,
// FlashAttention-2's online softmax; Dao, "FlashAttention-2", 2023, §3.1) and
// attention_mma_pipelined (the same arithmetic with cp.async K/V loads, ldmatrix fragments and
// the split merge inside the kernel: the bf16 default). All are persistent (a fixed grid walks
// the work list, so a captured graph fits any pass of its bucket). A work item with a split KV
// range writes a partial result (normalized output and log2-sum-exp); attention_combine merges
// them after attention_simple and attention_mma (flash-decoding), attention_mma_pipelined merges
// them itself (the tile's last work item to finish).

#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda_check.h"
#include "device_query.h"
#include "device_utils.cuh"
#include "dice/core/error.h"
#include "launch.cuh"
#include "ops.h"

namespace dice::engine::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

struct AttnArgs {
  const PassHeader* meta;
  const void* q;
  const void* k_cache;
  const void* v_cache;
  void* out;
  float* partial_out;
  float* partial_lse;
  std::uint32_t* counters;  ///< attention_mma_pipelined: one per AttnCombine, zero between passes
  bool early_reads;         ///< attention_mma_pipelined: metadata before wait_for_prior_grid()
  std::int32_t heads;
  std::int32_t kv_heads;
  std::int32_t group;
  float scale_log2;  ///< log2(e) / sqrt(head_dim): scores in the log2 domain
};

/// Element offset of (page, kv head, slot 0) in a layer's cache.
__device__ __forceinline__ std::int64_t page_offset(std::int32_t page, std::int32_t kv_head,
                                                    std::int32_t kv_heads, int head_dim) {
  return (static_cast<std::int64_t>(page) * kv_heads + kv_head) * kPageTokens * head_dim;
}

/// Index of query vector q of work item w (of its tile's 16, or a paired item's 32) among the
/// [rows, heads] head vectors of Q and of the output: row w.row0 + q / group, head
/// kv_head * group + q % group (GQA). Times head_dim: the element offset.
__device__ __forceinline__ std::int64_t query_vector(const AttnArgs& a, const AttnWork& w, int q) {
  return static_cast<std::int64_t>(w.row0 + q / a.group) * a.heads + w.kv_head * a.group +
         q % a.group;
}

/// Writes one query vector's result: the output row (normalized) or the partial slot.
template <typename T, int D>
__device__ __forceinline__ void write_result(const AttnArgs& a, const AttnWork& w, int q, int d,
                                             float o, float lse) {
  if (w.partial < 0) {
    static_cast<T*>(a.out)[query_vector(a, w, q) * D + d] = from_float<T>(o);
  } else {
    a.partial_out[(static_cast<std::int64_t>(w.partial) * kTileQueries + q) * D + d] = o;
    if (d == 0) a.partial_lse[static_cast<std::int64_t>(w.partial) * kTileQueries + q] = lse;
  }
}

// ---------------------------------------------------------------------------------------------
// CUDA cores: each warp takes query vectors warp, warp + 4, ...; per 32-position chunk every
// lane scores one position, then the lanes split head_dim for P V.

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) attention_simple_kernel(AttnArgs a) {
  wait_for_prior_grid();
  constexpr int kPerLane = (D + 31) / 32;
  __shared__ float q_shared[kTileQueries][D];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const PassHeader* meta = a.meta;
  const auto* works = pass_section<AttnWork>(meta, meta->work_offset);
  const auto* rows = pass_section<RowInfo>(meta, meta->rows_offset);
  const auto* tables = pass_section<std::int32_t>(meta, meta->tables_offset);
  const T* q_all = static_cast<const T*>(a.q);
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);
  for (std::int32_t item = blockIdx.x; item < meta->attn_work; item += gridDim.x) {
    const AttnWork w = works[item];
    __syncthreads();  // q_shared free
    for (int e = threadIdx.x; e < kTileQueries * D; e += kThreads) {
      const int q = e / D, d = e % D;
      float v = 0.0f;
      if (q / a.group < w.rows) v = to_float(q_all[query_vector(a, w, q) * D + d]);
      q_shared[q][d] = v;
    }
    __syncthreads();
    for (int q = warp; q < kTileQueries; q += kWarps) {
      if (q / a.group >= w.rows) continue;
      const std::int32_t kv_len = rows[w.row0 + q / a.group].kv_len;
      const std::int32_t end = kv_len < w.kv_end ? kv_len : w.kv_end;
      float m = -INFINITY, l = 0.0f, acc[kPerLane];
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) acc[k] = 0.0f;
      for (std::int32_t c = w.kv_begin; c < end; c += kPageTokens) {
        const std::int32_t page = tables[w.table + c / kPageTokens];
        const std::int64_t base = page_offset(page, w.kv_head, a.kv_heads, D);
        const std::int32_t p = c + lane;
        float score = -INFINITY;
        if (p < end) {
          const T* key = k_cache + base + static_cast<std::int64_t>(lane) * D;
          float dot = 0.0f;
          for (int d = 0; d < D; ++d) dot += q_shared[q][d] * to_float(key[d]);
          score = dot * a.scale_log2;
        }
        const float m_new = fmaxf(m, warp_max(score));  // finite: position c < end is valid
        const float alpha = exp2f(m - m_new);           // 0 while m is -inf
        const float prob = p < end ? exp2f(score - m_new) : 0.0f;
        l = l * alpha + warp_sum(prob);
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) acc[k] *= alpha;
        const int count = end - c < kPageTokens ? end - c : kPageTokens;
        for (int j = 0; j < count; ++j) {
          const float pj = __shfl_sync(0xffffffffu, prob, j);
          const T* value = v_cache + base + static_cast<std::int64_t>(j) * D;
#pragma unroll
          for (int k = 0; k < kPerLane; ++k) {
            const int d = lane + 32 * k;
            if (d < D) acc[k] += pj * to_float(value[d]);
          }
        }
        m = m_new;
      }
      const float lse = l > 0.0f ? m + log2f(l) : -INFINITY;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        const int d = lane + 32 * k;
        if (d < D) write_result<T, D>(a, w, q, d, l > 0.0f ? acc[k] / l : 0.0f, lse);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Tensor cores. mma.sync.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"): with
// g = lane / 4 and t = lane % 4, A (16 x 16, row) regs {a0a1, a2a3, a4a5, a6a7} hold (g, 2t..2t+1),
// (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..); B (16 x 8, col) regs {b0b1, b2b3} hold (k 2t..2t+1, n g)
// and (k 2t+8.., n g); C (16 x 8) {c0, c1, c2, c3} hold (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
// The lower-indexed element sits in the lower 16 bits of a register.
//
// Each warp owns chunks kv_begin + 32 (warp + 4 i) (one page each) and keeps its own running
// max, sum and output for the tile's 16 query vectors; the 4 warps merge through shared memory.

__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lo) in the low half
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

__device__ __forceinline__ std::uint32_t pack_u16(std::uint16_t lo, std::uint16_t hi) {
  return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}

/// P's C fragments of n-tiles 2kk and 2kk + 1 (probabilities, fp32) packed to bf16 as the A
/// fragment of P V's k-step kk.
struct PFragment {
  std::uint32_t r[4];
};
__device__ __forceinline__ PFragment p_fragment(const float (&s)[4][4], int kk) {
  return {{pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
           pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
           pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])}};
}

template <int D>
constexpr int mma_row_stride() {
  return D + 8;  // bf16 elements per shared row: 16-byte aligned rows, no bank conflicts on K
}

template <int D>
constexpr std::size_t mma_shared_bytes() {
  const std::size_t kv =
      static_cast<std::size_t>(kWarps) * 2 * kPageTokens * mma_row_stride<D>() * 2;
  const std::size_t merge =
      static_cast<std::size_t>(kWarps) * (kTileQueries * D + 2 * kTileQueries) * 4;
  return kv > merge ? kv : merge;
}

/// The visible end of query vector q (of the tile's 16) in work item w: its row's kv_len clipped
/// to kv_end, or kv_begin (nothing visible) for a vector past w.rows.
__device__ __forceinline__ std::int32_t visible_end(const AttnArgs& a, const AttnWork& w,
                                                    const RowInfo* rows, bool valid, int q) {
  if (!valid) return w.kv_begin;
  const std::int32_t kv_len = rows[w.row0 + q / a.group].kv_len;
  return kv_len < w.kv_end ? kv_len : w.kv_end;
}

/// The A fragments of Q (bf16 [rows, heads, D]) for this lane's C rows: query vectors q0 (row g)
/// and q1 (row g + 8) of work item w, k columns 2t, 2t + 1 and 2t + 8, 2t + 9 of every k-step;
/// zeros for a vector that is not valid (past w.rows). Plain global loads (Q is the previous
/// kernel's output).
template <int D>
__device__ __forceinline__ void load_q_fragments(std::uint32_t (&q_frag)[D / 16][4],
                                                 const AttnArgs& a, const AttnWork& w,
                                                 const std::uint16_t* q_all, bool valid0, int q0,
                                                 bool valid1, int q1, int t) {
  const auto q_word = [&](bool valid, int q, int d) -> std::uint32_t {
    if (!valid) return 0u;
    return *reinterpret_cast<const std::uint32_t*>(q_all + query_vector(a, w, q) * D + d);
  };
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    q_frag[ks][0] = q_word(valid0, q0, ks * 16 + 2 * t);
    q_frag[ks][1] = q_word(valid1, q1, ks * 16 + 2 * t);
    q_frag[ks][2] = q_word(valid0, q0, ks * 16 + 8 + 2 * t);
    q_frag[ks][3] = q_word(valid1, q1, ks * 16 + 8 + 2 * t);
  }
}

/// One 32-position page of a warp's online softmax (FlashAttention-2, §3.1) for this lane's C
/// rows g and g + 8 (a row's 4 lanes t = 0..3 share it): s holds S = Q K^T for positions
/// c + 0..31 (4 n-tiles of 8); positions at or past end0 (row g) / end1 (row g + 8) are masked,
/// the rest scaled by scale_log2 (log2 domain). Updates the running max m and sum l, rescales
/// acc (the O fragments, kDimTiles n-tiles of 8 dimensions) and leaves P = 2^(s - max) in s.
template <int kDimTiles>
__device__ __forceinline__ void online_softmax_page(float (&s)[4][4], float (&m)[2], float (&l)[2],
                                                    float (&acc)[kDimTiles][4], std::int32_t c,
                                                    int t, std::int32_t end0, std::int32_t end1,
                                                    float scale_log2) {
  float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const std::int32_t position = c + nt * 8 + 2 * t + (e & 1);
      const std::int32_t end = e < 2 ? end0 : end1;
      s[nt][e] = position < end ? s[nt][e] * scale_log2 : -INFINITY;
      row_max[e >> 1] = fmaxf(row_max[e >> 1], s[nt][e]);
    }
  float alpha[2], shift[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 1));
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 2));
    const float m_new = fmaxf(m[h], row_max[h]);
    alpha[h] = m_new == -INFINITY ? 1.0f : exp2f(m[h] - m_new);
    shift[h] = m_new == -INFINITY ? 0.0f : m_new;
    m[h] = m_new;
    l[h] *= alpha[h];
  }
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[nt][e] = exp2f(s[nt][e] - shift[e >> 1]);
      l[e >> 1] += s[nt][e];
    }
#pragma unroll
  for (int dn = 0; dn < kDimTiles; ++dn) {
    acc[dn][0] *= alpha[0];
    acc[dn][1] *= alpha[0];
    acc[dn][2] *= alpha[1];
    acc[dn][3] *= alpha[1];
  }
}

/// A warp's end of the page loop: adds l over the row's 4 lanes, then writes the warp's running
/// max m and sum l ([warp][16] each) and its O fragments acc ([warp][16][kStride], fp32, rows of
/// kStride >= D floats) into the shared merge area, which the caller fences with block barriers
/// on both sides.
template <int D, int kStride = D>
__device__ __forceinline__ void stage_warp_result(float* merge_m, float* merge_l, float* merge_o,
                                                  int warp, int g, int t, const float (&m)[2],
                                                  float (&l)[2], const float (&acc)[D / 8][4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  if (t == 0) {
    merge_m[warp * kTileQueries + g] = m[0];
    merge_m[warp * kTileQueries + g + 8] = m[1];
    merge_l[warp * kTileQueries + g] = l[0];
    merge_l[warp * kTileQueries + g + 8] = l[1];
  }
  float* o_warp = merge_o + static_cast<std::size_t>(warp) * kTileQueries * kStride;
  // 64-bit stores of the pairs (columns 2t, 2t + 1). With kStride = D + 8 a half warp's stores
  // (rows g .. g + 3 at 8-bank offsets) fall in 32 distinct banks; with kStride = D they conflict.
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) {
    const int col = dn * 8 + 2 * t;
    *reinterpret_cast<float2*>(o_warp + g * kStride + col) = make_float2(acc[dn][0], acc[dn][1]);
    *reinterpret_cast<float2*>(o_warp + (g + 8) * kStride + col) =
        make_float2(acc[dn][2], acc[dn][3]);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads) attention_mma_kernel(AttnArgs a) {
  wait_for_prior_grid();
  constexpr int kStride = mma_row_stride<D>();
  constexpr int kSteps = D / 16;  // k-steps of Q K^T
  constexpr int kDimTiles = D / 8;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  auto* k_shared = reinterpret_cast<std::uint16_t*>(shared_raw) +
                   static_cast<std::size_t>(warp) * 2 * kPageTokens * kStride;
  std::uint16_t* v_shared = k_shared + kPageTokens * kStride;
  auto* merge = reinterpret_cast<float*>(shared_raw);
  float* merge_m = merge;                              // [warp][16]
  float* merge_l = merge + kWarps * kTileQueries;      // [warp][16]
  float* merge_o = merge + 2 * kWarps * kTileQueries;  // [warp][16][D]

  const PassHeader* meta = a.meta;
  const auto* works = pass_section<AttnWork>(meta, meta->work_offset);
  const auto* rows = pass_section<RowInfo>(meta, meta->rows_offset);
  const auto* tables = pass_section<std::int32_t>(meta, meta->tables_offset);
  const auto* q_all = static_cast<const std::uint16_t*>(a.q);
  const auto* k_cache = static_cast<const std::uint16_t*>(a.k_cache);
  const auto* v_cache = static_cast<const std::uint16_t*>(a.v_cache);

  for (std::int32_t item = blockIdx.x; item < meta->attn_work; item += gridDim.x) {
    const AttnWork w = works[item];
    // The two query vectors of this thread's C rows, their visible ends, the tile's end.
    const int q0 = g, q1 = g + 8;
    const bool valid0 = q0 / a.group < w.rows, valid1 = q1 / a.group < w.rows;
    const std::int32_t end0 = visible_end(a, w, rows, valid0, q0),
                       end1 = visible_end(a, w, rows, valid1, q1);
    std::int32_t tile_end = end0 > end1 ? end0 : end1;
    for (int offset = 16; offset > 0; offset >>= 1) {
      const std::int32_t o = __shfl_xor_sync(0xffffffffu, tile_end, offset);
      tile_end = o > tile_end ? o : tile_end;
    }
    std::uint32_t q_frag[kSteps][4];
    load_q_fragments<D>(q_frag, a, w, q_all, valid0, q0, valid1, q1, t);
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float acc[kDimTiles][4];
#pragma unroll
    for (int dn = 0; dn < kDimTiles; ++dn) acc[dn][0] = acc[dn][1] = acc[dn][2] = acc[dn][3] = 0.0f;

    for (std::int32_t c = w.kv_begin + warp * kPageTokens; c < tile_end;
         c += kWarps * kPageTokens) {
      const std::int32_t page = tables[w.table + c / kPageTokens];
      const std::int64_t base = page_offset(page, w.kv_head, a.kv_heads, D);
      // K and V of the page into this warp's shared rows (16-byte loads; rows past the tile's
      // end are zero so that masked positions cannot bring NaN into P V).
      constexpr int kVectorsPerRow = D / 8;
      for (int v = lane; v < kPageTokens * kVectorsPerRow; v += 32) {
        const int r = v / kVectorsPerRow, c8 = (v % kVectorsPerRow) * 8;
        uint4 kv = make_uint4(0u, 0u, 0u, 0u), vv = make_uint4(0u, 0u, 0u, 0u);
        if (c + r < tile_end) {
          kv = *reinterpret_cast<const uint4*>(k_cache + base + r * D + c8);
          vv = *reinterpret_cast<const uint4*>(v_cache + base + r * D + c8);
        }
        *reinterpret_cast<uint4*>(k_shared + r * kStride + c8) = kv;
        *reinterpret_cast<uint4*>(v_shared + r * kStride + c8) = vv;
      }
      __syncwarp();
      // S = Q K^T for positions c + 0..31 (4 n-tiles of 8).
      float s[4][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
        const std::uint16_t* key = k_shared + (nt * 8 + g) * kStride;
#pragma unroll
        for (int ks = 0; ks < kSteps; ++ks) {
          const std::uint32_t b0 = *reinterpret_cast<const std::uint32_t*>(key + ks * 16 + 2 * t);
          const std::uint32_t b1 =
              *reinterpret_cast<const std::uint32_t*>(key + ks * 16 + 8 + 2 * t);
          mma_bf16(s[nt], q_frag[ks], b0, b1);
        }
      }
      online_softmax_page(s, m, l, acc, c, t, end0, end1, a.scale_log2);
      // O += P V: P's C fragments of n-tiles 2kk, 2kk+1 are the A fragment of k-step kk.
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const auto p_frag = p_fragment(s, kk);
        const std::uint16_t* v0 = v_shared + (kk * 16 + 2 * t) * kStride;
#pragma unroll
        for (int dn = 0; dn < kDimTiles; ++dn) {
          const int col = dn * 8 + g;
          const std::uint32_t b0 = pack_u16(v0[col], v0[kStride + col]);
          const std::uint32_t b1 = pack_u16(v0[8 * kStride + col], v0[9 * kStride + col]);
          mma_bf16(acc[dn], p_frag.r, b0, b1);
        }
      }
      __syncwarp();  // shared rows are overwritten by the next chunk
    }
    // Merge the 4 warps through shared memory (aliasing the K/V rows: all warps are done).
    __syncthreads();
    stage_warp_result<D>(merge_m, merge_l, merge_o, warp, g, t, m, l, acc);
    __syncthreads();
    for (int e = threadIdx.x; e < kTileQueries * D; e += kThreads) {
      const int q = e / D, d = e % D;
      if (q / a.group >= w.rows) continue;
      float big = -INFINITY;
#pragma unroll
      for (int k = 0; k < kWarps; ++k) big = fmaxf(big, merge_m[k * kTileQueries + q]);
      float sum = 0.0f, o = 0.0f;
      if (big != -INFINITY) {
#pragma unroll
        for (int k = 0; k < kWarps; ++k) {
          const float scale = exp2f(merge_m[k * kTileQueries + q] - big);
          sum += merge_l[k * kTileQueries + q] * scale;
          o += merge_o[(static_cast<std::size_t>(k) * kTileQueries + q) * D + d] * scale;
        }
      }
      write_result<__nv_bfloat16, D>(a, w, q, d, sum > 0.0f ? o / sum : 0.0f,
                                     sum > 0.0f ? big + log2f(sum) : -INFINITY);
    }
    __syncthreads();  // the merge area is the next item's K/V rows
  }
}

// ---------------------------------------------------------------------------------------------
// Tensor cores, pipelined (the bf16 default). Per page the arithmetic of attention_mma (S = Q K^T
// and O += P V by mma.sync.m16n8k16, each warp's online softmax over its pages, the 4 warps merged
// through shared memory), changed where few sequences leave the kernel waiting on latency
// (bench/results/2026-11-23-engine-attention-h100):
// - K and V reach shared memory by cp.async (PTX ISA, "Data Movement and Conversion
//   Instructions: cp.async"), a page's 2 x 16 copies per lane all in flight at once (attention_mma
//   waits for 4 rounds of 8 loads per page), and a warp asks for its next page's K (V) as soon as
//   it has read this page's K (V): the copy flies while it computes. The page ids are read two
//   pages ahead, the Q tile is copied into shared memory with the first page;
// - fragments come from shared memory by ldmatrix (.trans for V; PTX ISA, "ldmatrix"), 4 8 x 8
//   matrices per instruction;
// - a split tile's partial results are merged by its last work item to finish: after writing its
//   partial result each work item adds 1 to the tile's counter (thread 0 after a block barrier,
//   atom.acq_rel.gpu: the pattern of CUTLASS's generic barrier and of the CUDA samples'
//   threadFenceReduction); the one that brings it to `splits` resets it to 0 for the next pass
//   and merges the partial slots in split order (kMergeBatch at a time staged by cp.async), so
//   the result is the same bits whichever item comes last, and no combine launch is needed.
//   Atomics count only; every float sum has a fixed order.
// Shared memory: per warp one K and one V page (rows of D + 8 bf16), then the Q tile; the warp
// merge and the split merge reuse the K/V area (the split merge the Q area too) once all warps
// are done with it.
// Two more instantiations (bench/results/2026-11-23-engine-paired-tiles-h100): kTensorCoresPaired
// also takes paired items (two tiles of a pass item, 32 query vectors: warp pairs share each
// page, see the kernel), kTensorCoresDeep keeps three pages per warp in flight (a ring of three
// K/V areas, one block per SM) for passes with about one work item per SM, and
// kTensorCoresDeepPaired is both: a warp pair's ring of six areas for paired items.

/// 16-byte asynchronous copy global -> shared (cp.async.cg: through L2 only). With `fill` false
/// nothing is read and the 16 bytes become zeros (src-size 0), `global` must still be a valid
/// address.
__device__ __forceinline__ void cp_async_16(void* shared, const void* global, bool fill) {
  const auto dst = static_cast<std::uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global),
               "r"(fill ? 16 : 0)
               : "memory");
}

/// Closes this thread's current group of cp.async copies (an empty group if it issued none).
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/// Waits until at most N of this thread's most recent cp.async groups are still pending; the
/// copies of the older groups are then visible to this thread (other threads: after a barrier).
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// ldmatrix.m8n8.x4.b16: lanes 8j .. 8j + 7 give the addresses of the 8 rows (16 bytes each) of
/// matrix j; r[j] of lane (g, t) receives row g, columns 2t and 2t + 1 of matrix j, or with
/// `kTrans` rows 2t and 2t + 1 of column g (the lower-indexed element in the low half).
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const std::uint16_t* row) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
}

/// S = Q K^T for the 32 positions of a page whose K rows (stride kStride bf16) are in shared
/// memory at `k_page`: per pair of n-tiles and k-step, ldmatrix of matrices (n-tile 2np, k lo),
/// (2np, k hi), (2np + 1, k lo), (2np + 1, k hi) of K's rows. q_frag: the warp's A fragments.
template <int D, int kStride>
__device__ __forceinline__ void page_scores(float (&s)[4][4],
                                            const std::uint32_t (&q_frag)[D / 16][4],
                                            const std::uint16_t* k_page, int lane) {
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
  for (int np = 0; np < 2; ++np)
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      std::uint32_t b[4];
      ldmatrix_x4<false>(b, k_page + (np * 16 + (lane >> 4) * 8 + (lane & 7)) * kStride + ks * 16 +
                                ((lane >> 3) & 1) * 8);
      mma_bf16(s[2 * np], q_frag[ks], b[0], b[1]);
      mma_bf16(s[2 * np + 1], q_frag[ks], b[2], b[3]);
    }
}

/// O += P V for a page whose V rows are in shared memory at `v_page`: P's C fragments of n-tiles
/// 2kk, 2kk + 1 (s, after online_softmax_page) are the A fragment of k-step kk; V's B fragments
/// by ldmatrix.trans of matrices (dim tile 2dp, keys lo), (2dp, keys hi), (2dp + 1, keys lo),
/// (2dp + 1, keys hi).
template <int D, int kStride>
__device__ __forceinline__ void page_values(float (&acc)[D / 8][4], const float (&s)[4][4],
                                            const std::uint16_t* v_page, int lane) {
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    const auto p_frag = p_fragment(s, kk);
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      std::uint32_t b[4];
      ldmatrix_x4<true>(b, v_page + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * kStride +
                               (dp * 2 + (lane >> 4)) * 8);
      mma_bf16(acc[2 * dp], p_frag.r, b[0], b[1]);
      mma_bf16(acc[2 * dp + 1], p_frag.r, b[2], b[3]);
    }
  }
}

/// kCount 16-byte cp.async copies of this lane from one page of K or V rows at `src` (32 rows
/// of D bf16) into shared rows of stride D + 8 at `dst`: 16-byte chunks v = lane + 32 (first + i)
/// of the page, row v / (D / 8); rows at or past kv_end (position chunk + row) become zeros.
template <int D, int kCount>
__device__ __forceinline__ void copy_page_rows(std::uint16_t* dst, const std::uint16_t* src,
                                               std::int32_t chunk, std::int32_t kv_end, int lane,
                                               int first) {
  constexpr int kRowChunks = D / 8;
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    const int v = lane + 32 * (first + i);
    const int r = v / kRowChunks, c8 = (v % kRowChunks) * 8;
    cp_async_16(dst + r * mma_row_stride<D>() + c8, src + r * D + c8, chunk + r < kv_end);
  }
}

/// bar.sync on named barrier `id` (1 or 2; 0 is __syncthreads') for the 64 threads of a warp
/// pair: orders the pair's shared-memory writes (and, after cp.async.wait_group, its copies)
/// before the other warp's reads.
__device__ __forceinline__ void pair_barrier(int id) {
  asm volatile("bar.sync %0, 64;\n" ::"r"(id) : "memory");
}

/// Floats per staged query vector of attention_mma_pipelined's warp merge: D + 8, so that the
/// warps' 64-bit stores of their O fragments meet no bank conflicts.
template <int D>
constexpr int merge_row_stride() {
  return D + 8;
}

/// Bytes of the K/V area of attention_mma_pipelined (also the warp merge's and the split merge's
/// scratch): per warp (kW of them) kStages pages of K and V rows; then the Q tile's rows.
template <int D, int kStages, int kW = kWarps>
constexpr std::size_t pipelined_kv_bytes() {
  const std::size_t kv =
      static_cast<std::size_t>(kW) * kStages * 2 * kPageTokens * mma_row_stride<D>() * 2;
  const std::size_t merge =
      static_cast<std::size_t>(kW) * (kTileQueries * merge_row_stride<D>() + 3 * kTileQueries) * 4 +
      2 * kPairedQueries * 4;
  return kv > merge ? kv : merge;
}

template <int D, int kStages, int kW = kWarps>
constexpr std::size_t pipelined_shared_bytes() {
  return pipelined_kv_bytes<D, kStages, kW>() +
         static_cast<std::size_t>(kTileQueries) * mma_row_stride<D>() * 2;
}

/// Blocks per SM the register budget is set for: 3 at head_dim <= 128 with one page per warp
/// (3 x 74 KB of shared memory fit an H100 SM), else 1 (the accumulators alone take 128
/// registers at 256; three pages per warp take 213 KB at 128). 1 for more than kWarps warps a
/// block (kTensorCoresDeepPaired8).
template <int D, int kStages, int kW = kWarps>
constexpr int pipelined_min_blocks() {
  return D <= 128 && kStages == 1 && kW == kWarps ? 3 : 1;
}

/// Pages in flight per warp of AttentionKernel::kTensorCoresDeep: 3 up to head_dim 128 (213 KB
/// of shared memory per block at 128), 1 above (3 would not fit an SM).
template <int D>
constexpr int deep_stages() {
  return D <= 128 ? 3 : 1;
}

/// Splits whose partial outputs the split merge stages in shared memory at once (after the
/// weights, in the K/V and Q areas): 8 x 16 x head_dim floats.
inline constexpr int kMergeBatch = 8;

/// The last work item of the split tile of `w` merges its partial slots partial0 ..
/// partial0 + splits - 1 (normalized outputs o_j and log2-sum-exps s_j) into `out`:
/// o = sum_j 2^(s_j - max) o_j / sum_j 2^(s_j - max), j in split order (the combine kernel's
/// formula, the division a multiplication by the reciprocal). The partial outputs of kMergeBatch
/// splits at a time are contiguous in memory and come into shared memory by cp.async (one round
/// trip per batch). `scratch`: the kernel's dynamic shared memory. Block-wide; starts and ends with
/// all threads in step. kT: the block's threads.
template <int D, int kT = kThreads>
__device__ __forceinline__ void merge_splits(const AttnArgs& a, const AttnWork& w,
                                             std::int32_t partial0, std::int32_t splits,
                                             float* scratch) {
  constexpr int kVectors = D / 4;  // float4 per query vector
  constexpr int kTileVectors = kTileQueries * kVectors;
  constexpr int kPerThread = (kTileVectors + kT - 1) / kT;
  constexpr int kWeights = (kMaxMergedSplits + 1) * kTileQueries;
  static_assert((kWeights + kMergeBatch * kTileQueries * D) * 4 <= pipelined_shared_bytes<D, 1>());
  float* weight = scratch;                                      // [split][16]
  float* total = scratch + kMaxMergedSplits * kTileQueries;     // [16]
  auto* stage = reinterpret_cast<float4*>(scratch + kWeights);  // [batch split][16][D / 4]
  const std::int64_t first = static_cast<std::int64_t>(partial0) * kTileQueries;
  const auto* partial = reinterpret_cast<const float4*>(a.partial_out) + first * kVectors;
  const auto stage_batch = [&](int b0) {
    const int n = splits - b0 < kMergeBatch ? splits - b0 : kMergeBatch;
    const float4* from = partial + static_cast<std::int64_t>(b0) * kTileVectors;
    for (int i = threadIdx.x; i < n * kTileVectors; i += kT) cp_async_16(stage + i, from + i, true);
    cp_async_commit();
  };
  stage_batch(0);
  // The log2-sum-exps are contiguous too: slot j's 16 follow slot j - 1's. L2 reads (__ldcg;
  // cp.async.cg reads L2 as well): other blocks wrote them during this kernel.
  for (int i = threadIdx.x; i < splits * kTileQueries; i += kT)
    weight[i] = __ldcg(a.partial_lse + first + i);
  __syncthreads();
  if (threadIdx.x < kTileQueries) {
    const int q = threadIdx.x;
    float big = -INFINITY;
    for (int j = 0; j < splits; ++j) big = fmaxf(big, weight[j * kTileQueries + q]);
    float sum = 0.0f;
    for (int j = 0; j < splits; ++j) {
      const float wj = big == -INFINITY ? 0.0f : exp2f(weight[j * kTileQueries + q] - big);
      weight[j * kTileQueries + q] = wj;
      sum += wj;
    }
    total[q] = sum > 0.0f ? 1.0f / sum : 0.0f;  // the multiplier of the merged sums
  }
  // Each thread owns float4 groups f = threadIdx.x + 128 i of the tile's 16 x D outputs and adds
  // the splits in order.
  float4 o[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) o[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int b0 = 0; b0 < splits; b0 += kMergeBatch) {
    cp_async_wait<0>();
    __syncthreads();  // the batch is staged (and the weights are ready)
    const int n = splits - b0 < kMergeBatch ? splits - b0 : kMergeBatch;
    // Unrolled over the batch (a compile-time bound), so the shared loads of all its splits
    // are issued before the additions, which stay in split order.
#pragma unroll
    for (int j = 0; j < kMergeBatch; ++j) {
      if (j >= n) continue;
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int f = threadIdx.x + kT * i;
        if (f >= kTileVectors) continue;
        const float4 p = stage[j * kTileVectors + f];
        const float wj = weight[(b0 + j) * kTileQueries + f / kVectors];
        o[i].x += wj * p.x;
        o[i].y += wj * p.y;
        o[i].z += wj * p.z;
        o[i].w += wj * p.w;
      }
    }
    __syncthreads();  // the stage is free
    if (b0 + kMergeBatch < splits) stage_batch(b0 + kMergeBatch);
  }
  // Normalized by one multiplication (1 / sum per query, 0 for an empty one): a division per
  // element would be a long dependent chain per thread, and at 1 sequence one block per SM has
  // nothing to hide it behind.
  const int valid_queries = w.rows * a.group;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int f = threadIdx.x + kT * i;
    const int q = f / kVectors, d = (f % kVectors) * 4;
    if (f >= kTileVectors || q >= valid_queries) continue;
    const float inv = total[q];
    store4(static_cast<__nv_bfloat16*>(a.out) + query_vector(a, w, q) * D + d, o[i].x * inv,
           o[i].y * inv, o[i].z * inv, o[i].w * inv);
  }
}

/// atom.add.acq_rel.gpu: adds 1 to *counter and returns the old value; release orders the
/// writes this thread has observed (the block's, through the barrier before it) before the add,
/// acquire orders the reads after it after the other blocks' releases.
__device__ __forceinline__ unsigned count_in(unsigned* counter) {
  unsigned old = 0;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n"
               : "=r"(old)
               : "l"(counter)
               : "memory");
  return old;
}

/// kStages: pages in flight per warp (1: AttentionKernel::kTensorCoresPipelined, Paired and
/// DeepPaired8, 3: Deep and DeepPaired; a warp pair of a paired item has 2 kStages). kPairs: the
/// kernel also takes paired items (kTensorCoresPaired, kTensorCoresDeepPaired(8)); without it
/// their code is compiled out (a smaller kernel: the 1-sequence launches are latency-bound) and
/// a paired item traps. kW: warps a block (kWarps; 8 for kTensorCoresDeepPaired8, one block a
/// SM).
template <int D, int kStages, bool kPairs, int kW = kWarps>
__global__ void __launch_bounds__(kW * 32, pipelined_min_blocks<D, kStages, kW>())
    attention_mma_pipelined_kernel(AttnArgs a) {
  constexpr int kT = kW * 32;  // threads
  // With early_reads, a work item's metadata (uploaded before the pass's first kernel) is read
  // before the wait, Q and the cache after it (launch.cuh, "Early start").
  if (!a.early_reads) wait_for_prior_grid();
  constexpr int kStride = mma_row_stride<D>();
  constexpr int kSteps = D / 16;                              // k-steps of Q K^T
  constexpr int kDimTiles = D / 8;                            // n-tiles of P V
  constexpr int kRowChunks = D / 8;                           // 16-byte chunks of a K, V or Q row
  constexpr int kLaneChunks = kPageTokens * kRowChunks / 32;  // of a page, per lane
  constexpr int kHalfChunks = kLaneChunks / 2;                // of a pair's page, per lane
  extern __shared__ __align__(16) unsigned char shared_raw[];
  __shared__ int merge_here;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  constexpr std::size_t kPageArea = 2 * kPageTokens * kStride;  // one page's K then V rows
  auto* k_shared = reinterpret_cast<std::uint16_t*>(shared_raw) +
                   static_cast<std::size_t>(warp) * kStages * kPageArea;
  std::uint16_t* v_shared = k_shared + kPageTokens * kStride;
  auto* q_shared =
      reinterpret_cast<std::uint16_t*>(shared_raw + pipelined_kv_bytes<D, kStages, kW>());
  auto* merge = reinterpret_cast<float*>(shared_raw);
  float* merge_m = merge;                      // [warp][16]
  float* merge_l = merge + kW * kTileQueries;  // [warp][16]
  constexpr int kOStride = merge_row_stride<D>();
  float* merge_o = merge + 2 * kW * kTileQueries;               // [warp][16][kOStride]
  float* merge_scale = merge_o + kW * kTileQueries * kOStride;  // [warp][16]
  float* merge_inv = merge_scale + kW * kTileQueries;           // [32]: 1 / sum, or 0
  float* merge_lse = merge_inv + kPairedQueries;                // [32]

  const PassHeader* meta = a.meta;
  const auto* works = pass_section<AttnWork>(meta, meta->work_offset);
  const auto* combines = pass_section<AttnCombine>(meta, meta->combine_offset);
  const auto* rows = pass_section<RowInfo>(meta, meta->rows_offset);
  const auto* tables = pass_section<std::int32_t>(meta, meta->tables_offset);
  const auto* q_all = static_cast<const std::uint16_t*>(a.q);
  const auto* k_cache = static_cast<const std::uint16_t*>(a.k_cache);
  const auto* v_cache = static_cast<const std::uint16_t*>(a.v_cache);

  for (std::int32_t item = blockIdx.x; item < meta->attn_work; item += gridDim.x) {
    const AttnWork w = works[item];
    // A split tile's first partial slot and split count, read early (needed at the end).
    std::int32_t partial0 = 0, splits = 1;
    if (w.partial >= 0) {
      partial0 = combines[w.combine].partial;
      splits = combines[w.combine].splits;
      if (splits > kMaxMergedSplits) __trap();  // the planner's limit (PlanShape::split_align)
    }
    // A paired item (two tiles, 32 query vectors; PlanShape::pair_tiles) is never split. Its
    // warps w and w + kW / 2 form a pair (team w): both read the same pages (kv_begin + 32 (w +
    // kW / 2 i)), each copying half of every page, warp w for query vectors 0..15 and warp
    // w + kW / 2 for 16..31, and the pair's K/V areas hold its pages in turn. Otherwise each warp
    // reads its own pages (kv_begin + 32 (w + kW i)) into its own areas for the tile's 16 query
    // vectors.
    // (Without kPairs, `paired` is the constant false: the single-tile path compiles as if the
    // pairs did not exist.)
    const bool two_tiles = w.rows * a.group > kTileQueries;
    if (two_tiles && (!kPairs || w.partial >= 0)) __trap();  // a pairing plan, never split
    const bool paired = kPairs && two_tiles;
    const int teams = paired ? kW / 2 : kW;
    const int team = warp % teams, half = warp / teams;
    const std::int32_t step = teams * kPageTokens;  // this warp's next page
    // This warp's pages: c = kv_begin + team * 32 + step * i < kv_end. The item's last row sees
    // all of [kv_begin, kv_end) (the planner takes kv_end from it), so every position before
    // kv_end has been written; the rows of the last page past kv_end are zero-filled (no NaN in
    // P V).
    std::int32_t c = w.kv_begin + team * kPageTokens;
    const auto page_id = [&](std::int32_t chunk) {
      return chunk < w.kv_end ? tables[w.table + chunk / kPageTokens] : 0;
    };
    const std::int32_t first_page = page_id(c);
    std::int32_t next_page = page_id(c + step);
    // The two query vectors of this thread's C rows and their visible ends.
    const int q0 = half * kTileQueries + g, q1 = q0 + 8;
    const bool valid0 = q0 / a.group < w.rows, valid1 = q1 / a.group < w.rows;
    const std::int32_t end0 = visible_end(a, w, rows, valid0, q0),
                       end1 = visible_end(a, w, rows, valid1, q1);
    // Q and the K/V pages come from the kernels before this one (without early_reads the
    // kernel waited at its start; after the first item the wait returns at once).
    if (a.early_reads) wait_for_prior_grid();
    allow_next_grid();
    // This lane's copies of a page's K or V rows: all of them (a warp's own page), or its half
    // from chunk round `first` on (a pair's page).
    const auto issue = [&](std::uint16_t* dst, const std::uint16_t* cache, std::int32_t chunk,
                           std::int32_t page) {
      copy_page_rows<D, kLaneChunks>(dst, cache + page_offset(page, w.kv_head, a.kv_heads, D),
                                     chunk, w.kv_end, lane, 0);
    };
    const auto issue_half = [&](std::uint16_t* dst, const std::uint16_t* cache, std::int32_t chunk,
                                std::int32_t page, int first) {
      copy_page_rows<D, kHalfChunks>(dst, cache + page_offset(page, w.kv_head, a.kv_heads, D),
                                     chunk, w.kv_end, lane, first);
    };
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float acc[kDimTiles][4];
#pragma unroll
    for (int dn = 0; dn < kDimTiles; ++dn) acc[dn][0] = acc[dn][1] = acc[dn][2] = acc[dn][3] = 0.0f;
    std::uint32_t q_frag[kSteps][4];
    if (!paired) {
      // The Q tile into shared memory (zeros for vectors past w.rows): this thread's group 1.
      for (int i = threadIdx.x; i < kTileQueries * kRowChunks; i += kT) {
        const int q = i / kRowChunks, c8 = (i % kRowChunks) * 8;
        const bool valid = q / a.group < w.rows;
        // (an invalid vector reads nothing, from the item's first row: a valid address)
        cp_async_16(q_shared + q * kStride + c8,
                    q_all + query_vector(a, w, valid ? q : q % a.group) * D + c8, valid);
      }
      cp_async_commit();
      if (c < w.kv_end) issue(k_shared, k_cache, c, first_page);
      cp_async_commit();  // group 2: K of the first page
      if (c < w.kv_end) issue(v_shared, v_cache, c, first_page);
      cp_async_commit();  // group 3: V of the first page
      if constexpr (kStages > 1) {
        // Groups 4 .. 2 kStages + 1: K and V of the next kStages - 1 pages, stage s at area s.
#pragma unroll
        for (int stage = 1; stage < kStages; ++stage) {
          const std::int32_t chunk = c + stage * step;
          const std::int32_t page = stage == 1 ? next_page : page_id(chunk);
          std::uint16_t* area = k_shared + stage * kPageArea;
          if (chunk < w.kv_end) issue(area, k_cache, chunk, page);
          cp_async_commit();
          if (chunk < w.kv_end) issue(area + kPageTokens * kStride, v_cache, chunk, page);
          cp_async_commit();
        }
      }
      cp_async_wait<2 * kStages>();  // this thread's Q copies
      __syncthreads();               // everyone's
      // A fragments of Q: matrices (rows 0-7, k lo), (rows 8-15, k lo), (0-7, k hi), (8-15, k hi).
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks)
        ldmatrix_x4<false>(q_frag[ks],
                           q_shared + (lane & 15) * kStride + ks * 16 + (lane >> 4) * 8);

      // Three pages in flight per warp (kStages 3): page j in area j % kStages; once the warp
      // has read it, the page kStages ahead goes there.
      if constexpr (kStages > 1) {
        for (int j = 0; c < w.kv_end; c += step, ++j) {
          const std::int32_t refill = c + kStages * step;
          const std::int32_t refill_page = page_id(refill);
          std::uint16_t* k_page = k_shared + (j % kStages) * kPageArea;
          std::uint16_t* v_page = k_page + kPageTokens * kStride;
          cp_async_wait<2 * kStages - 1>();  // K of this page
          __syncwarp();
          float s[4][4];
          page_scores<D, kStride>(s, q_frag, k_page, lane);
          online_softmax_page(s, m, l, acc, c, t, end0, end1, a.scale_log2);
          cp_async_wait<2 * kStages - 2>();  // V of this page
          __syncwarp();
          page_values<D, kStride>(acc, s, v_page, lane);
          __syncwarp();  // every lane has read this area
          if (refill < w.kv_end) issue(k_page, k_cache, refill, refill_page);
          cp_async_commit();
          if (refill < w.kv_end) issue(v_page, v_cache, refill, refill_page);
          cp_async_commit();
        }
      } else {
        for (; c < w.kv_end; c += step) {
          const std::int32_t c_next = c + step;
          const std::int32_t after_page = page_id(c_next + step);  // two pages ahead
          cp_async_wait<1>();  // K of this page (its V may still be in flight)
          __syncwarp();
          float s[4][4];
          page_scores<D, kStride>(s, q_frag, k_shared, lane);
          __syncwarp();  // every lane has read this K page
          if (c_next < w.kv_end) issue(k_shared, k_cache, c_next, next_page);
          cp_async_commit();
          online_softmax_page(s, m, l, acc, c, t, end0, end1, a.scale_log2);
          cp_async_wait<1>();  // V of this page (the next K may still be in flight)
          __syncwarp();
          page_values<D, kStride>(acc, s, v_shared, lane);
          __syncwarp();  // every lane has read this V page
          if (c_next < w.kv_end) issue(v_shared, v_cache, c_next, next_page);
          cp_async_commit();
          next_page = after_page;
        }
      }
    } else if constexpr (kPairs) {
      // The pair's kRing page areas (its two warps' kStages areas each, alternating between the
      // warps) hold its pages in turn; this warp copies chunk rounds [half * 8, half * 8 + 8) of
      // each. Per page, K and V are one cp.async group each; kRing pages are in flight, the one
      // being read and those after it (two in kTensorCoresPaired and DeepPaired8, six in
      // kTensorCoresDeepPaired).
      constexpr int kRing = 2 * kStages;
      const auto area = [&](int j) {
        const int a = j % kRing;
        return reinterpret_cast<std::uint16_t*>(shared_raw) +
               (static_cast<std::size_t>(team + teams * (a & 1)) * kStages + (a >> 1)) * kPageArea;
      };
      const int barrier = 1 + team;
#pragma unroll
      for (int p = 0; p < kRing; ++p) {
        const std::int32_t chunk = c + p * step;
        const std::int32_t page = p == 0 ? first_page : p == 1 ? next_page : page_id(chunk);
        if (chunk < w.kv_end) issue_half(area(p), k_cache, chunk, page, half * kHalfChunks);
        cp_async_commit();
        if (chunk < w.kv_end)
          issue_half(area(p) + kPageTokens * kStride, v_cache, chunk, page, half * kHalfChunks);
        cp_async_commit();
      }
      std::int32_t ahead = page_id(c + kRing * step);  // the page after those in flight
      // A fragments of this warp's 16 query vectors straight from global memory (the Q area
      // holds one tile only).
      load_q_fragments<D>(q_frag, a, w, q_all, valid0, q0, valid1, q1, t);
      for (int j = 0; c < w.kv_end; c += step, ++j) {
        const std::int32_t beyond = page_id(c + (kRing + 1) * step);
        std::uint16_t* k_page = area(j);
        std::uint16_t* v_page = k_page + kPageTokens * kStride;
        cp_async_wait<2 * kRing - 1>();  // this warp's half of K (V, later pages in flight)
        pair_barrier(barrier);
        float s[4][4];
        page_scores<D, kStride>(s, q_frag, k_page, lane);
        online_softmax_page(s, m, l, acc, c, t, end0, end1, a.scale_log2);
        cp_async_wait<2 * kRing - 2>();  // this warp's half of V
        pair_barrier(barrier);
        page_values<D, kStride>(acc, s, v_page, lane);
        pair_barrier(barrier);  // both warps are done with this area
        const std::int32_t c2 = c + kRing * step;
        if (c2 < w.kv_end) issue_half(k_page, k_cache, c2, ahead, half * kHalfChunks);
        cp_async_commit();
        if (c2 < w.kv_end) issue_half(v_page, v_cache, c2, ahead, half * kHalfChunks);
        cp_async_commit();
        ahead = beyond;
      }
    }
    cp_async_wait<0>();
    // Merge the warps through shared memory (aliasing the K/V rows: all warps are done): all 4
    // for a tile, a pair's two for each half of a paired item.
    __syncthreads();
    stage_warp_result<D, kOStride>(merge_m, merge_l, merge_o, warp, g, t, m, l, acc);
    __syncthreads();
    const int queries = paired ? kPairedQueries : kTileQueries;
    // The warps that computed query vector q (of `queries`): those with k / warps_per_query ==
    // q / 16 (all kW for a tile, the kW / 2 warps of half h, h kW / 2 .. (h + 1) kW / 2 - 1, for
    // a paired item), at index q % 16 of their staged results, added in warp order.
    const int warps_per_query = kW / (queries / kTileQueries);
    // Per query vector once: each warp's scale 2^(m_k - max), 1 / sum and the log2-sum-exp
    // (attention_mma's per-element merge but for the multiplication by 1 / sum in place of its
    // division).
    if (threadIdx.x < queries) {
      const int q = threadIdx.x, local = q % kTileQueries, half_q = q / kTileQueries;
      float big = -INFINITY;
#pragma unroll
      for (int k = 0; k < kW; ++k)
        if (k / warps_per_query == half_q) big = fmaxf(big, merge_m[k * kTileQueries + local]);
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < kW; ++k) {
        if (k / warps_per_query != half_q) continue;
        const float scale =
            big == -INFINITY ? 0.0f : exp2f(merge_m[k * kTileQueries + local] - big);
        merge_scale[k * kTileQueries + local] = scale;
        sum += merge_l[k * kTileQueries + local] * scale;
      }
      merge_inv[q] = sum > 0.0f ? 1.0f / sum : 0.0f;
      merge_lse[q] = sum > 0.0f ? big + log2f(sum) : -INFINITY;
    }
    __syncthreads();
    // Each thread takes 4 consecutive dimensions (float4 groups f = threadIdx.x + 128 i) of
    // the tile's queries x D outputs: o = 0, o += o_k scale_k in warp order, then one
    // multiplication by 1 / sum (a division per element would be a long dependent chain per
    // thread, and at 1 sequence one block per SM has nothing to hide it behind).
    constexpr int kVectors = D / 4;
    constexpr int kGroups = (kPairs ? kPairedQueries : kTileQueries) * kVectors;
    const int valid_queries = w.rows * a.group;
#pragma unroll 4
    for (int i = 0; i < (kGroups + kT - 1) / kT; ++i) {
      const int f = threadIdx.x + kT * i;
      const int q = f / kVectors, d = (f % kVectors) * 4;
      if (f >= queries * kVectors || q >= valid_queries) continue;
      const int local = q % kTileQueries, half_q = q / kTileQueries;
      float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int k = 0; k < kW; ++k)
        if (k / warps_per_query == half_q) {
          const float4 v = *reinterpret_cast<const float4*>(
              merge_o + (static_cast<std::size_t>(k) * kTileQueries + local) * kOStride + d);
          const float scale = merge_scale[k * kTileQueries + local];
          o[0] += v.x * scale;
          o[1] += v.y * scale;
          o[2] += v.z * scale;
          o[3] += v.w * scale;
        }
      const float inv = merge_inv[q];
#pragma unroll
      for (int j = 0; j < 4; ++j) o[j] *= inv;
      if (w.partial < 0) {
        store4(static_cast<__nv_bfloat16*>(a.out) + query_vector(a, w, q) * D + d, o[0], o[1], o[2],
               o[3]);
      } else {
        const std::int64_t slot = static_cast<std::int64_t>(w.partial) * kTileQueries + q;
        *reinterpret_cast<float4*>(a.partial_out + slot * D + d) =
            make_float4(o[0], o[1], o[2], o[3]);
        if (d == 0) a.partial_lse[slot] = merge_lse[q];
      }
    }
    if (w.partial >= 0) {
      // Count this split in; the last one merges the tile (see above).
      __syncthreads();  // the block's partial writes are done (CTA scope) ...
      if (threadIdx.x == 0) {
        // ... and released at GPU scope with the count (acquiring the other splits' writes).
        const bool last = count_in(a.counters + w.combine) + 1u == static_cast<unsigned>(splits);
        if (last) a.counters[w.combine] = 0u;  // for the next pass: no other split is left
        merge_here = last;
      }
      __syncthreads();
      if (merge_here) merge_splits<D, kT>(a, w, partial0, splits, merge);
    }
    __syncthreads();  // the merge area is the next item's K/V rows
  }
  // A block without work exits after its predecessor only (launch.cuh).
  if (a.early_reads) wait_for_prior_grid();
}

// ---------------------------------------------------------------------------------------------

template <typename T, int D>
__global__ void attention_combine_kernel(const PassHeader* meta, const float* partial_out,
                                         const float* partial_lse, std::int32_t heads,
                                         std::int32_t group, T* out) {
  wait_for_prior_grid();
  const auto* combines = pass_section<AttnCombine>(meta, meta->combine_offset);
  for (std::int32_t item = blockIdx.x; item < meta->attn_combine; item += gridDim.x) {
    const AttnCombine cb = combines[item];
    for (int e = threadIdx.x; e < kTileQueries * D; e += blockDim.x) {
      const int q = e / D, d = e % D;
      if (q / group >= cb.rows) continue;
      float big = -INFINITY;
      for (int j = 0; j < cb.splits; ++j)
        big = fmaxf(big, partial_lse[static_cast<std::int64_t>(cb.partial + j) * kTileQueries + q]);
      float sum = 0.0f, o = 0.0f;
      if (big != -INFINITY)
        for (int j = 0; j < cb.splits; ++j) {
          const std::int64_t slot = static_cast<std::int64_t>(cb.partial + j) * kTileQueries + q;
          const float weight = exp2f(partial_lse[slot] - big);
          sum += weight;
          o += weight * partial_out[slot * D + d];
        }
      const std::int32_t row = cb.row0 + q / group;
      const std::int32_t head = cb.kv_head * group + q % group;
      out[(static_cast<std::int64_t>(row) * heads + head) * D + d] =
          from_float<T>(sum > 0.0f ? o / sum : 0.0f);
    }
  }
}

/// Throws dice::Error unless `dtype` suits `kernel` (the tensor-core kernels read bf16).
void check_kernel_dtype(CudaDType dtype, AttentionKernel kernel) {
  if (kernel != AttentionKernel::kCudaCores && dtype != CudaDType::kBF16)
    throw Error("CUDA attention: the tensor-core kernels need bf16");
}

/// A kernel of the attention at head_dim D: its name for errors, its function, the dynamic
/// shared memory every launch of it takes and its threads a block.
struct AttentionLaunch {
  const char* name;
  void (*kernel)(AttnArgs);
  std::size_t shared;
  int threads = kThreads;
};

/// The kernel `kernel` launches (for kCudaCores, the one for `dtype`): the one mapping of
/// AttentionKernel to kernel instantiations, for launches and for occupancy.
template <int D>
AttentionLaunch attention_launch(CudaDType dtype, AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kTensorCoresPipelined:
      return {"attention_mma_pipelined_kernel", attention_mma_pipelined_kernel<D, 1, false>,
              pipelined_shared_bytes<D, 1>()};
    case AttentionKernel::kTensorCoresPaired:
      return {"attention_mma_pipelined_kernel (paired)", attention_mma_pipelined_kernel<D, 1, true>,
              pipelined_shared_bytes<D, 1>()};
    case AttentionKernel::kTensorCoresDeep:
      return {"attention_mma_pipelined_kernel (deep)",
              attention_mma_pipelined_kernel<D, deep_stages<D>(), false>,
              pipelined_shared_bytes<D, deep_stages<D>()>()};
    case AttentionKernel::kTensorCoresDeepPaired:
      return {"attention_mma_pipelined_kernel (deep, paired)",
              attention_mma_pipelined_kernel<D, deep_stages<D>(), true>,
              pipelined_shared_bytes<D, deep_stages<D>()>()};
    case AttentionKernel::kTensorCoresDeepPaired8:
      return {"attention_mma_pipelined_kernel (deep, paired, 8 warps)",
              attention_mma_pipelined_kernel<D, 1, true, 8>, pipelined_shared_bytes<D, 1, 8>(),
              8 * 32};
    case AttentionKernel::kTensorCores:
      return {"attention_mma_kernel", attention_mma_kernel<D>, mma_shared_bytes<D>()};
    case AttentionKernel::kCudaCores:
      break;
  }
  if (dtype == CudaDType::kBF16)
    return {"attention_simple_kernel", attention_simple_kernel<__nv_bfloat16, D>, 0};
  return {"attention_simple_kernel", attention_simple_kernel<float, D>, 0};
}

template <int D>
void run_attention(CudaDType dtype, AttentionKernel kernel, const AttnArgs& args, std::int32_t grid,
                   cudaStream_t stream, bool pdl) {
  const AttentionLaunch l = attention_launch<D>(dtype, kernel);
  launch_kernel(l.name, l.kernel, static_cast<unsigned>(grid), static_cast<unsigned>(l.threads),
                l.shared, stream, pdl, args);
}

template <int D>
void run_combine(CudaDType dtype, const PassHeader* meta, const float* partial_out,
                 const float* partial_lse, std::int32_t heads, std::int32_t group, void* out,
                 std::int32_t grid, cudaStream_t stream, bool pdl) {
  const auto blocks = static_cast<unsigned>(grid);
  if (dtype == CudaDType::kBF16)
    launch_kernel("attention_combine_kernel", attention_combine_kernel<__nv_bfloat16, D>, blocks,
                  kThreads, 0, stream, pdl, meta, partial_out, partial_lse, heads, group,
                  static_cast<__nv_bfloat16*>(out));
  else
    launch_kernel("attention_combine_kernel", attention_combine_kernel<float, D>, blocks, kThreads,
                  0, stream, pdl, meta, partial_out, partial_lse, heads, group,
                  static_cast<float*>(out));
}

/// Raises `kernel`'s dynamic shared memory limit to `bytes` and returns its blocks per SM: 0 when
/// `bytes` exceed what one block of this device may opt in to (the kernel cannot run here).
/// `threads`: the block's.
template <typename... Params>
int blocks_per_sm(void (*kernel)(Params...), std::size_t bytes, int threads = kThreads) {
  const int optin = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  int blocks = 0;
  if (bytes > static_cast<std::size_t>(optin)) return 0;
  if (bytes > 0)
    DICE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes)));
  DICE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, bytes));
  return blocks;
}

template <int D>
std::int32_t grid_for(CudaDType dtype, AttentionKernel kernel) {
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  const AttentionLaunch l = attention_launch<D>(dtype, kernel);
  return sms * blocks_per_sm(l.kernel, l.shared, l.threads);
}

AttnArgs make_args(const PassHeader* meta, const void* q, CacheLayer cache, const LayerShape& shape,
                   void* out, float* partial_out, float* partial_lse, std::uint32_t* counters) {
  AttnArgs a{};
  a.counters = counters;
  a.meta = meta;
  a.q = q;
  a.k_cache = cache.k;
  a.v_cache = cache.v;
  a.out = out;
  a.partial_out = partial_out;
  a.partial_lse = partial_lse;
  a.heads = shape.heads;
  a.kv_heads = shape.kv_heads;
  a.group = shape.heads / shape.kv_heads;
  a.scale_log2 = kLog2e / sqrtf(static_cast<float>(shape.head_dim));
  return a;
}

}  // namespace

bool attention_supports(std::int32_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

namespace {

/// Calls f(std::integral_constant<int, D>) for the supported head_dim D; throws for others.
template <typename F>
void with_head_dim(std::int32_t head_dim, F&& f) {
  switch (head_dim) {
    case 16:
      return f(std::integral_constant<int, 16>{});
    case 32:
      return f(std::integral_constant<int, 32>{});
    case 64:
      return f(std::integral_constant<int, 64>{});
    case 128:
      return f(std::integral_constant<int, 128>{});
    case 256:
      return f(std::integral_constant<int, 256>{});
    default:
      throw Error("CUDA attention: head_dim " + std::to_string(head_dim) +
                  " is not supported (16, 32, 64, 128 or 256)");
  }
}

}  // namespace

std::int32_t attention_grid(CudaDType dtype, AttentionKernel kernel, std::int32_t head_dim) {
  check_kernel_dtype(dtype, kernel);
  std::int32_t grid = 0;
  with_head_dim(head_dim, [&](auto d) { grid = grid_for<decltype(d)::value>(dtype, kernel); });
  return grid;
}

void launch_attention(CudaDType dtype, AttentionKernel kernel, const PassHeader* meta,
                      const void* q, CacheLayer cache, const LayerShape& shape, void* out,
                      float* partial_out, float* partial_lse, std::uint32_t* counters,
                      std::int32_t grid, cudaStream_t stream, bool pdl, bool early_reads) {
  check_kernel_dtype(dtype, kernel);
  if (attention_merges_splits(kernel) && counters == nullptr)
    throw Error("CUDA attention: the pipelined kernel needs its merge counters");
  AttnArgs args = make_args(meta, q, cache, shape, out, partial_out, partial_lse, counters);
  args.early_reads = pdl && early_reads;
  with_head_dim(shape.head_dim, [&](auto d) {
    run_attention<decltype(d)::value>(dtype, kernel, args, grid, stream, pdl);
  });
}

void launch_attention_combine(CudaDType dtype, const PassHeader* meta, const float* partial_out,
                              const float* partial_lse, const LayerShape& shape, void* out,
                              std::int32_t grid, cudaStream_t stream, bool pdl) {
  const std::int32_t group = shape.heads / shape.kv_heads;
  with_head_dim(shape.head_dim, [&](auto d) {
    run_combine<decltype(d)::value>(dtype, meta, partial_out, partial_lse, shape.heads, group, out,
                                    grid, stream, pdl);
  });
}

}  // namespace dice::engine::cuda
