#pragma once
// The CUDA backend of the engine (system.md §2; issue 6): SDAR/Qwen3 forwards on one GPU with
// weights in bf16 (or fp32 for exactness tests), GEMMs through cuBLASLt, our kernels for the rest,
// a paged KV cache shared by many sequences, CUDA graphs for the denoising steps and the fused
// vocabulary pass that draws proposals exactly as sampling.h specifies.
//
// The CPU backend (cpu_backend.h) is its slow, obviously-correct twin: every test compares the two.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dice/engine/backend.h"
#include "dice/model/config.h"

namespace dice::model {
class Checkpoint;
}

namespace dice::engine {

struct CpuWeights;

/// Element type of the weights, activations and KV cache on the GPU. Residual stream, GEMM
/// accumulation, logits and the vocabulary pass are fp32 (doubles for the softmax sums) in both.
enum class CudaDType {
  kBF16,  ///< the production setting: bf16 weights (fp32/fp16 checkpoints are rounded)
  kF32,   ///< fp32 everywhere (GEMMs without TF32): for tests against the fp32 CPU reference
};

/// Which attention kernel runs.
enum class CudaAttention {
  kAuto,         ///< tensor cores (mma.sync) for bf16, CUDA cores for fp32
  kCudaCores,    ///< the simple CUDA-core kernel for both dtypes (slower; the fallback)
  kTensorCores,  ///< mma.sync m16n8k16 bf16 (bf16 only; head_dim a multiple of 16)
};

/// Options of the CUDA backend.
struct CudaBackendOptions {
  CudaDType dtype = CudaDType::kBF16;
  CudaAttention attention = CudaAttention::kAuto;
  int device = 0;  ///< CUDA device ordinal
  /// Device memory the backend may take in all (weights, work buffers, KV cache), bytes; 0: the
  /// free memory at construction minus a margin of 5% of the card (at least 1 GiB). A backend
  /// sized that way holds nearly the whole card, so a second backend in the same process (or a
  /// test run beside it) needs an explicit limit on both.
  std::int64_t memory_limit_bytes = 0;
  /// Rows (tokens of all sequences) per pass through the layers; a forward with more rows (a long
  /// prompt prefill) runs as several passes (exact: commit chunks are whole blocks, in order).
  std::int64_t max_rows = 4096;
  /// Block rows (rows that get logits) per pass: bounds the fp32 logits buffer.
  std::int64_t max_block_rows = 1024;
  /// Capture each batch shape's pass as a CUDA graph and replay it (rows up to graph_max_rows).
  bool cuda_graphs = true;
  std::int64_t graph_max_rows = 2048;
  /// Kernel layouts for few rows (issue 6, profile of 2026-11-23). The earlier layouts stay
  /// selectable so that one device run can time both (`--cuda-baseline-kernels`).
  /// Vocabulary pass split over many blocks per row (false: one block per block row).
  bool chunked_vocab_pass = true;
  /// A split KV range of the attention holds at least this many positions (the combine kernel
  /// is skipped when no tile is split); 0: the first planner, which split down to 2 pages. With
  /// the pipelined kernel: tiles of at least twice this many positions are split, into ranges
  /// of 128 positions (one page per warp) or more, as many as fill the GPU.
  std::int32_t attention_min_split_keys = 256;
  /// bf16 tensor-core attention: the pipelined kernel (cp.async K/V loads in flight while each
  /// warp computes, split tiles merged in the same kernel by their last work item, no combine
  /// launch; bench/results/2026-11-23-engine-attention-h100). false: the first mma kernel
  /// (synchronous page loads) and the combine kernel.
  bool pipelined_attention = true;
  /// Pipelined attention: most splits of one tile's KV range (0: 64, the kernel's limit). 8
  /// rather than 16: at 1 sequence x 4,096 new tokens +1.4% tok/s (SDAR-4B) and +1.0% (1.7B),
  /// the same at 1,024 (bench/results/2026-11-24-splits-bf16-gate-up): past 8 partial
  /// results, the last split's merge costs more than the shorter page loops save.
  std::int32_t attention_max_splits = 8;
  /// Pipelined attention's work planner: split counts chosen by waves of resident blocks
  /// (PlanShape::wave_splits) and the tiles of one sequence that read the same K/V pages
  /// launched side by side (PlanShape::group_tiles). false: the earlier rules (ceil of blocks
  /// over tiles; longest range first).
  bool attention_balanced_plan = true;
  /// Pipelined attention: two tiles of a sequence's pass in one work item of 32 query vectors
  /// whose warp pairs share each K/V page (PlanShape::pair_tiles), in passes with enough work
  /// items without splits (many sequences). With 4 query heads per KV head (SDAR-4B/8B) a fused
  /// store pass has two tiles per KV head; paired, the K/V pages are read once. false: one tile
  /// per work item.
  bool attention_paired_tiles = true;
  /// Pipelined attention's planner: positions of fixed cost a split adds to its makespan
  /// estimate where the unsplit tiles already give every SM one (PlanShape::split_cost; at 16
  /// sequences and up to ~1,000 positions it keeps tiles whole). 0: splits cost nothing extra.
  std::int32_t attention_split_cost = 768;
  /// Pipelined attention: in passes whose tiles x KV heads number 3/4 to all of the SMs (about
  /// 13-16 sequences), the same kernel with three pages in flight per warp and one block per SM
  /// (AttentionKernel::kTensorCoresDeep; the same bits for the same plan, planned for one block
  /// per SM). false: the pipelined kernel everywhere. Off by itself on a device whose blocks
  /// cannot opt in to the deep kernel's ~213 KB of shared memory.
  bool attention_deep_pipeline = true;
  /// Honour ForwardRequest::masked_rows_only (the block decoder asks for it): the final norm,
  /// lm_head and vocabulary pass run over the block rows that hold the mask token only (at 128
  /// sequences in the static schedule 62.5% of them; +1.7% tokens/s for SDAR-4B and +3.8% for
  /// SDAR-1.7B at 128 x 1,024 on an H100, bench/results/2026-11-24-overlap-masked-h100).
  /// false: every block row gets logits.
  bool masked_rows_only = true;
  /// RMSNorm and q/k-norm kernels with fp32 sums for bf16 and warp-per-row layouts (false: one
  /// block per row with double sums). fp32 backends keep double sums either way.
  bool fast_norms = true;
  /// bf16: time the cuBLASLt heuristic's candidates (up to 16) for each GEMM shape of a pass of
  /// at most graph_max_rows rows, on its first pass, and keep the fastest of those whose output
  /// is bit for bit the heuristic's first choice's (results stay reproducible run to run); at
  /// most about 2 s in all per backend (shapes met later keep the heuristic's choice). fp32
  /// (exactness tests) never tunes.
  bool gemm_autotune = true;
  /// bf16 GEMMs of at most this many rows (padded rows of the pass; 0 turns it off, at most 64)
  /// run the skinny tensor-core kernel (skinny_gemm.h) instead of cuBLASLt when the shape fits
  /// (in a multiple of 32, out of 8): cuBLASLt streams the weights at about 64% of the copy
  /// bandwidth at 8 rows (bench/results/2026-11-23-engine-profile-h100). Deterministic; its
  /// results differ from cuBLASLt's by fp32 rounding only. fp32 backends always use cuBLASLt.
  std::int64_t skinny_gemm_rows = 16;
  /// The RMSNorms before the qkv and gate_up GEMMs fused into the skinny kernel where it runs
  /// them in one wave (bf16 with fast_norms, at most 16 rows; SkinnyNorm in skinny_gemm.h): its
  /// blocks normalise the rows themselves, with the norm kernel's arithmetic (the same bits),
  /// and the norm launch goes. Off by default: measured 3-4% slower at 1 sequence, the
  /// per-block prologue costing more than the launch it saves
  /// (bench/results/2026-11-23-engine-skinny-split-h100). false: the norm kernel, then the GEMM.
  bool fused_norm_gemm = false;
  /// SwiGLU in the gate/up GEMM's epilogue (issue 6): where the skinny kernel runs the gate/up
  /// projection (skinny_gemm_rows), its blocks write silu(gate) * up in bf16 for the down
  /// projection and the SwiGLU launch goes (the same bits: the projection's weight rows are
  /// interleaved gate/up so that one block owns both halves of an output pair). false: the
  /// GEMM into fp32, then the SwiGLU kernel.
  bool fused_swiglu = true;
  /// Where cuBLASLt runs the gate/up projection (more rows than skinny_gemm_rows, bf16), its
  /// output is bf16 (rounded once from the fp32 sums in cuBLASLt's epilogue) and the SwiGLU
  /// kernel reads that: half the bytes written and read between the two (the fp32 output is
  /// 51 MB per layer for SDAR-4B at 640 rows). false: an fp32 output.
  bool bf16_gate_up = true;
  /// Programmatic dependent launch (PDL; issue 6): every dice kernel of the forward (not
  /// cuBLASLt's) is launched with cudaLaunchAttributeProgrammaticStreamSerialization, so the GPU
  /// schedules it while the previous kernel's last blocks drain; each kernel waits for its
  /// predecessor (griddepcontrol.wait) before anything else, so results are the same bits with
  /// and without. Eager launches and captured graphs alike (CUDA 12.3+). In every pass: measured
  /// -3% to +1% tok/s (bench/results/2026-11-23-engine-pdl-h100), so off by default.
  bool programmatic_launch = false;
  /// PDL in the passes of at most skinny_gemm_rows padded rows only (when programmatic_launch is
  /// off): there a bf16 model's layer GEMMs run the skinny kernel (where skinny_gemm_fits), so
  /// every kernel of a layer is dice's and each can be scheduled early. Measured +1.6% (SDAR-4B)
  /// and +2.0% (SDAR-1.7B) tok/s at 1 sequence (bench/results/2026-11-23-engine-swiglu-h100);
  /// with early start (pdl_early_reads) +5.6% and +8.7% (-early-start-h100). Same bits either
  /// way.
  bool programmatic_launch_few_rows = true;
  /// In PDL passes (above): each skinny GEMM block loads its first weights, and the pipelined
  /// attention reads its work item's metadata, before waiting for the kernel before it. The
  /// norm kernels, the pipelined attention and the SwiGLU gate/up GEMM let the next kernel start
  /// once all their blocks run (griddepcontrol.launch_dependents, regardless of this flag), so
  /// the GEMM after them has its first weights in flight, and the attention its page ids in
  /// hand, while they run (launch.cuh, "Early start"). Measured +3.8% (SDAR-1.7B) and +2.6%
  /// (SDAR-4B) tok/s at 1 sequence against the same reads after the wait
  /// (bench/results/2026-11-23-engine-early-start-h100). Same bits either way.
  bool pdl_early_reads = true;
};

/// The cuBLASLt algorithm a GEMM shape (y[rows, out] = x[rows, in] w^T, + y with accumulate)
/// runs after the autotune (CudaBackendOptions::gemm_autotune), for benchmark records.
struct CudaGemmChoice {
  std::int64_t rows = 0, in = 0, out = 0;
  bool accumulate = false;
  bool bf16_out = false;     ///< y in bf16 (Gemm::run_bf16_out), not fp32
  int candidates = 0;        ///< algorithms the heuristic offered (each timed)
  int same_bits = 0;         ///< of them, those whose output equals the first's bit for bit
  int chosen = 0;            ///< index of the one kept (0: the heuristic's first choice)
  int algo_id = 0;           ///< CUBLASLT_ALGO_CONFIG_ID
  int tile_id = 0;           ///< CUBLASLT_ALGO_CONFIG_TILE_ID
  int splitk = 1;            ///< CUBLASLT_ALGO_CONFIG_SPLITK_NUM
  int stages_id = 0;         ///< CUBLASLT_ALGO_CONFIG_STAGES_ID
  int cluster_shape_id = 0;  ///< CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID (cublasLtClusterShape_t)
  double heuristic_us = 0;   ///< mean time of the heuristic's first choice
  double chosen_us = 0;      ///< mean time of the one kept
  double fastest_us = 0;     ///< the fastest of all (other bits allowed): what exactness costs
  /// The skinny kernel runs this shape instead of cuBLASLt (CudaBackendOptions::skinny_gemm_rows);
  /// then the candidates are its n8 tiles per block (all give the same bits), algo_id, tile_id
  /// stages_id and cluster_shape_id are -1 and splitk is its warps per block (split-K inside the
  /// block).
  bool skinny = false;
  int skinny_n_tiles = 0;  ///< n8 tiles per block kept
};

/// Where the device memory went (bytes), and the KV cache's size.
struct CudaMemoryReport {
  std::string device_name;
  std::int64_t device_total = 0;     ///< the card's memory
  std::int64_t free_at_start = 0;    ///< free when the backend was made
  std::int64_t budget = 0;           ///< what the backend allowed itself
  std::int64_t weights = 0;          ///< weights on the GPU
  std::int64_t workspace = 0;        ///< activations, logits, metadata, cuBLASLt workspace, RoPE
  std::int64_t kv_cache = 0;         ///< the paged KV cache
  std::int64_t page_tokens = 0;      ///< tokens per KV page
  std::int64_t pages = 0;            ///< KV pages for sequences (one more is scratch)
  std::int64_t bytes_per_token = 0;  ///< KV bytes of one cached token (all layers, K and V)
};

/// Work counters since construction or reset_stats(), for benchmarks and floors.
struct CudaForwardStats {
  std::int64_t forwards = 0;
  std::int64_t passes = 0;
  std::int64_t graph_replays = 0;   ///< passes run as a CUDA graph replay
  std::int64_t graph_captures = 0;  ///< graphs captured (one per batch-shape bucket)
  std::int64_t rows = 0;            ///< token rows through the layers (commit + block)
  std::int64_t padded_rows = 0;     ///< rows including the bucket padding of graph passes
  std::int64_t block_rows = 0;      ///< rows through lm_head and the vocabulary pass
  /// GEMM launches enqueued (eagerly or into a captured graph, not per replay) with the RMSNorm
  /// fused in (CudaBackendOptions::fused_norm_gemm).
  std::int64_t fused_norm_gemms = 0;
  /// GEMM launches enqueued with the SwiGLU epilogue (CudaBackendOptions::fused_swiglu).
  std::int64_t fused_swiglu_gemms = 0;
  /// Passes enqueued (eagerly or into a captured graph) with programmatic dependent launch
  /// (CudaBackendOptions::programmatic_launch, programmatic_launch_few_rows).
  std::int64_t programmatic_passes = 0;
  /// Passes run (graph replays included) whose attention ran the deep kernel
  /// (CudaBackendOptions::attention_deep_pipeline).
  std::int64_t deep_attention_passes = 0;
  /// Passes run (graph replays included) whose attention ran the paired kernel: plans with paired
  /// tiles (CudaBackendOptions::attention_paired_tiles).
  std::int64_t paired_attention_passes = 0;
  /// Cache positions attended, summed over sequences and passes (each sequence's KV counted once
  /// per pass, as a kernel that reads it once would): the KV bytes read are this times
  /// kv_bytes_per_position.
  std::int64_t kv_positions_read = 0;
  /// Score entries of attention (query rows x visible positions, summed): attention FLOPs are this
  /// times 4 x heads x head_dim x layers.
  std::int64_t attention_scores = 0;
  /// The floor of the work (issue 6), per pass, summed: bytes that must move (every weight matrix
  /// read once, lm_head only when the pass has block rows, the embedding rows, the KV cache read
  /// once per sequence) and FLOPs (2 x rows x layer parameters, 2 x block rows x vocab x hidden,
  /// attention); floor = max(bytes / copy bandwidth, FLOPs / GEMM rate) with the ceilings given
  /// to set_ceilings() (0 until then).
  double bytes = 0;
  double flops = 0;
  double floor_seconds = 0;
  /// GPU time of the passes (CUDA events around each pass on the stream: the metadata upload,
  /// the kernels and the proposals' download), seconds. A forward's wall time minus this is
  /// the time the GPU waited for the host (decoding logic, planning, launch).
  double device_seconds = 0;
};

/// The CUDA backend. One GPU, one stream; not thread-safe (Backend's contract).
///
/// Forward pass per layer (rows of every item in one batch): RMSNorm -> fused q/k/v GEMM ->
/// per-head q/k RMSNorm, NeoX RoPE and the K/V write into the paged cache -> attention over the
/// paged cache (block-causal: commit rows see the cache up to the end of their own block, block
/// rows the whole cache, the commit and the block) -> o_proj GEMM adding into the fp32 residual
/// -> RMSNorm -> fused gate/up GEMM -> SwiGLU -> down GEMM adding into the residual. Then the
/// final RMSNorm and lm_head over the block rows only, and one fused pass over the vocabulary per
/// block row (softmax, confidence, entropy, top-k/top-p sampling; sampling.h's procedure).
///
/// KV cache: pages of `page_tokens` positions drawn from one pool sized from the memory budget;
/// a sequence holds a list of pages (its block table). forward() takes any page its rows still
/// miss and throws dice::Error naming the sequence when the pool is empty; generate() keeps that
/// from happening, by growing caches page by page and preempting sequences
/// (free_cache_pages / cache_pages_to_hold) or by reserve() of a sequence's whole need up front
/// (CacheAdmission in block_decoder.h).
class CudaBackend final : public Backend {
 public:
  /// Uploads `checkpoint`'s tensors (converted to options.dtype). Throws dice::Error when no
  /// CUDA device is usable, when the model's shapes are unsupported (head_dim not a multiple of
  /// 16 or above 256, heads per KV head not dividing 16) and when the weights and work buffers
  /// leave no room for a KV cache within the memory budget (the message gives the numbers).
  CudaBackend(const model::Checkpoint& checkpoint, CudaBackendOptions options = {});
  /// The same from fp32 host weights (tests: the very weights a CpuBackend holds).
  CudaBackend(const CpuWeights& weights, CudaBackendOptions options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const model::ModelConfig& config() const;
  const CudaBackendOptions& options() const;
  CudaMemoryReport memory() const;
  const CudaForwardStats& stats() const;
  void reset_stats();
  /// Bytes of weights one pass reads (every matrix, lm_head included; the embedding rows are not
  /// counted) and KV bytes per cached position and layer group (K and V of every layer).
  std::int64_t weight_bytes_per_pass() const;
  std::int64_t kv_bytes_per_position() const;
  /// The ceilings the floor in stats() is computed with: device-to-device copy bandwidth (bytes
  /// read plus written per second) and bf16 GEMM rate (FLOP/s), as measure_* return them.
  void set_ceilings(double copy_bytes_per_second, double gemm_flops_per_second);
  /// The GEMM shapes the autotune has timed so far and what it chose; and the seconds it took.
  std::vector<CudaGemmChoice> gemm_choices() const;
  double gemm_tune_seconds() const;

  std::int64_t vocab_rows() const override;
  void open(SequenceId sequence, std::int32_t block_length) override;
  void close(SequenceId sequence) override;
  std::int64_t cached_tokens(SequenceId sequence) const override;
  void forward(std::span<const ForwardItem> items, const ForwardRequest& request,
               ForwardOutput& out) override;
  bool can_reserve(std::int64_t tokens) const override;
  std::optional<std::int64_t> cache_limit_tokens() const override;
  void reserve(SequenceId sequence, std::int64_t tokens) override;
  std::optional<std::int64_t> free_cache_pages() const override;
  std::int64_t cache_pages_to_hold(SequenceId sequence, std::int64_t tokens) const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Number of usable CUDA devices (0 when there is no device or driver). Never throws.
int cuda_device_count();

/// "NVIDIA H100 80GB HBM3, 132 SMs, 79.1 GiB" for device `device`. Throws dice::Error on failure.
std::string cuda_device_description(int device = 0);

/// Ceilings measured on this device (METHOD.md): device-to-device copy bandwidth, counting bytes
/// read plus bytes written, in bytes/s (median of `repeats` copies of `bytes` each), and the bf16
/// GEMM rate through cuBLASLt (fp32 accumulation, random inputs, m x n x k) in FLOP/s (median).
/// Throws dice::Error on a CUDA failure.
double measure_copy_bandwidth(int device, std::int64_t bytes, int repeats);
double measure_gemm_rate(int device, std::int64_t m, std::int64_t n, std::int64_t k, int repeats);

}  // namespace dice::engine
