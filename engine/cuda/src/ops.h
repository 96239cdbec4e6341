#pragma once
// The kernels of the CUDA backend and their launchers, one .cu file per op (embedding.cu,
// rms_norm.cu, qk_norm_rope.cu, attention.cu, swiglu.cu, vocab_pass.cu). Matrices are row-major.
//
// A pass is one trip of a batch of rows (tokens of several sequences) through the layers. What
// varies from pass to pass (token ids, positions, cache slots, attention work, sampling
// parameters) lives in one metadata block in device memory, a PassHeader followed by sections,
// so that kernels take fixed pointers and a captured CUDA graph replays with new contents. Every
// launcher checks its launch (DICE_CUDA_CHECK_LAUNCH) and throws dice::Error on failure. With
// `pdl` a launcher launches with programmatic dependent launch (launch.cuh; the kernels wait for
// the previous kernel first thing, so results are the same bits either way).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "dice/engine/cuda_backend.h"

namespace dice::engine::cuda {

/// Tokens per KV page. Attention reads the cache in chunks of one page.
inline constexpr int kPageTokens = 32;
/// The head_dim of the per-lane q/k norm + RoPE layout (qk_norm_rope.cuh: the vectorised q/k
/// kernel and the wgmma GEMM's q/k epilogue, whose column tile is one head vector).
inline constexpr int kQkHeadDim = 128;
/// Query vectors (rows x heads of one KV head) per attention tile: one m16 MMA tile.
inline constexpr int kTileQueries = 16;
/// Query vectors of a paired work item (PlanShape::pair_tiles): two tiles of one pass item, for
/// AttentionKernel::kTensorCoresPaired only.
inline constexpr int kPairedQueries = 2 * kTileQueries;
/// Most splits of one tile's KV range that AttentionKernel::kTensorCoresPipelined merges itself
/// (its merge keeps a weight per split and query vector in shared memory); the planner caps
/// splits at this when it plans for that kernel (PlanShape::split_align > 0).
inline constexpr int kMaxMergedSplits = 64;

/// One row (token) of a pass.
struct RowInfo {
  std::int32_t token;
  std::int32_t position;  ///< absolute position in its sequence (RoPE)
  std::int32_t kv_len;    ///< it attends to cache positions [0, kv_len), its own K/V included
  std::int32_t page;      ///< its K/V are written to this page (0: the scratch page) ...
  std::int32_t slot;      ///< ... at this slot, position % kPageTokens
};

/// One unit of attention work: a tile of query rows of one sequence, one KV head, one split of
/// the KV range. The tile's query vectors are q = 0..15 -> row row0 + q / group, head
/// kv_head * group + q % group (valid when q / group < rows). A paired item (rows * group >
/// kTileQueries, never split; AttentionKernel::kTensorCoresPaired only) holds two tiles:
/// q = 0..31.
struct AttnWork {
  std::int32_t row0;
  std::int32_t rows;
  std::int32_t kv_head;
  std::int32_t kv_begin;  ///< a multiple of kPageTokens
  std::int32_t kv_end;    ///< positions [kv_begin, kv_end), clipped per row to its kv_len
  std::int32_t table;     ///< index of the sequence's first page id in the tables section
  std::int32_t partial;   ///< -1: write the normalized output; else the partial slot
  std::int32_t combine;   ///< the tile's AttnCombine entry (and merge counter) if split, else -1
};

/// A tile whose KV range was split: its partial slots [partial, partial + splits) are merged.
struct AttnCombine {
  std::int32_t row0;
  std::int32_t rows;
  std::int32_t kv_head;
  std::int32_t partial;
  std::int32_t splits;
  std::int32_t pad[3];
};

/// Sampling parameters of one block row (sampling.h).
struct SampleInfo {
  double temperature;
  double top_p;
  std::uint64_t seed;
  std::int64_t position;
  std::int32_t step;
  std::int32_t top_k;
  std::int32_t mask_id;
  std::int32_t vocab_limit;
};

/// What the vocabulary pass returns per block row.
struct ProposalOut {
  std::int32_t token;
  float confidence;
  float entropy;
  std::int32_t status;  ///< kProposalOk, or why none was drawn
};
inline constexpr std::int32_t kProposalOk = 0;
inline constexpr std::int32_t kProposalNaN = 1;        ///< a logit is NaN (token: its id)
inline constexpr std::int32_t kProposalNoAllowed = 2;  ///< no allowed id with a finite logit

/// The metadata block of one pass: this header, then the sections at the byte offsets given.
struct PassHeader {
  std::int32_t rows;          ///< valid rows (kernels launched over a padded count skip the rest)
  std::int32_t block_rows;    ///< rows that get logits
  std::int32_t attn_work;     ///< AttnWork entries
  std::int32_t attn_combine;  ///< AttnCombine entries
  std::int32_t rows_offset;   ///< RowInfo[rows]
  std::int32_t block_index_offset;  ///< int32[block_rows]: the pass row of each block row
  std::int32_t samples_offset;      ///< SampleInfo[block_rows]
  std::int32_t work_offset;         ///< AttnWork[attn_work]
  std::int32_t combine_offset;      ///< AttnCombine[attn_combine]
  std::int32_t tables_offset;       ///< int32 page ids
  std::int32_t pad[2];
};

/// A section of a metadata block (host or device pointer alike).
template <typename T>
__host__ __device__ inline const T* pass_section(const PassHeader* header, std::int32_t offset) {
  return reinterpret_cast<const T*>(reinterpret_cast<const char*>(header) + offset);
}

/// Shapes the layer kernels need.
struct LayerShape {
  std::int32_t hidden;
  std::int32_t heads;
  std::int32_t kv_heads;
  std::int32_t head_dim;
  std::int32_t intermediate;
  double eps;
};

/// Where one layer's K and V pages are: page p, KV head h, slot s starts at
/// base + ((p * kv_heads + h) * kPageTokens + s) * head_dim elements.
struct CacheLayer {
  void* k;
  void* v;
};

/// x[r] = embedding[token of row r] as fp32, [rows_pad, hidden]; rows at or past header->rows get
/// zeros. `table` is [vocab, hidden] of `dtype`.
void launch_embedding(CudaDType dtype, const PassHeader* meta, const void* table,
                      std::int32_t hidden, float* x, std::int32_t rows_pad, cudaStream_t stream,
                      bool pdl = false);

/// out[r] = weight * x[r] / sqrt(mean(x[r]^2) + eps) (fp32 math, sum in double, as the CPU
/// reference), written as `dtype`; x [rows, hidden] fp32. With `gather` (a metadata block), out
/// row r normalizes x row block_index[r] for r < header->block_rows and is zero after that.
/// `vectorised` (hidden a multiple of 4, at most 8,192): the row held in registers, and for bf16
/// the sum in float; otherwise the first kernel (scalar loads, double sum). `early_weight` (with
/// pdl; the vectorised kernel): `weight`, a model weight that no kernel of the pass writes, is read
/// before the programmatic wait (launch.cuh, "Early start"), so that it does not queue behind the
/// next GEMM's early weight loads, which the kernel's trigger lets start; the same bits either way.
/// `trigger`: where the vectorised kernel lets the next kernel start under PDL (NormTrigger: once
/// it has read its row, right after its own programmatic wait, or before it; the scalar kernel
/// always after its wait); the same bits in every position.
void launch_rms_norm(CudaDType dtype, const float* x, const float* weight, std::int32_t hidden,
                     double eps, void* out, std::int32_t rows, const PassHeader* gather,
                     cudaStream_t stream, bool vectorised = true, bool pdl = false,
                     bool early_weight = false, NormTrigger trigger = NormTrigger::kAfterRead);

/// From the fused projection output qkv [rows_pad, (heads + 2 kv_heads) head_dim] fp32: per-head
/// RMSNorm of q and k with q_norm / k_norm [head_dim], NeoX rotate-half RoPE at the row's
/// position from `rope` (cos, sin) [max_position, head_dim / 2], q written to q_out
/// [rows_pad, heads, head_dim] and k, v into the paged cache at the row's page and slot (all
/// `dtype`). Rows at or past header->rows are skipped. `warp_per_vector`: one warp per (row,
/// head vector) over many blocks, norm sums in float for bf16; otherwise the first layout (one
/// block per row, its 8 warps looping over the vectors, double sums). fp32 sums in double.
/// `square_sums` (CudaBackendOptions::fold_qkv_norm, norm_fold.h; bf16, head_dim 128,
/// warp_per_vector only): qkv is the projection of bf16(w x) instead of RMSNorm(x) = w x / r, and
/// square_sums [rows_pad, fold_width / 64] fp32 holds each row's sums of squares of x per 64
/// columns (WgmmaNormFold): q and k are normalised with eps r^2 (what their r^2-fold mean squares
/// need for the same result), V is multiplied by 1 / r. Throws dice::Error for a fold outside those
/// conditions. `early_reads` (with pdl; bf16, head_dim 128, warp_per_vector): each warp reads its
/// row's metadata, RoPE pairs and norm weight before waiting for the kernel before it (launch.cuh,
/// "Early start"); the same bits.
void launch_qk_norm_rope(CudaDType dtype, const PassHeader* meta, const float* qkv,
                         const float* q_norm, const float* k_norm, const float2* rope,
                         const LayerShape& shape, void* q_out, CacheLayer cache,
                         std::int32_t rows_pad, cudaStream_t stream, bool warp_per_vector = true,
                         bool pdl = false, const float* square_sums = nullptr,
                         std::int32_t fold_width = 0, bool early_reads = false);

/// The attention kernels (attention.cu).
enum class AttentionKernel {
  kCudaCores,    ///< attention_simple: CUDA cores, bf16 or fp32
  kTensorCores,  ///< attention_mma: bf16 mma.sync, each warp loads a page, then computes
  /// attention_mma_pipelined: bf16 mma.sync, cp.async K/V loads in flight while the warp
  /// computes, ldmatrix fragments; merges split tiles itself (no launch_attention_combine)
  kTensorCoresPipelined,
  /// attention_mma_pipelined that also takes paired items (a plan with PlanShape::pair_tiles;
  /// the other pipelined kernels trap on them). The same bits as kTensorCoresPipelined on a plan
  /// without pairs.
  kTensorCoresPaired,
  /// attention_mma_pipelined with three pages in flight per warp (213 KB of shared memory: one
  /// block per SM): for passes whose work items do not outnumber the SMs, where one page per
  /// warp leaves the kernel waiting on latency. The same page order per warp, so the same bits.
  kTensorCoresDeep,
  /// kTensorCoresDeep that also takes paired items (a warp pair keeps six pages in flight): for
  /// passes whose paired items, not their tiles, about match the SMs (SDAR-4B's fused store
  /// passes at 13-16 sequences: 4 commit rows + a block of 4, group 4, two tiles per KV head that
  /// would otherwise each read every page). The same bits as kTensorCoresPaired on a plan with
  /// pairs and as kTensorCoresPipelined on one without.
  kTensorCoresDeepPaired,
  /// kTensorCoresDeepPaired with 8 warps a block (4 pairs, each a ring of 2 pages: one stage a
  /// warp), so a warp takes 1/4 of an item's pages instead of 1/2. Other page order, other bits
  /// (the same run to run). The backend's default (CudaBackendOptions::attention_deep_pairs_warps).
  kTensorCoresDeepPaired8,
};

/// Whether `kernel` merges split tiles itself (with merge counters): the pipelined kernels.
inline bool attention_merges_splits(AttentionKernel kernel) {
  return kernel == AttentionKernel::kTensorCoresPipelined ||
         kernel == AttentionKernel::kTensorCoresPaired ||
         kernel == AttentionKernel::kTensorCoresDeep ||
         kernel == AttentionKernel::kTensorCoresDeepPaired ||
         kernel == AttentionKernel::kTensorCoresDeepPaired8;
}

/// Whether split tiles of `kernel` need launch_attention_combine after it.
inline bool attention_needs_combine(AttentionKernel kernel) {
  return !attention_merges_splits(kernel);
}

/// Positions per unit of a split KV range the planner should use for `kernel`
/// (PlanShape::split_align): kTensorCoresPipelined/Paired/Deep/DeepPaired give each of their 4
/// warps one page of a 128-position range at once (kTensorCoresDeepPaired8, 8 warps, takes the
/// same unit; its plans, pairs only, are never split); 0 (the others): the first planner's
/// page-aligned ranges.
inline std::int32_t attention_split_align(AttentionKernel kernel) {
  return attention_merges_splits(kernel) ? 4 * kPageTokens : 0;
}

/// Attention of every AttnWork of the pass: softmax(q k^T / sqrt(head_dim)) v over the paged
/// cache, per query row over positions [kv_begin, min(kv_end, kv_len)). Output [rows, heads,
/// head_dim] `dtype`, or partial results (normalized output fp32 [slot, 16, head_dim] and log2
/// of the softmax denominator plus the max, fp32 [slot, 16]) that launch_attention_combine
/// merges when attention_needs_combine(kernel); kTensorCoresPipelined/Paired/Deep/DeepPaired merge
/// them itself, with `counters` (uint32, at least one per AttnCombine entry of the pass; zero
/// before the first launch, and each launch leaves them zero). kTensorCores* need bf16. `grid`:
/// blocks of the persistent kernel (attention_grid). `early_reads` (the kernels that merge splits):
/// each work item's metadata is read before waiting for the kernel before this one (launch.cuh,
/// "Early start").
void launch_attention(CudaDType dtype, AttentionKernel kernel, const PassHeader* meta,
                      const void* q, CacheLayer cache, const LayerShape& shape, void* out,
                      float* partial_out, float* partial_lse, std::uint32_t* counters,
                      std::int32_t grid, cudaStream_t stream, bool pdl = false,
                      bool early_reads = false);
/// Merges the split tiles' partial results into `out`.
void launch_attention_combine(CudaDType dtype, const PassHeader* meta, const float* partial_out,
                              const float* partial_lse, const LayerShape& shape, void* out,
                              std::int32_t grid, cudaStream_t stream, bool pdl = false);
/// Blocks of the persistent attention kernel that fit on the device at once (occupancy); 0 when
/// the kernel cannot run on this device (it needs more shared memory per block than the device
/// lets a block opt in to: kTensorCoresDeep/DeepPaired take ~213 KB at head_dim 128). Also raises
/// the kernel's dynamic shared memory limit, which every launch of it needs first.
std::int32_t attention_grid(CudaDType dtype, AttentionKernel kernel, std::int32_t head_dim);
/// Whether the kernels support this head_dim (16, 32, 64, 128, 256).
bool attention_supports(std::int32_t head_dim);

/// out[r, i] = silu(gate_up[r, 2i]) * gate_up[r, 2i + 1] (as `dtype`) for rows_pad rows: the
/// gate/up projection's columns alternate gate and up (swiglu.cuh); gate_up [rows_pad, 2 inter]
/// fp32, out [rows_pad, inter].
void launch_swiglu(CudaDType dtype, const float* gate_up, std::int32_t inter, void* out,
                   std::int32_t rows_pad, cudaStream_t stream, bool pdl = false);
/// The same with gate_up bf16 [rows_pad, 2 inter] (Gemm::run_bf16_out) and out bf16 [rows_pad,
/// inter]: silu in fp32 of the bf16 values, so the same bits as launch_swiglu on the fp32 array
/// of those values. Throws dice::Error if the launch fails.
void launch_swiglu_bf16_input(const __nv_bfloat16* gate_up, std::int32_t inter, void* out,
                              std::int32_t rows_pad, cudaStream_t stream, bool pdl = false);

/// One block per block row r < header->block_rows of logits [.., vocab] fp32: the proposal of
/// sampling.h (allowed ids, greedy or temperature / top-k / top-p with the Philox uniform of
/// (seed, position, step), confidence and entropy of the temperature-1 softmax).
void launch_vocab_pass(const PassHeader* meta, const float* logits, std::int32_t vocab,
                       ProposalOut* out, std::int32_t block_rows_pad, cudaStream_t stream,
                       bool pdl = false);

/// Per-chunk results of the chunked vocabulary pass: kernel 1 writes the first four, kernel 2
/// the sums (at the row's maximum m: sum exp(x - m), sum exp(x - m) (x - m), sum exp((x - m) / T)).
struct VocabPartial {
  float max;                  ///< largest allowed non-NaN logit of the chunk (-inf if none)
  std::int32_t argmax;        ///< its lowest id, -1 if none
  std::int32_t nan_id;        ///< lowest allowed id with a NaN logit, INT_MAX if none
  std::int32_t last_allowed;  ///< highest allowed id of the chunk, -1 if none
  double sum;
  double weighted;
  double sample_sum;
};
/// Bins per row of the top-k / top-p threshold search (vocab_pass.cu, ThresholdSearch).
inline constexpr std::int32_t kVocabBins = 1024;
/// Device scratch of the chunked vocabulary pass: partials [block_rows_pad * chunks]; one counter
/// per block row; for rows with top-k / top-p, the chunk blocks' bin counts
/// [block_rows_pad * kVocabBins] and approximate bin masses (2^-40 fixed point, same shape).
/// Counters and bins are zero between passes (cudaMemset once; the pass leaves them zero).
struct VocabWorkspace {
  VocabPartial* partials;
  std::uint32_t* counters;
  std::uint32_t* bin_counts;
  unsigned long long* bin_masses;
};
/// Chunks per row: at most this many (one block reduces the row's chunk maxima) ...
inline constexpr std::int32_t kMaxVocabChunks = 256;
/// ... and none shorter than this many ids.
inline constexpr std::int32_t kMinVocabChunk = 1024;

/// Chunks per row for the chunked pass: about 4 blocks per SM over the padded rows, within
/// [1, kMaxVocabChunks] and chunks of at least kMinVocabChunk ids.
std::int32_t vocab_pass_chunks(std::int32_t vocab, std::int32_t block_rows_pad, std::int32_t sms);

/// Passes of more padded block rows than this run the chunked pass's sum kernel at three blocks
/// per SM; fewer at one (vocab_sum_blocks_per_sm).
inline constexpr std::int32_t kVocabSumFewRows = 16;

/// Blocks of 512 threads per SM the chunked pass's sum kernel is compiled for at
/// `block_rows_pad` padded block rows: 3 above kVocabSumFewRows, else 1. At one block per SM
/// (104 registers) its double-precision exp loop is latency-bound with many rows (Nsight
/// Compute, SDAR-1.7B at 128 sequences: 25% occupancy, FP64 at 13% of peak, 0.5 TB/s of
/// logits); at three (40 registers) decoding is 0.8% (16 sequences) to 2.5% (128) faster, and
/// at 1 sequence, where each block sums ~4 ids per thread, 0.5-0.9% slower
/// (bench/results/2026-11-25-boundary-probe-h100).
int vocab_sum_blocks_per_sm(std::int32_t block_rows_pad);

/// The same proposals as launch_vocab_pass with each row's vocabulary split over `chunks` blocks
/// (two kernels, grid chunks x block_rows_pad; the row's last block combines, in chunk order, so
/// results are deterministic for a given `chunks`). Rows with top-k / top-p run the
/// whole-row top-k / top-p selection in that last block, from the chunk blocks' maximum, sums and
/// level-0 bins.
/// `sum_blocks_per_sm`: the sum kernel's compiled occupancy, 1 or 3 (0: vocab_sum_blocks_per_sm;
/// the same bits either way).
/// Throws dice::Error if chunks is outside [1, kMaxVocabChunks], sum_blocks_per_sm is not 0, 1
/// or 3, or a launch fails.
void launch_vocab_pass_chunked(const PassHeader* meta, const float* logits, std::int32_t vocab,
                               ProposalOut* out, std::int32_t block_rows_pad, std::int32_t chunks,
                               VocabWorkspace workspace, cudaStream_t stream, bool pdl = false,
                               int sum_blocks_per_sm = 0);

/// Fills `count` elements of `dtype` at `data` with normal(0, std) values from a counter-based
/// hash of (seed, index) (benchmarks and GEMM-rate measurement: never zeros).
void launch_fill_random(CudaDType dtype, void* data, std::int64_t count, float std,
                        std::uint64_t seed, cudaStream_t stream);

/// *out = a hash of the bits of data[0, count) and their indices (a sum of mixed 64-bit values:
/// independent of the order threads add them). Two arrays with the same hash are, but for a
/// 2^-64 chance, bit for bit equal. Throws dice::Error if a launch fails.
void launch_hash(const float* data, std::int64_t count, unsigned long long* out,
                 cudaStream_t stream);

}  // namespace dice::engine::cuda
