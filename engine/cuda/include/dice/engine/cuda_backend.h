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
#include "dice/engine/cuda_options.h"
#include "dice/model/config.h"

namespace dice::model {
class Checkpoint;
}

namespace dice::engine {

struct CpuWeights;

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

/// One pass's work split by what bounds it, for the floors of issue 6's benchmark.
struct PassWork {
  /// Bytes the GEMM side must move: every layer's weight matrices once, lm_head when the pass has
  /// block rows, the embedding rows.
  double gemm_bytes = 0;
  /// FLOPs of the GEMMs: 2 x rows x layer parameters x layers + 2 x block rows x vocab x hidden.
  double gemm_flops = 0;
  /// Bytes of KV cache the attention must read (each sequence's cached positions once per layer).
  double kv_bytes = 0;
  /// FLOPs of the attention: 4 x score entries x heads x head_dim x layers (Q K^T and P V).
  double attention_flops = 0;
};

/// What one pass of `config`'s model must do (the counts of a PassPlan): `rows` token rows through
/// the layers (commit and block rows), `block_rows` of them through the final norm, lm_head and the
/// vocabulary pass, `kv_positions_read` cached positions read (each sequence's once per layer),
/// `attention_scores` score entries (query rows x visible positions); weights and KV cache hold
/// `elem_bytes` per value (2: bf16, 4: fp32). lm_head's bytes count only when block_rows > 0.
/// Throws dice::Error when a count is negative or elem_bytes is not 2 or 4.
PassWork pass_work(const model::ModelConfig& config, std::int64_t elem_bytes, std::int64_t rows,
                   std::int64_t block_rows, std::int64_t kv_positions_read,
                   std::int64_t attention_scores);

/// The two lower bounds of a pass's time, seconds, from ceilings measured on the device.
struct PassFloors {
  /// Issue 6's floor: max(all bytes / copy bandwidth, all FLOPs / GEMM rate). Reaching it needs
  /// the memory-bound attention and the compute-bound GEMMs to overlap perfectly.
  double floor = 0;
  /// The serial bound: max(GEMM bytes / copy, GEMM FLOPs / rate) + max(KV bytes / copy,
  /// attention FLOPs / rate), the time of a pass whose GEMMs and attention run one after the
  /// other, each at its ceiling (everything else free). floor <= serial <= 2 x floor.
  double serial = 0;
};

/// The floors of `work` with `copy_bytes_per_second` (> 0, bytes read plus written, as
/// measure_copy_bandwidth returns it) and `gemm_flops_per_second` (> 0). Throws dice::Error when
/// a ceiling is not positive or a part of `work` is negative or not finite.
PassFloors pass_floors(const PassWork& work, double copy_bytes_per_second,
                       double gemm_flops_per_second);

/// Where the device memory went (bytes), and the KV cache's size.
struct CudaMemoryReport {
  std::string device_name;
  std::int64_t device_total = 0;   ///< the card's memory
  std::int64_t free_at_start = 0;  ///< free when the backend was made
  std::int64_t budget = 0;         ///< what the backend allowed itself
  std::int64_t weights = 0;        ///< weights on the GPU
  /// activations, logits, metadata, cuBLASLt workspace, the GEMM autotune's L2 flush target
  /// (CudaBackendOptions::gemm_tune_cold), RoPE
  std::int64_t workspace = 0;
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
  /// RMSNorms enqueued folded into a wgmma GEMM's output (CudaBackendOptions::fold_qkv_norm,
  /// fold_mlp_norm).
  std::int64_t folded_norms = 0;
  /// qkv GEMM launches enqueued with the q/k norm + RoPE epilogue
  /// (CudaBackendOptions::fused_qk_norm_rope).
  std::int64_t fused_qk_norm_rope_gemms = 0;
  /// GEMM launches enqueued with the SwiGLU epilogue (CudaBackendOptions::fused_swiglu).
  std::int64_t fused_swiglu_gemms = 0;
  /// GEMM launches enqueued on the wgmma kernel (CudaBackendOptions::wgmma_gemm).
  std::int64_t wgmma_gemms = 0;
  /// GEMM launches enqueued on the streaming skinny kernel
  /// (CudaBackendOptions::stream_gemm).
  std::int64_t stream_gemms = 0;
  /// Few-row GEMM launches enqueued that read the residual before their programmatic wait
  /// (CudaBackendOptions::early_residual_reads).
  std::int64_t early_residual_gemms = 0;
  /// o projection launches enqueued whose skinny kernel staged its weight share in shared memory
  /// before its programmatic wait (CudaBackendOptions::stage_o_weights; none where o runs on
  /// another kernel or the share fits the registers).
  std::int64_t staged_o_gemms = 0;
  /// Streaming GEMM launches enqueued with the dynamic tail
  /// (CudaBackendOptions::stream_dynamic_share).
  std::int64_t dynamic_tail_gemms = 0;
  /// Passes enqueued (eagerly or into a captured graph) with programmatic dependent launch
  /// (CudaBackendOptions::programmatic_launch, programmatic_launch_few_rows).
  std::int64_t programmatic_passes = 0;
  /// Passes run (graph replays included) whose attention ran the deep kernel
  /// (CudaBackendOptions::attention_deep_pipeline).
  std::int64_t deep_attention_passes = 0;
  /// Passes run (graph replays included) whose attention ran the paired kernel: plans with paired
  /// tiles (CudaBackendOptions::attention_paired_tiles).
  std::int64_t paired_attention_passes = 0;
  /// Passes run (graph replays included) whose attention ran the deep paired kernel
  /// (CudaBackendOptions::attention_deep_pairs).
  std::int64_t deep_paired_attention_passes = 0;
  /// Graph edges from a cuBLASLt kernel to one of dice's made early-start edges at capture
  /// (CudaBackendOptions::early_start_after_cublas).
  std::int64_t early_start_edges = 0;
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
  /// The serial bound of the same work, per pass, summed (PassFloors::serial): its GEMMs and its
  /// attention one after the other, each at its own ceiling. Never below floor_seconds; where it
  /// is above 1.5 x floor_seconds, no forward that runs the two in turn meets issue 6's target.
  double serial_bound_seconds = 0;
  /// floor_seconds with the sustained GEMM rate of set_ceilings() (0 when none was given): the
  /// floor of a card held below its boost clock by its power limit, as long compute-bound runs
  /// are. Not a strict lower bound: a forward whose memory-bound phases leave the power budget
  /// room runs its GEMMs above the sustained rate; the true floor lies between the two.
  double sustained_floor_seconds = 0;
  /// GPU time of the passes (CUDA events around each pass on the stream: the metadata upload,
  /// the kernels and the proposals' download), seconds. A forward's wall time minus this is
  /// the time the GPU waited for the host (decoding logic, planning, launch).
  double device_seconds = 0;
  /// Host wall time (steady clock, seconds) of the backend's side of the forwards, in four
  /// parts: preparing the passes (forward()'s checks, cache pages and the pass planner, up to
  /// each pass's first CUDA call), enqueueing them (the metadata upload, the graph launch or the
  /// eager launches, the downloads), waiting for them (cudaStreamSynchronize), and reading their
  /// proposals back. A run's wall time less their sum is the caller's (decoding logic,
  /// scheduling); its wall time less device_seconds is the GPU's idle time between passes.
  double host_prepare_seconds = 0;
  double host_enqueue_seconds = 0;
  double host_wait_seconds = 0;
  double host_finish_seconds = 0;
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
  /// read plus written per second) and bf16 GEMM rate (FLOP/s), as measure_* return them; and
  /// optionally the sustained GEMM rate (measure_sustained_gemm_rate; 0: none) for
  /// sustained_floor_seconds.
  void set_ceilings(double copy_bytes_per_second, double gemm_flops_per_second,
                    double sustained_gemm_flops_per_second = 0);
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
/// The bf16 GEMM rate (FLOP/s) the device sustains: the same GEMM back to back for `seconds`
/// (wall clock), in batches of 8 timed with events, the GPU never idle; the median rate of the
/// batches in the second half. measure_gemm_rate's 20 launches (~30 ms at 8,192^3) end before the
/// card's power limit acts; under it the SM clock drops (an H200 at its 700 W limit: from 1,980
/// MHz to ~1,500 under this GEMM and a median of 1,575-1,755 while decoding 128 sequences; 4 s
/// gave 0.84x the burst rate, within 0.6% of 12 s: bench/results/2026-11-29-power-cap-h200).
/// Throws dice::Error when seconds is not positive and finite, or on a CUDA failure.
double measure_sustained_gemm_rate(int device, std::int64_t m, std::int64_t n, std::int64_t k,
                                   double seconds);

}  // namespace dice::engine
