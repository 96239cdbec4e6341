#pragma once
// The CUDA backend's options (cuda_backend.h; issue 6), in a header without CUDA so that the CLI
// can hold and parse them in every build, with or without nvcc.

#include <array>
#include <cstdint>
#include <optional>

namespace dice::engine {

/// The least stream_split_saving_k (engine/cuda/src/stream_gemm.h) for which the CUDA backend's
/// Gemm takes the split walk (CudaBackendOptions::stream_gemm_split), set between the two shapes
/// measured (per launch at 4 rows, chained under PDL, on an H200,
/// bench/results/2026-11-30-stream-split-h200): SDAR-4B's down projection saves 7,424 and splits
/// (16.0 us against 17.9 on whole tiles, 16.9 on the skinny kernel); its o projection saves 3,072
/// and does not (10.4-11.4 against 8.2 and 8.6). The hand-over costs about a microsecond a launch
/// (call 2: 1.1-1.5 us in its first form), i.e. two 2,048-k stages of a block at its share of
/// the bandwidth; the exact crossing between 3,072 and 7,424 was not measured.
inline constexpr std::int64_t kStreamSplitMinSavingK = 4096;

/// Most rounds of CudaBackendOptions::stage_o_batch_rounds (and of the skinny launcher's
/// SkinnyStaging::batch_rounds): the CLI's range, the backend's and the launcher's checks. A share
/// stages at most 24 rounds a warp (kSkinnyStageLimit at one n8 tile), so any batch from there on
/// is one batch: all at once.
inline constexpr std::int32_t kStageBatchRoundsLimit = 64;

/// The values CudaBackendOptions::wgmma_stage_k takes (the CLI's choices; the GEMM's check).
inline constexpr std::array<int, 2> kWgmmaStageKChoices{64, 128};
/// The values CudaBackendOptions::fused_qk_norm_rope_tile_n takes (the CLI's choices; the GEMM
/// checks them against the q/k epilogue's own rule, wgmma_qk_tiles).
inline constexpr std::array<int, 2> kQkRopeTileChoices{64, 128};

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

/// Where an RMSNorm kernel lets the kernel after it start under programmatic dependent launch.
/// That kernel is a GEMM whose blocks load their weights before their own wait, so the earlier
/// the trigger, the more of its weights are in flight when the norm's output is ready, and the
/// more they compete with the norm's own row read. The same bits in every position.
enum class NormTrigger {
  kAfterRead,   ///< once the norm has read its row (the first position; the baseline kernels')
  kAfterWait,   ///< right after the norm's programmatic wait, before its row read
  kBeforeWait,  ///< before that wait: the GEMM's blocks take their SMs as the kernel before the
                ///< norm leaves them
};

/// Every trigger position, in NormTrigger's order (the CLI's choices, the tests' loops).
inline constexpr std::array<NormTrigger, 3> kNormTriggers{
    NormTrigger::kAfterRead, NormTrigger::kAfterWait, NormTrigger::kBeforeWait};

/// The CLI's name of a trigger position: after-read, after-wait or before-wait.
constexpr const char* norm_trigger_name(NormTrigger trigger) {
  switch (trigger) {
    case NormTrigger::kAfterRead:
      return "after-read";
    case NormTrigger::kAfterWait:
      return "after-wait";
    case NormTrigger::kBeforeWait:
      return "before-wait";
  }
  return "?";
}

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
  /// per work item, on every kernel (no deep pairs either: attention_deep_pairs needs it).
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
  /// With attention_deep_pipeline and attention_paired_tiles: in passes whose tiles outnumber the
  /// SMs but whose paired tiles (two of one pass item, PlanShape::pair_tiles) number 3/4 to all
  /// of them, those pairs on a deep kernel that also takes pairs (kTensorCoresDeepPaired8 or
  /// kTensorCoresDeepPaired, attention_deep_pairs_warps: each page read once for 32 query
  /// vectors by a warp pair): SDAR-4B's fused store passes at 13-16 sequences, which otherwise
  /// run the pipelined kernel with every page read by two tiles. With 4 warps the same bits as
  /// the paired kernel on the same plan. false: those passes on the pipelined kernel.
  bool attention_deep_pairs = true;
  /// attention_deep_pairs only in passes whose longest sequence holds at least this many
  /// positions (the item's end: start + its rows). 0: every such pass. With 4 warps a block the
  /// deep paired kernel lost in SDAR-4B's 16-sequence decoding at ~1,000 positions (41.8 against
  /// 35.8 us a launch under Nsight Compute; 0.971 tok/s at 16 x 1,024 from 0 positions), so it
  /// needed 1,536; with 8 it did not (1.000-1.004 at 16 x 1,024 in three runs, 1.002 at 16 x
  /// 4,096 against 1,536; bench/results/2026-11-29-deep-pairs-h200, 2026-11-29-deep-pairs8-h200).
  std::int32_t attention_deep_pairs_min_keys = 0;
  /// Warps a block of the deep paired kernel: 8 (kTensorCoresDeepPaired8: a warp takes 1/4 of
  /// an item's pages) or 4 (kTensorCoresDeepPaired: 1/2, the paired kernel's bits). 8 measured
  /// +0.8-1.6% tok/s over 4 at SDAR-4B 16 x 4,096 in four runs and kept 16 x 1,024 even from 0
  /// positions (bench/results/2026-11-29-deep-pairs-h200, 2026-11-29-deep-pairs8-h200). At
  /// head_dim 64 the 8-warp kernel has half the deep kernel's blocks, so no pass takes it there.
  /// Other values throw dice::Error at construction.
  std::int32_t attention_deep_pairs_warps = 8;
  /// Honour ForwardRequest::masked_rows_only (the block decoder asks for it): the final norm,
  /// lm_head and vocabulary pass run over the block rows that hold the mask token only (at 128
  /// sequences in the static schedule 62.5% of them; +1.7% tokens/s for SDAR-4B and +3.8% for
  /// SDAR-1.7B at 128 x 1,024 on an H100, bench/results/2026-11-24-overlap-masked-h100).
  /// false: every block row gets logits.
  bool masked_rows_only = true;
  /// Our kernels are PDL launches in every pass (as with programmatic_launch), and in captured
  /// passes each of them that follows a cuBLASLt kernel starts early too: its graph edge becomes
  /// a programmatic dependency from the cuBLASLt kernel's launch completion (all its blocks
  /// begun; our kernel still waits for its results by griddepcontrol.wait), so its blocks are
  /// scheduled while the GEMM runs its last blocks (device_memory.h,
  /// start_early_after_foreign_kernels). cuBLASLt's own kernels stay plain launches. The same
  /// bits. Measured on an H100 (bench/results/2026-11-24-early-start-after-cublas-h100): +3.8%
  /// (SDAR-1.7B) and +3.0% (SDAR-4B) tok/s at 16 sequences, 0.999-1.007 at 128, where PDL in
  /// every pass alone gave +0.3-0.5%. false: PDL as programmatic_launch(_few_rows) say, and
  /// full dependencies after cuBLASLt.
  bool early_start_after_cublas = true;
  /// The GEMM autotune times cuBLASLt's candidates with the L2 cache flushed before each launch
  /// (as in the forward, where the layers before stream other weights through it) instead of
  /// replaying each on warm weights, which favoured algorithms that are slower from HBM. The same
  /// candidates, so the same bits. Measured on an H100 (bench/results/2026-11-27-gemm-tune-cold-
  /// h100): +1.4% tok/s for SDAR-1.7B and +0.3% for SDAR-4B at 16 x 1,024 (every round), within
  /// the noise at 128 x 1,024; the autotune takes 0.1-0.4 s longer. false: warm replays.
  bool gemm_tune_cold = true;
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
  /// The RMSNorms before the qkv and gate_up GEMMs fused into the GEMM (bf16 with fast_norms, at
  /// most 16 rows): where the streaming kernel runs it (stream_gemm) and its shared memory holds
  /// the rows, its blocks normalise them after their wait while the weight ring fills
  /// (stream_norm_fits); else where the skinny kernel runs it in one wave (GemmNorm in
  /// skinny_gemm.h). Both with the norm kernel's arithmetic (the same bits), and the norm launch
  /// goes. Off by default: slower at 1 sequence. Skinny: 3-4% slower, the per-block prologue
  /// costing more than the launch it saves (bench/results/2026-11-23-engine-skinny-split-h100),
  /// with early start 6.2% (SDAR-1.7B) and 2.2% (SDAR-4B) slower (-2026-11-25-boundary-probe-h100).
  /// Streaming: 0.93x (SDAR-1.7B) and 0.90-0.92x (SDAR-4B) tok/s on an H200; every block reads
  /// the just-written rows itself with its ring fill in flight, and issuing the fill after those
  /// reads recovered only part of it (bench/results/2026-11-28-stream-norm-h200). false: the norm
  /// kernel, then the GEMM.
  bool fused_norm_gemm = false;
  /// The RMSNorm before qkv folded into the wgmma GEMMs (engine/cuda/src/norm_fold.h): in passes
  /// whose down projection the wgmma kernel takes (17-64 rows with wgmma_gemm, bf16 with
  /// fast_norms, head_dim 128), the down projection also writes bf16(w * x) for the next layer's
  /// input norm weight w and x's sums of squares, qkv projects that, and the q/k norm kernel
  /// applies the 1 / rms: no norm kernel before qkv but layer 0's, and the down projection runs on
  /// the wgmma kernel whatever wgmma_min_block_k says. Other rounding than the norm kernel's
  /// (bf16(w x) before the projection, not bf16(w x / r)); the same bits run to run. On an H200
  /// at 16 x 1,024 with fold_mlp_norm: +1% SDAR-1.7B, even to -0.5% SDAR-4B against that fold
  /// alone (bench/results/2026-11-28-norm-fold-h200). false: the norm kernel before qkv.
  bool fold_qkv_norm = true;
  /// The RMSNorm before gate/up folded likewise (hidden size at most 4,096): in passes whose o and
  /// gate/up projections the wgmma kernel takes (with fused_swiglu; whatever wgmma_min_block_k
  /// says), the o projection writes bf16(w * x) and the sums of squares, and the gate/up SwiGLU
  /// epilogue applies the 1 / rms. Both folds against none on an H200: +1.0-1.8% SDAR-4B,
  /// +1.8-2.7% SDAR-1.7B tok/s at 16 x 1,024 and 16 x 4,096
  /// (bench/results/2026-11-28-norm-fold-h200). false: the norm kernel before gate/up.
  bool fold_mlp_norm = true;
  /// The q/k RMSNorm, RoPE and K/V cache write in the qkv projection's epilogue (issue 6): in bf16
  /// passes with fast_norms whose qkv projection the wgmma kernel can take
  /// (fused_qk_norm_rope_tile_n; 17-64 rows with wgmma_gemm, head_dim 128, wgmma_stage_k 128;
  /// whatever wgmma_min_block_k says), the block that sums a row's head vector writes the
  /// normalised, rotated q or cached k / v itself (WgmmaQkRope, wgmma_gemm.h): no fp32 qkv and
  /// no q/k norm + RoPE launch a layer. The same arithmetic as that kernel's (the same bits after
  /// the same GEMM); other GEMM bits than cuBLASLt's qkv, the same run to run. Off by default: even
  /// on an H200 at 16 x 1,024 (0.997 SDAR-1.7B, 1.006 SDAR-4B), since the 128-column wgmma qkv
  /// costs 1.9 us (SDAR-1.7B) more than cuBLASLt's per launch and, by our reading (not measured),
  /// the attention after it cannot start early beside its blocks
  /// (bench/results/2026-11-30-qkv-wgmma-h200); at 64-column tiles too (0.992 / 1.006,
  /// bench/results/2026-11-30-qk-pair-h200). false: the qkv GEMM, then the q/k norm + RoPE
  /// kernel.
  bool fused_qk_norm_rope = false;
  /// With fused_qk_norm_rope: the qkv projection's column tile, 64 (a head vector is two tiles,
  /// one cluster with their splits, which share the rows) or 128 (one tile a head vector). Other
  /// bits than each other (other GEMM tiles and split counts), the same run to run. Even with
  /// each other on an H200 (bench/results/2026-11-30-qk-pair-h200).
  int fused_qk_norm_rope_tile_n = 64;
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
  /// In PDL passes (above): each skinny GEMM block loads its first weights, the pipelined
  /// attention reads its work item's metadata, and the q/k norm + RoPE its row's metadata, RoPE
  /// pairs and norm weight (+2.3% tok/s at SDAR-1.7B 16 x 1,024 on an H200,
  /// bench/results/2026-11-29-qk-early-reads-h200), before waiting for the kernel before it. The
  /// norm kernels, the pipelined attention and the SwiGLU gate/up GEMM let the next kernel start
  /// once all their blocks run (griddepcontrol.launch_dependents, regardless of this flag), so
  /// the GEMM after them has its first weights in flight, and the attention its page ids in
  /// hand, while they run (launch.cuh, "Early start"). Measured +3.8% (SDAR-1.7B) and +2.6%
  /// (SDAR-4B) tok/s at 1 sequence against the same reads after the wait
  /// (bench/results/2026-11-23-engine-early-start-h100). The vectorised RMSNorm reads its weight
  /// before its wait too, so that the read does not queue behind the next GEMM's early weights
  /// (+0.7% on SDAR-1.7B at 1 sequence, H200: bench/results/2026-11-28-stream-norm-h200). Same
  /// bits either way.
  bool pdl_early_reads = true;
  /// With pdl_early_reads: the o projection's skinny blocks, which start while the attention
  /// runs, copy the rest of their weight share into shared memory (when it fits in 96 KiB a
  /// block; skinny_staged_chunks) before they wait for it, so that no weight load is left after
  /// the attention (launch_skinny_gemm's stage_share). Measured +1.3-1.4% tok/s on SDAR-4B at 1
  /// sequence and within the spread on SDAR-1.7B, whose o share mostly fits in the registers' early
  /// loads already (bench/results/2026-11-25-kernel-trace-h100). Same bits either way.
  bool stage_o_weights = true;
  /// With stage_o_weights: each warp of the o projection issues its staged copies this many
  /// rounds at a time (a round: one 32-k chunk per n8 tile, 512 bytes each), every batch landed
  /// before the next is issued (launch_skinny_gemm's SkinnyStaging::batch_rounds; 0: all at
  /// once). At once, SDAR-4B's 160 o blocks put ~15 MB of requests in flight while the
  /// latency-bound attention reads its pages behind them; in batches of 2 the staging still ends
  /// within the attention: +2.1-2.3% tok/s on SDAR-4B at 1 x 1,024, within the spread on
  /// SDAR-1.7B (H200, bench/results/2026-12-01-attention-o-overlap-h200). Same bits. 0 to
  /// kStageBatchRoundsLimit; the backend throws dice::Error outside that.
  std::int32_t stage_o_batch_rounds = 2;
  /// With pdl_early_reads: the few-row o and down projections (skinny and streaming kernels,
  /// whole tiles) read the old residual values they add to before their programmatic wait, not
  /// after it (the skinny kernel) or after the k loop (the streaming kernel's first tile): the
  /// residual is final by the time their blocks start (Gemm::run's y_ready; down only where
  /// post_norm_trigger is not before-wait and fused_norm_gemm is off). On an H200: +1.4% and
  /// +0.9% tok/s on SDAR-1.7B at 1 x 1,024 and 1 x 4,096 against the option off (+0.7-1.1% for
  /// the experiment's two forms at 1 x 1,024); SDAR-4B 0.998-1.001, whose o already read right
  /// after its wait (bench/results/2026-12-01-early-y-h200). Same bits.
  bool early_residual_reads = true;
  /// With PDL, where the RMSNorm before the qkv projection lets the qkv GEMM start (issue 6):
  /// before the norm's own programmatic wait. The GEMM's blocks then take their SMs as the down
  /// projection's leave and fill their weight rings while the norm waits and runs (a kernel
  /// timeline showed them starting 0.15 us before the norm's end with kAfterRead). On an H200 at
  /// 1 x 1,024 against kAfterRead: +2.9% SDAR-1.7B, +2.3% SDAR-4B (two rounds), +4.0% / +2.7% in a
  /// last round (bench/results/2026-11-30-kernel-timeline-h200, calls 3-5); kAfterWait instead is
  /// ~2% slower on both (bench/results/2026-11-30-norm-trigger-wait-h200). The same bits in every
  /// position. Without PDL, or before a cuBLASLt GEMM (launched plainly), nothing changes.
  NormTrigger input_norm_trigger = NormTrigger::kBeforeWait;
  /// The same for the RMSNorm before gate/up: right after the norm's wait. On an H200 at
  /// 1 x 1,024 against kAfterRead: +1.2% SDAR-1.7B, +0.8% SDAR-4B (two rounds each;
  /// bench/results/2026-11-30-norm-trigger-wait-h200). kBeforeWait gave +1.0% on SDAR-4B but
  /// -2.4% on SDAR-1.7B, whose norm then reads its row ~2 us later, behind the gate/up GEMM's early
  /// weights (bench/results/2026-11-30-kernel-timeline-h200, call 2).
  NormTrigger post_norm_trigger = NormTrigger::kAfterWait;
  /// bf16 GEMMs of 17-64 rows (16 sequences) run our TMA + wgmma weight-streaming kernel
  /// (engine/cuda/src/wgmma_gemm.h; split-K over a thread block cluster, deterministic; the gate/up
  /// projection with the SwiGLU epilogue) instead of cuBLASLt, on sm_90 devices, where
  /// wgmma_min_block_k allows. Other bits than cuBLASLt's (a different summation order), the same
  /// run to run. Its gain is its programmatic early start after dice's kernels, which cuBLASLt's
  /// kernels never have. On: with the default limit +1.4-2.9% (SDAR-4B) and -0.1 to +2.7%
  /// (SDAR-1.7B) at 16 x 1,024 on an H100, three side-by-side runs on two machines (+1.6% / +0.1%
  /// at 16 x 4,096; bench/results/2026-11-27-wgmma-min-block-k-h100); on every shape it was about
  /// even (0.988 / 1.019, bench/results/2026-11-25-wgmma-gemm-h100).
  bool wgmma_gemm = true;
  /// With wgmma_gemm: only GEMMs whose blocks stream at least this much k under the split rule
  /// (in / splits, elements; wgmma_block_k) run the wgmma kernel, the others cuBLASLt. 0: every
  /// shape. Unset: the device's rule (wgmma_auto_min_block_k: a block must stream for 7.5 us at
  /// its SM's share of the peak bandwidth; 1,536 on an H100, 2,176 on the H200s measured); the
  /// backend's options() report the limit it took. Per launch the kernel pays 2-3 us more fixed
  /// cost than cuBLASLt on blocks of 512-1,280 k (the qkv and o projections) and is about even from
  /// 2,432 (bench/results/2026-11-25-wgmma-gemm-h100); 1,536 keeps the MLP projections of SDAR-1.7B
  /// and -4B and the 64-row lm_head on it. At 1,536 on an H200: 1.001 SDAR-4B, 0.975 SDAR-1.7B
  /// against cuBLASLt (bench/results/2026-11-27-wgmma-min-block-k-h200), hence the larger limit
  /// there.
  std::optional<std::int64_t> wgmma_min_block_k;
  /// With wgmma_gemm: the k each of the kernel's pipeline stages holds, 64 or 128 (two 64-k boxes
  /// a stage: half the mbarrier waits, block barriers and refills per byte; shapes whose `in` it
  /// does not divide run cuBLASLt). 128: 4-19% less time a launch at 64 rows on an H200 on the
  /// down, o and qkv shapes (the gate/up ones even), +0.5-1.1% tok/s on SDAR-4B at 16 x 1,024 and
  /// 16 x 4,096 (bench/results/2026-11-28-wgmma-balanced-h200). Other bits than 64 where the split
  /// boundaries move, the same run to run.
  int wgmma_stage_k = 128;
  /// GEMMs of at most 16 rows (1 sequence) that the skinny kernel would run go to the streaming
  /// skinny kernel (engine/cuda/src/stream_gemm.h: one persistent block per SM whose producer
  /// thread keeps a ring of two 16 x 2,048 weight stages full with bulk copies, from before the
  /// kernel's programmatic wait on; the gate/up projection with its SwiGLU epilogue; with
  /// fused_norm_gemm its own norm prologue) where its tiles fill at least stream_gemm_min_fill of
  /// the blocks' slots. Other bits than the skinny kernel's, the same run to run. Measured at 1 x
  /// 1,024 on an H100: +3.7% (fused store) and +4.1% (unfused) tok/s on SDAR-1.7B, +0.8% on SDAR-4B
  /// (bench/results/2026-11-28-stream-gemm-h100).
  bool stream_gemm = true;
  /// With stream_gemm: only GEMMs whose out / 16 tiles fill at least this share of the blocks'
  /// tile slots (stream_gemm_fill; 0.97 for every SDAR-1.7B layer shape, 0.61 for SDAR-4B's o
  /// and down projections, whose blocks would wait on the busiest) stream; 0: every shape.
  double stream_gemm_min_fill = 0.9;
  /// With stream_gemm: shapes whose busiest block would stream at least kStreamSplitMinSavingK
  /// (4,096) k less on the split walk than on whole tiles stream on it, whatever their fill
  /// (stream_split_fits, stream_split_saving_k in engine/cuda/src/stream_gemm.h; of the SDAR
  /// shapes, SDAR-4B's down projection): every block streams an equal share of the tiles' k to
  /// within 256, and the two blocks that share a tile meet through a slot in global memory.
  /// Per launch at 4 rows 16.0 us against 16.9 on the skinny kernel; +2.6% tok/s on SDAR-4B at
  /// 1 x 1,024 on an H200 (+1.6%, then +1.0% with the final hand-over;
  /// bench/results/2026-11-30-stream-split-h200). Other bits than the skinny kernel's, the same
  /// run to run on one device.
  bool stream_gemm_split = true;
  /// With stream_gemm: streaming launches without accumulate (qkv, gate/up, lm_head) whose
  /// blocks take at least stream_dynamic_min_tiles 16-column tiles on average stream
  /// 1 - stream_dynamic_share of their share in a contiguous run and claim the rest one tile at a
  /// time from a counter, so that a block whose share of the memory system runs slower ends no
  /// later than the others (engine/cuda/src/stream_gemm.h, StreamDynamic). The same bits.
  /// 0: off. On an H200 at 1 sequence the lm_head's step went from 212 to 185 us a forward
  /// (SDAR-4B; its bytes at the copy rate: 184) and from 164 to 153 (SDAR-1.7B): +0.4-0.6%
  /// tok/s on SDAR-4B at 1 x 1,024 and 1 x 4,096, +0.1-0.8% on SDAR-1.7B
  /// (bench/results/2026-12-01-dynamic-tail-h200).
  double stream_dynamic_share = 0.5;
  /// With stream_dynamic_share: the fewest tiles a block must take on average (a 151,936-row
  /// lm_head: 72 on 132 SMs; SDAR-4B's gate/up 9.2, whose step the tail made 0.4 us longer, and
  /// qkv 2.9).
  double stream_dynamic_min_tiles = 32.0;
};

}  // namespace dice::engine
