// The backend factory of the CLI (CPU reference, or CUDA when dice was built with it).

#include "backend_options.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "dice/core/error.h"
#include "dice/engine/cpu_backend.h"
#include "dice/model/checkpoint.h"
#ifdef DICE_HAVE_CUDA
#include "dice/engine/cuda_backend.h"
#endif

namespace dice::cli {

namespace {

/// Throws InputError for `option` (its flag and value) given while the feature it tunes is off:
/// "OPTION: OFF, so WHAT would change nothing; REMEDY".
void refuse_tuning_of_off_feature(const std::string& option, std::string_view off,
                                  std::string_view what, std::string_view remedy) {
  throw InputError(
      fmt::format("{}: {}, so {} would change nothing; {}", option, off, what, remedy));
}

}  // namespace

void add_backend_options(CLI::App* command, BackendArgs& args) {
  command
      ->add_option("--backend", args.backend,
                   "auto (cuda when a GPU is present), cpu (the fp32 reference) or cuda")
      ->capture_default_str();
  command->add_option("--threads", args.threads, "cpu backend: threads (0: every core)")
      ->capture_default_str();
  command->add_option("--gpu-memory", args.gpu_memory,
                      "cuda backend: device memory it may take for weights, work buffers and the "
                      "KV cache, e.g. 40GB or 37.5GiB (default: free memory minus 5%)");
  // The cuda backend's named choices are checked here, whichever backend runs: a typo is refused
  // on a machine without a GPU too, not ignored (make_backend checks them again for callers that
  // fill BackendArgs themselves).
  command
      ->add_option("--cuda-dtype", args.dtype,
                   "cuda backend: bf16, or fp32 (exact comparisons with the cpu backend)")
      ->check(CLI::IsMember({"bf16", "fp32"}).description(""))
      ->capture_default_str();
  command
      ->add_option("--cuda-attention", args.attention,
                   "cuda backend: auto, tensor-cores or cuda-cores")
      ->check(CLI::IsMember({"auto", "tensor-cores", "cuda-cores"}).description(""))
      ->capture_default_str();
  command->add_flag("--no-cuda-graphs", args.no_cuda_graphs,
                    "cuda backend: launch every kernel instead of replaying captured graphs");
  command->add_flag("--cuda-baseline-kernels", args.baseline_kernels,
                    "cuda backend: the first kernel layouts (one-block-per-row vocabulary pass "
                    "and norms, the first mma attention split down to 64 positions, the SwiGLU "
                    "kernel and norm kernels, no PDL unless --pdl), for before/after timings");
  command->add_flag("--no-gemm-autotune", args.no_gemm_autotune,
                    "cuda backend: keep cuBLASLt's heuristic algorithm for every GEMM instead of "
                    "timing its candidates on the first pass of each shape");
  command
      ->add_option("--skinny-gemm-rows", args.cuda.skinny_gemm_rows,
                   "cuda backend: bf16 GEMMs of at most this many (padded) rows run dice's "
                   "tensor-core kernel for few rows instead of cuBLASLt (0: off, at most 64)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  auto* pdl = command->add_flag(
      "--pdl", args.pdl,
      "cuda backend: launch dice's kernels with programmatic dependent launch (each scheduled "
      "while the previous kernel drains; same results) in every pass (the default with "
      "--early-start-after-cublas; without it only in passes of at most --skinny-gemm-rows "
      "rows, where every kernel of a layer is dice's)");
  command
      ->add_flag("--no-pdl", args.no_pdl,
                 "cuda backend: no programmatic dependent launch in any pass (see --pdl)")
      ->excludes(pdl);
  command->add_flag("--pipelined-attention,!--no-pipelined-attention",
                    args.cuda.pipelined_attention,
                    "cuda backend: bf16 tensor-core attention with cp.async K/V loads in flight "
                    "and split tiles merged in the same kernel; --no-pipelined-attention: the "
                    "first mma kernel and its combine launch (default: on)");
  command->add_flag("--balanced-attention-plan,!--no-balanced-attention-plan",
                    args.cuda.attention_balanced_plan,
                    "cuda backend: split attention ranges by waves of resident blocks and launch "
                    "the tiles that read the same K/V pages side by side; "
                    "--no-balanced-attention-plan: the earlier planner (default: on)");
  command->add_flag("--paired-attention-tiles,!--no-paired-attention-tiles",
                    args.cuda.attention_paired_tiles,
                    "cuda backend: where a pass has enough attention work without splits (many "
                    "sequences), two tiles of a sequence in one pipelined work item whose warp "
                    "pairs share each K/V page (4+ query heads per KV head: a fused store pass "
                    "reads its pages once instead of twice); --no-paired-attention-tiles: one "
                    "tile per item, on the deep kernel too (no deep pairs) (default: on)");
  command
      ->add_option("--attention-split-cost", args.cuda.attention_split_cost,
                   "cuda backend: positions of fixed cost (the split merge) that splitting a "
                   "tile's KV range adds in the attention planner's makespan estimate once the "
                   "unsplit tiles give every SM one (0: none)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  command
      ->add_option("--attention-max-splits", args.cuda.attention_max_splits,
                   "cuda backend: most ranges the pipelined attention splits one tile's KV "
                   "positions into (flash-decoding; the kernel merges at most 64; 1: never split)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command
      ->add_option("--attention-min-split-keys", args.cuda.attention_min_split_keys,
                   "cuda backend: fewest KV positions in one split range of the attention: "
                   "tiles of at least twice this many are split (0: the first planner, which "
                   "splits down to 2 pages)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  command->add_flag(
      "--deep-attention-pipeline,!--no-deep-attention-pipeline", args.cuda.attention_deep_pipeline,
      "cuda backend: in passes whose attention tiles fill 3/4 to all of the SMs (about "
      "13-16 sequences), the pipelined attention with three K/V pages in flight per "
      "warp and one block per SM; --no-deep-attention-pipeline: one page per warp, "
      "three blocks per SM, everywhere (default: on)");
  command->add_flag(
      "--deep-attention-pairs,!--no-deep-attention-pairs", args.cuda.attention_deep_pairs,
      "cuda backend: where the attention tiles outnumber the SMs but their pairs (two tiles of "
      "one sequence reading the same pages) fill 3/4 to all of them (SDAR-4B's fused store "
      "passes at 13-16 sequences), the pairs on the deep kernel, each page read once; "
      "--no-deep-attention-pairs: the pipelined kernel there (default: on)");
  command
      ->add_option("--deep-attention-pairs-min-keys", args.cuda.attention_deep_pairs_min_keys,
                   "cuda backend: the deep paired attention only in passes whose longest "
                   "sequence holds at least this many positions (0: every such pass)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  command
      ->add_option("--deep-attention-pairs-warps", args.cuda.attention_deep_pairs_warps,
                   "cuda backend: warps a block of the deep paired attention, 8 or 4 (8: each "
                   "warp a quarter of the pages; 4: half, the paired kernel's bits)")
      ->check(CLI::IsMember({4, 8}))
      ->capture_default_str();
  command->add_flag(
      "--early-start-after-cublas,!--no-early-start-after-cublas",
      args.cuda.early_start_after_cublas,
      "cuda backend: dice's kernels launched with programmatic dependent launch in every pass, "
      "and in captured passes those after a cuBLASLt GEMM scheduled once all of its blocks have "
      "begun (a programmatic edge from its launch completion; they still wait for its results); "
      "--no-pdl turns this off too (default: on)");
  command->add_flag("--gemm-tune-cold,!--no-gemm-tune-cold", args.cuda.gemm_tune_cold,
                    "cuda backend: the GEMM autotune times cuBLASLt's candidates with the L2 cache "
                    "flushed before each launch, as the forward runs them (the same bits; +1.4% "
                    "for SDAR-1.7B at 16 sequences on an H100); --no-gemm-tune-cold: on warm "
                    "weights (default: on)");
  command->add_flag("--masked-rows-only,!--no-masked-rows-only", args.cuda.masked_rows_only,
                    "cuda backend: in decoding, the final norm, lm_head and vocabulary pass run "
                    "over the block rows that hold the mask token only (a decided position's "
                    "proposal is never read; +1.7% (SDAR-4B) and +3.8% (SDAR-1.7B) at 128 "
                    "sequences on an H100); --no-masked-rows-only: over every block row "
                    "(default: on)");
  command->add_flag("--fused-norm-gemm,!--no-fused-norm-gemm", args.cuda.fused_norm_gemm,
                    "cuda backend: the RMSNorms before the qkv and gate_up GEMMs computed by the "
                    "few-row GEMM kernel's blocks themselves (the streaming kernel where it runs "
                    "them, else the skinny kernel in one wave; same bits, a launch fewer per "
                    "layer; measured 2-6% slower at 1 sequence on an H100, 7-10% on an H200) "
                    "(default: off)");
  command->add_flag("--fold-qkv-norm,!--no-fold-qkv-norm", args.cuda.fold_qkv_norm,
                    "cuda backend: at 17-64 rows on the wgmma GEMM, the down projection writes "
                    "the next layer's RMSNorm input and row sums of squares, and the q/k norm "
                    "kernel applies the 1 / rms: no norm kernel before qkv after the first layer "
                    "(other rounding, the same bits run to run); --no-fold-qkv-norm: the norm "
                    "kernel (default: on)");
  command->add_flag("--fold-mlp-norm,!--no-fold-mlp-norm", args.cuda.fold_mlp_norm,
                    "cuda backend: likewise the RMSNorm before gate/up (the o projection writes "
                    "its input, the SwiGLU epilogue applies the 1 / rms); "
                    "--no-fold-mlp-norm: the norm kernel before gate/up (default: on)");
  command->add_flag("--fused-qk-norm-rope,!--no-fused-qk-norm-rope", args.cuda.fused_qk_norm_rope,
                    "cuda backend: at 17-64 rows on the wgmma GEMM (head_dim 128), the qkv "
                    "projection's epilogue applies the q/k RMSNorm and RoPE and writes q and the "
                    "K/V cache itself: no q/k norm + RoPE launch a layer (the same arithmetic; "
                    "even on an H200 at 16 sequences); --no-fused-qk-norm-rope: the qkv GEMM, "
                    "then that kernel (default: off)");
  command
      ->add_option("--fused-qk-norm-rope-tile", args.cuda.fused_qk_norm_rope_tile_n,
                   "cuda backend: with --fused-qk-norm-rope, the qkv projection's column tile: "
                   "64 (a head vector's two tiles in one cluster) or 128 (default: 64)")
      ->check(CLI::IsMember(engine::kQkRopeTileChoices));
  command->add_flag("--fused-swiglu,!--no-fused-swiglu", args.cuda.fused_swiglu,
                    "cuda backend: SwiGLU computed in the few-row gate/up GEMM's epilogue, a "
                    "launch fewer per layer with the same bits; --no-fused-swiglu: the SwiGLU "
                    "kernel after the GEMM (default: on)");
  command->add_flag("--bf16-gate-up,!--no-bf16-gate-up", args.cuda.bf16_gate_up,
                    "cuda backend: where cuBLASLt runs the gate/up projection (more rows than "
                    "--skinny-gemm-rows), it writes bf16 and the SwiGLU kernel reads that (half "
                    "the bytes); --no-bf16-gate-up: fp32 (default: on)");
  command->add_flag("--pdl-early-reads,!--no-pdl-early-reads", args.cuda.pdl_early_reads,
                    "cuda backend: in passes launched with programmatic dependent launch, each "
                    "few-row GEMM loads its first weights, the attention its work items' "
                    "metadata and the q/k norm + RoPE its rows' metadata, RoPE pairs and norm "
                    "weights, before it waits for the kernel before it (same results) "
                    "(default: on)");
  command
      ->add_option("--stage-o-batch", args.cuda.stage_o_batch_rounds,
                   "cuda backend: with --stage-o-weights, each warp of the o projection issues "
                   "its staged copies this many rounds (512 bytes per n8 tile) at a time, each "
                   "batch landed before the next, so that fewer bytes queue ahead of the "
                   "attention's reads (0: all at once; same results; 2 is +2% on SDAR-4B at 1 "
                   "sequence on an H200)")
      ->check(CLI::Range(0, engine::kStageBatchRoundsLimit))
      ->capture_default_str();
  command->add_flag("--early-residual-reads,!--no-early-residual-reads",
                    args.cuda.early_residual_reads,
                    "cuda backend: with early reads, the few-row o and down projections read the "
                    "residual they add to before they wait for the kernel before them (same "
                    "results) (default: on)");
  command->add_flag("--stage-o-weights,!--no-stage-o-weights", args.cuda.stage_o_weights,
                    "cuda backend: with early reads, the few-row o projection copies its "
                    "weights into shared memory while the attention runs, where they fit "
                    "(same results) "
                    "(default: on)");
  // The trigger options take norm_trigger_name's names (the one place that spells them), and only
  // those: IsMember before the mapping (CheckedTransformer alone also took the enum's integers and
  // listed the mapping in its refusal).
  std::map<std::string, engine::NormTrigger> norm_triggers;
  std::vector<std::string> names;
  for (const auto trigger : engine::kNormTriggers) {
    names.emplace_back(engine::norm_trigger_name(trigger));
    norm_triggers.emplace(names.back(), trigger);
  }
  const std::string trigger_names = fmt::format("{}", fmt::join(names, "|"));  // for the help
  const auto add_norm_trigger = [&](const std::string& flag, engine::NormTrigger& field,
                                    const std::string& help) {
    // (CLI11 puts each transform in front of those before it: IsMember runs first.)
    command->add_option(flag, field, help)
        ->transform(CLI::Transformer(norm_triggers).description(""))
        ->transform(CLI::IsMember(names).description(""))
        ->option_text(trigger_names);
  };
  add_norm_trigger("--input-norm-trigger", args.cuda.input_norm_trigger,
                   "cuda backend: under PDL, where the RMSNorm before qkv lets the qkv GEMM "
                   "start (its blocks load their first weights before they wait): after-read "
                   "(once the norm has read its row), after-wait (right after the norm's own "
                   "wait) or before-wait (same results; before-wait is +2-3% at 1 sequence on an "
                   "H200 against after-read) (default: before-wait)");
  add_norm_trigger("--post-norm-trigger", args.cuda.post_norm_trigger,
                   "cuda backend: the same for the RMSNorm before gate/up (same results; "
                   "after-wait is +0.8-1.2% at 1 sequence on an H200 against after-read) "
                   "(default: after-wait)");
  command->add_flag("--wgmma-gemm,!--no-wgmma-gemm", args.cuda.wgmma_gemm,
                    "cuda backend: GEMMs of 17-64 rows (about 16 sequences) whose blocks stream "
                    "enough k (--wgmma-min-block-k) run dice's TMA + wgmma kernel instead of "
                    "cuBLASLt on Hopper GPUs (deterministic; other rounding than cuBLASLt's; "
                    "+1.4-2.9% for SDAR-4B at 16 sequences on an H100); --no-wgmma-gemm: "
                    "cuBLASLt (default: on)");
  command
      ->add_option("--wgmma-min-block-k", args.cuda.wgmma_min_block_k,
                   "cuda backend: only GEMMs whose blocks stream at least this many elements of "
                   "k (in / split count) run the wgmma kernel, the others cuBLASLt; 0: every "
                   "shape (default: the device's, a block streaming for 7.5 us at its SM's "
                   "share of the peak bandwidth: 1536 on an H100, the SDAR MLP projections)")
      ->check(CLI::Range(0, 1 << 20));
  command
      ->add_option("--wgmma-stage-k", args.cuda.wgmma_stage_k,
                   "cuda backend: the k each pipeline stage of the wgmma kernel holds, 64 or "
                   "128 (128: half the waits per byte; +0.5-1.1% for SDAR-4B at 16 sequences on "
                   "an H200) (default: 128)")
      ->check(CLI::IsMember(engine::kWgmmaStageKChoices));
  command->add_flag("--stream-gemm,!--no-stream-gemm", args.cuda.stream_gemm,
                    "cuda backend: GEMMs of at most 16 rows (about 1 sequence) whose tiles fill "
                    "the SMs (--stream-gemm-min-fill) run dice's streaming kernel, one persistent "
                    "block per SM fed by bulk copies, instead of the skinny kernel "
                    "(deterministic; other rounding; +3.7-4.1% for SDAR-1.7B at 1 sequence on an "
                    "H100); --no-stream-gemm: the skinny kernel (default: on)");
  command
      ->add_option("--stream-gemm-min-fill", args.cuda.stream_gemm_min_fill,
                   "cuda backend: only GEMMs whose 16-column tiles fill at least this share of "
                   "the SMs' tile slots run the streaming kernel; 0: every shape (default: 0.9)")
      ->check(CLI::Range(0.0, 1.0));
  command->add_flag("--stream-gemm-split,!--no-stream-gemm-split", args.cuda.stream_gemm_split,
                    fmt::format("cuda backend: with --stream-gemm, GEMMs whose busiest block "
                                "would stream at least {} k less with its tiles' k dealt evenly "
                                "(SDAR-4B's down projection) stream that way, blocks sharing a "
                                "tile meeting through global memory (deterministic; other "
                                "rounding; +2.6% for SDAR-4B at 1 sequence on an H200) "
                                "(default: on)",
                                engine::kStreamSplitMinSavingK));
  command
      ->add_option("--stream-dynamic-share", args.cuda.stream_dynamic_share,
                   "cuda backend: with --stream-gemm, the share of a streaming launch's tiles "
                   "that its blocks claim at run time instead of taking in a contiguous run "
                   "(launches without accumulate whose blocks take at least "
                   "--stream-dynamic-min-tiles tiles, the lm_head; the same bits; +0.4-0.6% for "
                   "SDAR-4B at 1 sequence on an H200); 0: off (default: 0.5)")
      ->check(CLI::Range(0.0, 0.99));
  command
      ->add_option("--stream-dynamic-min-tiles", args.cuda.stream_dynamic_min_tiles,
                   "cuda backend: with --stream-dynamic-share, the fewest 16-column tiles a "
                   "block must take on average for the launch to claim some at run time "
                   "(default: 32, the lm_head only)")
      ->check(CLI::Range(1.0, 1e9));
}

std::int64_t parse_bytes(std::string_view text, std::string_view what) {
  std::string s(text);
  std::size_t used = 0;
  double value = -1;
  try {
    value = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = s.substr(used);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "kb") scale = 1e3;
  if (unit == "mb") scale = 1e6;
  if (unit == "gb") scale = 1e9;
  if (unit == "kib") scale = 1024.0;
  if (unit == "mib") scale = 1024.0 * 1024;
  if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  if (used == 0 || scale == 0 || !(value > 0) || !std::isfinite(value))
    throw InputError(
        fmt::format("{}: \"{}\" is not a size (e.g. 40GB, 37.5GiB, 512MiB)", what, text));
  return static_cast<std::int64_t>(value * scale);
}

std::string resolve_backend(const BackendArgs& args) {
  if (args.backend == "cpu") return "cpu";
#ifdef DICE_HAVE_CUDA
  const bool gpu = engine::cuda_device_count() > 0;
#else
  const bool gpu = false;
#endif
  if (args.backend == "auto") return gpu ? "cuda" : "cpu";
  if (args.backend != "cuda")
    throw InputError(fmt::format("--backend {}: expected auto, cpu or cuda", args.backend));
#ifndef DICE_HAVE_CUDA
  throw InputError("--backend cuda: this dice was built without CUDA (nvcc was not found)");
#else
  if (!gpu) throw InputError("--backend cuda: no CUDA device is present");
  return "cuda";
#endif
}

std::unique_ptr<engine::Backend> make_backend(const BackendArgs& args,
                                              const model::Checkpoint& checkpoint,
                                              std::string* description) {
  const engine::CudaBackendOptions defaults;  // (also for the description below)
  constexpr std::string_view wgmma_off = "the wgmma kernel is off (--no-wgmma-gemm)";
  if (!args.cuda.wgmma_gemm && args.cuda.wgmma_min_block_k)
    refuse_tuning_of_off_feature(
        fmt::format("--wgmma-min-block-k {}", *args.cuda.wgmma_min_block_k), wgmma_off, "the limit",
        "drop one of the two");
  if (!args.cuda.wgmma_gemm && args.cuda.wgmma_stage_k != defaults.wgmma_stage_k)
    refuse_tuning_of_off_feature(fmt::format("--wgmma-stage-k {}", args.cuda.wgmma_stage_k),
                                 wgmma_off, "the stage size", "drop one of the two");
  if (!args.cuda.fused_qk_norm_rope &&
      args.cuda.fused_qk_norm_rope_tile_n != defaults.fused_qk_norm_rope_tile_n)
    refuse_tuning_of_off_feature(
        fmt::format("--fused-qk-norm-rope-tile {}", args.cuda.fused_qk_norm_rope_tile_n),
        "the q/k epilogue is off (--fused-qk-norm-rope not given)", "the tile",
        "drop it or add --fused-qk-norm-rope");
  const std::int64_t memory_limit =
      args.gpu_memory.empty() ? 0 : parse_bytes(args.gpu_memory, "--gpu-memory");
  const std::string which = resolve_backend(args);
  if (which == "cpu") {
    auto cpu =
        std::make_unique<engine::CpuBackend>(engine::CpuWeights::from_checkpoint(checkpoint),
                                             engine::CpuBackendOptions{.threads = args.threads});
    if (description != nullptr)
      *description = fmt::format("cpu (fp32 reference, {} threads)", cpu->threads());
    return cpu;
  }
#ifdef DICE_HAVE_CUDA
  engine::CudaBackendOptions options = args.cuda;  // the switches the flags set directly
  if (args.dtype == "bf16")
    options.dtype = engine::CudaDType::kBF16;
  else if (args.dtype == "fp32")
    options.dtype = engine::CudaDType::kF32;
  else
    throw InputError(fmt::format("--cuda-dtype {}: expected bf16 or fp32", args.dtype));
  if (args.attention == "auto")
    options.attention = engine::CudaAttention::kAuto;
  else if (args.attention == "tensor-cores")
    options.attention = engine::CudaAttention::kTensorCores;
  else if (args.attention == "cuda-cores")
    options.attention = engine::CudaAttention::kCudaCores;
  else
    throw InputError(fmt::format("--cuda-attention {}: expected auto, tensor-cores or cuda-cores",
                                 args.attention));
  if (options.attention == engine::CudaAttention::kTensorCores &&
      options.dtype != engine::CudaDType::kBF16)
    throw InputError("--cuda-attention tensor-cores needs --cuda-dtype bf16");
  options.memory_limit_bytes = memory_limit;
  options.cuda_graphs = !args.no_cuda_graphs;
  options.gemm_autotune = !args.no_gemm_autotune;
  options.programmatic_launch = args.pdl;
  options.programmatic_launch_few_rows = !args.no_pdl;
  if (args.no_pdl) options.early_start_after_cublas = false;
  if (args.baseline_kernels) {
    options.fused_swiglu = false;
    options.bf16_gate_up = false;
    options.programmatic_launch_few_rows = false;
    options.pdl_early_reads = false;
    options.stage_o_weights = false;
    options.early_residual_reads = false;
    options.input_norm_trigger = engine::NormTrigger::kAfterRead;
    options.post_norm_trigger = engine::NormTrigger::kAfterRead;
    options.wgmma_gemm = false;
    options.stream_gemm = false;
    options.stream_dynamic_share = 0.0;
    options.attention_balanced_plan = false;
    options.attention_paired_tiles = false;
    options.attention_deep_pipeline = false;
    options.attention_deep_pairs = false;
    options.early_start_after_cublas = false;
    options.gemm_tune_cold = false;
    options.masked_rows_only = false;
    options.fused_norm_gemm = false;
    options.fold_qkv_norm = false;
    options.fold_mlp_norm = false;
    options.fused_qk_norm_rope = false;
    options.chunked_vocab_pass = false;
    options.attention_min_split_keys = 0;
    options.pipelined_attention = false;
    options.fast_norms = false;
  }
  auto cuda = std::make_unique<engine::CudaBackend>(checkpoint, options);
  if (description != nullptr) {
    // (against `defaults`: the options not changed are not listed)
    const auto m = cuda->memory();
    *description = fmt::format(
        "cuda ({}, {}{}, skinny GEMM rows {}, PDL {}, weights {:.2f} GiB, KV cache {:.2f} GiB = "
        "{} tokens of {} KiB)",
        m.device_name, args.dtype,
        std::string(args.baseline_kernels ? ", baseline kernels" : "") +
            (args.no_gemm_autotune ? ", no GEMM autotune" : "") +
            (!args.baseline_kernels && !args.cuda.pipelined_attention ? ", first mma attention"
                                                                      : "") +
            (!args.baseline_kernels && !args.cuda.attention_balanced_plan
                 ? ", earlier attention plan"
                 : "") +
            (!args.baseline_kernels && !args.cuda.attention_paired_tiles
                 ? ", unpaired attention tiles"
                 : "") +
            (!args.baseline_kernels && !args.cuda.attention_deep_pipeline ? ", no deep attention"
                                                                          : "") +
            (!args.baseline_kernels &&
                     args.cuda.attention_split_cost != defaults.attention_split_cost
                 ? fmt::format(", attention split cost {}", args.cuda.attention_split_cost)
                 : "") +
            (!args.baseline_kernels &&
                     args.cuda.attention_max_splits != defaults.attention_max_splits
                 ? fmt::format(", at most {} attention splits", args.cuda.attention_max_splits)
                 : "") +
            (!args.baseline_kernels && args.cuda.fused_norm_gemm ? ", norm fused into GEMMs" : "") +
            (!args.baseline_kernels && !args.cuda.fused_swiglu ? ", SwiGLU kernel" : "") +
            (!args.baseline_kernels && !args.cuda.bf16_gate_up ? ", fp32 gate/up output" : "") +
            (!args.baseline_kernels && !args.cuda.pdl_early_reads ? ", no early reads under PDL"
                                                                  : "") +
            (!args.baseline_kernels && !args.cuda.early_residual_reads
                 ? ", residual read after the GEMMs' wait"
                 : "") +
            (!args.baseline_kernels && !args.cuda.masked_rows_only ? ", logits of every block row"
                                                                   : "") +
            (!args.baseline_kernels && !args.cuda.wgmma_gemm ? ", no wgmma GEMM" : "") +
            (!args.baseline_kernels && !args.cuda.fold_qkv_norm ? ", qkv norm not folded" : "") +
            (!args.baseline_kernels && !args.cuda.fold_mlp_norm ? ", MLP norm not folded" : "") +
            (!args.baseline_kernels && args.cuda.fused_qk_norm_rope ? ", q/k norm in the qkv GEMM"
                                                                    : "") +
            (!args.baseline_kernels && args.cuda.stage_o_weights &&
                     args.cuda.stage_o_batch_rounds != defaults.stage_o_batch_rounds
                 ? (args.cuda.stage_o_batch_rounds == 0
                        ? std::string(", o staged all at once")
                        : fmt::format(", o staged {} rounds at a time",
                                      args.cuda.stage_o_batch_rounds))
                 : "") +
            (!args.baseline_kernels && args.cuda.input_norm_trigger != defaults.input_norm_trigger
                 ? fmt::format(", input norm trigger {}",
                               engine::norm_trigger_name(args.cuda.input_norm_trigger))
                 : "") +
            (!args.baseline_kernels && args.cuda.post_norm_trigger != defaults.post_norm_trigger
                 ? fmt::format(", post norm trigger {}",
                               engine::norm_trigger_name(args.cuda.post_norm_trigger))
                 : ""),
        args.cuda.skinny_gemm_rows,
        options.early_start_after_cublas ? "on, early after cuBLASLt"
        : args.pdl                       ? "on"
        : args.no_pdl                    ? "off"
                                         : "in passes of at most the skinny GEMM rows",
        static_cast<double>(m.weights) / (1 << 30), static_cast<double>(m.kv_cache) / (1 << 30),
        m.pages * m.page_tokens, m.bytes_per_token / 1024);
  }
  return cuda;
#else
  (void)memory_limit;
  throw InputError("--backend cuda: this dice was built without CUDA");
#endif
}

}  // namespace dice::cli
