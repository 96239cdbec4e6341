// `dice engine logits`: the engine's teacher-forced logits of a token sequence, for comparisons
// with reference implementations (engine/tests, bench/engine_cpu_vs_hf.py).

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend_options.h"
#include "commands.h"
#include "decoding_options.h"
#include "dice/core/error.h"
#include "dice/engine/block_decoder.h"
#include "dice/engine/scoring.h"
#include "dice/model/checkpoint.h"
#include "token_ids.h"
#ifdef DICE_HAVE_CUDA
#include "dice/engine/cuda_backend.h"
#endif

namespace dice::cli {

namespace {

struct LogitsArgs {
  std::string model;
  std::string out;
  std::int64_t prompt_length = -1;
  std::int32_t block_length = 4;
  bool fused_store = true;
  BackendArgs backend;
};

void run_logits(const LogitsArgs& args) {
  const std::string text{std::istreambuf_iterator<char>(std::cin),
                         std::istreambuf_iterator<char>()};
  const auto ids = parse_token_ids(text, "stdin");
  if (ids.empty()) throw InputError("stdin: no token ids");
  const std::int64_t prompt = args.prompt_length < 0 ? std::ssize(ids) : args.prompt_length;
  std::unique_ptr<engine::Backend> backend;
  std::string description;
  {
    const auto checkpoint = model::Checkpoint::open(args.model);
    backend = make_backend(args.backend, checkpoint, &description);
  }
  const auto scored =
      engine::score_blocks(*backend, ids, prompt, args.block_length, args.fused_store);
  std::ofstream file(args.out, std::ios::binary);
  if (!file) throw InputError(fmt::format("--out {}: cannot write", args.out));
  file.write(reinterpret_cast<const char*>(scored.logits.data()),
             static_cast<std::streamsize>(scored.logits.size() * sizeof(float)));
  if (!file) throw Error(fmt::format("--out {}: write failed", args.out));
  const nlohmann::json summary{{"first_position", scored.first_position},
                               {"rows", scored.rows},
                               {"vocab_rows", scored.vocab_rows},
                               {"forwards", scored.forwards},
                               {"dtype", "float32"},
                               {"backend", description},
                               {"out", args.out}};
  std::cout << summary.dump() << "\n";
}

struct BenchArgs {
  std::string model;
  BackendArgs backend;
  std::string sequences = "1,16,128";
  std::string new_tokens = "1024,4096";
  std::string store = "fused,unfused";
  std::int64_t prompt_length = 64;
  std::int32_t block_length = 4;
  std::int64_t warmup_tokens = 16;
  bool no_ceilings = false;
  /// seconds of back-to-back GEMMs for the sustained GEMM rate (0: not measured)
  double sustained_gemm_seconds = 4;
  std::string json_out;
  std::uint64_t seed = 0;
  std::size_t max_active = 0;
  bool reserve_whole_cache = false;
  /// --temperature (0: greedy, the benchmark's default), --top-k, --top-p and --sampling-seed
  /// (sequence i samples with seed + i); mask id and vocabulary limit come from the model
  engine::SamplingParams sampling;
};

std::vector<std::int64_t> parse_list(const std::string& text, std::string_view what) {
  std::vector<std::int64_t> values;
  for (const std::int32_t v : parse_token_ids(text, what)) {
    if (v < 1) throw InputError(fmt::format("{}: values must be >= 1", what));
    values.push_back(v);
  }
  if (values.empty()) throw InputError(fmt::format("{}: empty list", what));
  return values;
}

/// The benchmark of issue 6: N sequences of random prompt ids decode T new tokens each with the
/// static schedule (steps = block length, low_confidence_static: one token per forward), greedy,
/// no stop ids (or sampling with --temperature, --top-k, --top-p, to time the vocabulary pass's
/// sampling paths); timed after a warm-up run that captures the CUDA graphs of the shapes.
void run_bench(const BenchArgs& args) {
  using Clock = std::chrono::steady_clock;
  const auto sequences = parse_list(args.sequences, "--sequences");
  const auto new_tokens = parse_list(args.new_tokens, "--new-tokens");
  std::vector<bool> stores;
  for (std::string_view rest = args.store; !rest.empty();) {
    const auto comma = rest.find(',');
    const std::string_view word = rest.substr(0, comma);
    if (word == "fused")
      stores.push_back(true);
    else if (word == "unfused")
      stores.push_back(false);
    else
      throw InputError(
          fmt::format("--store {}: expected fused, unfused or fused,unfused", args.store));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  const std::string which = resolve_backend(args.backend);
  nlohmann::json ceilings = nullptr;
  [[maybe_unused]] double bandwidth = 0, rate = 0, sustained_rate = 0;
#ifdef DICE_HAVE_CUDA
  if (which == "cuda" && !args.no_ceilings) {  // before the backend takes the memory
    bandwidth = engine::measure_copy_bandwidth(0, 1ll << 30, 20);
    rate = engine::measure_gemm_rate(0, 8192, 8192, 8192, 20);
    ceilings = {{"copy_bytes_per_second", bandwidth},
                {"bf16_gemm_flops_per_second", rate},
                {"device", engine::cuda_device_description(0)}};
    std::string sustained_text;
    if (args.sustained_gemm_seconds > 0) {
      sustained_rate =
          engine::measure_sustained_gemm_rate(0, 8192, 8192, 8192, args.sustained_gemm_seconds);
      ceilings["bf16_gemm_sustained_flops_per_second"] = sustained_rate;
      ceilings["sustained_gemm_seconds"] = args.sustained_gemm_seconds;
      sustained_text = fmt::format(" ({:.0f} sustained over {} s)", sustained_rate / 1e12,
                                   args.sustained_gemm_seconds);
    }
    std::cerr << fmt::format(
        "dice engine bench: ceilings on {}: copy {:.0f} GB/s (read + write), bf16 GEMM {:.0f} "
        "TFLOP/s{}\n",
        engine::cuda_device_description(0), bandwidth / 1e9, rate / 1e12, sustained_text);
  }
#endif
  std::unique_ptr<engine::Backend> backend;
  std::string description;
  model::ModelConfig config;
  {
    const auto checkpoint = model::Checkpoint::open(args.model);
    config = checkpoint.config();
    backend = make_backend(args.backend, checkpoint, &description);
  }
#ifdef DICE_HAVE_CUDA
  auto* cuda = dynamic_cast<engine::CudaBackend*>(backend.get());
  if (cuda != nullptr) cuda->set_ceilings(bandwidth, rate, sustained_rate);
#endif
  std::cerr << fmt::format("dice engine bench: {} on {}\n", args.model, description);
  std::ofstream json_file;
  if (!args.json_out.empty()) {
    json_file.open(args.json_out, std::ios::app);
    if (!json_file) throw InputError(fmt::format("--json {}: cannot write", args.json_out));
  }
  const auto vocab_limit =
      static_cast<std::int32_t>(std::min<std::int64_t>(config.vocab_size, 151669));
  const engine::ScheduleOptions schedule{.max_active = args.max_active,
                                         .admission = admission_of(args.reserve_whole_cache)};
  // Every request's options but the seed and the token limit.
  engine::GenerationOptions options;
  options.block_length = args.block_length;
  options.steps = args.block_length;
  options.remasking.strategy = engine::RemaskingStrategy::kLowConfidenceStatic;
  options.sampling = args.sampling;
  options.sampling.mask_id = config.mask_token_id;
  options.sampling.vocab_limit = vocab_limit;
  options.stop_ids.clear();
  options.validate();
  // Cheapest first (new tokens, then sequences), the store variants side by side: a run stopped
  // at a time limit has reported whole groups.
  for (const std::int64_t t : new_tokens)
    for (const std::int64_t n : sequences)
      for (const bool fused : stores) {
        std::vector<engine::GenerationRequest> requests;
        for (std::int64_t i = 0; i < n; ++i) {
          std::mt19937 rng(
              static_cast<std::uint32_t>(args.seed * 1000003 + static_cast<std::uint64_t>(i)));
          std::uniform_int_distribution<std::int32_t> pick(0, vocab_limit - 1);
          engine::GenerationRequest r;
          for (std::int64_t k = 0; k < args.prompt_length; ++k) {
            std::int32_t id = pick(rng);
            if (id == config.mask_token_id) id = 0;
            r.prompt_ids.push_back(id);
          }
          r.options = options;
          r.options.sampling.seed = args.sampling.seed + static_cast<std::uint64_t>(i);
          r.options.fused_store = fused;
          r.options.max_new_tokens = t;
          requests.push_back(std::move(r));
        }
        auto warmup = requests;
        for (auto& r : warmup) r.options.max_new_tokens = std::min(t, args.warmup_tokens);
        engine::generate(*backend, warmup, {}, schedule);
#ifdef DICE_HAVE_CUDA
        // The warm-up captures the configuration's graphs, and with them makes the early-start
        // edges (early_start_after_cublas): counted before the reset, put in the record.
        engine::CudaForwardStats warmup_stats;
        if (cuda != nullptr) {
          warmup_stats = cuda->stats();
          cuda->reset_stats();
        }
#endif
        const auto start = Clock::now();
        const auto wall_start = std::chrono::system_clock::now();
        engine::ScheduleStats schedule_stats;
        const auto results = engine::generate(*backend, requests, {}, schedule, &schedule_stats);
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        const auto wall_end = std::chrono::system_clock::now();
        const auto unix_seconds = [](std::chrono::system_clock::time_point when) {
          return std::chrono::duration<double>(when.time_since_epoch()).count();
        };
        std::int64_t tokens = 0, forwards = 0;
        for (const auto& r : results) tokens += std::ssize(r.output_ids);
        nlohmann::json record{{"model", args.model},
                              {"backend", description},
                              {"hidden", config.hidden_size},
                              {"layers", config.num_layers},
                              {"sequences", n},
                              {"new_tokens", t},
                              {"prompt_length", args.prompt_length},
                              {"block_length", args.block_length},
                              {"temperature", args.sampling.temperature},
                              {"top_k", args.sampling.top_k},
                              {"top_p", args.sampling.top_p},
                              {"fused_store", fused},
                              {"seconds", seconds},
                              // the timed run's wall-clock span (Unix seconds): for matching
                              // samples of the card's clocks and power to it
                              {"timed_from_unix", unix_seconds(wall_start)},
                              {"timed_to_unix", unix_seconds(wall_end)},
                              {"output_tokens", tokens},
                              {"tokens_per_second", static_cast<double>(tokens) / seconds},
                              {"reserve_whole_cache", args.reserve_whole_cache},
                              {"concurrent_sequences", schedule_stats.peak_active},
                              {"preemptions", schedule_stats.preemptions},
                              {"recomputed_tokens", schedule_stats.recomputed_tokens},
                              {"ceilings", ceilings}};
        std::string floor_text;
#ifdef DICE_HAVE_CUDA
        if (cuda != nullptr) {
          const auto& st = cuda->stats();
          forwards = st.forwards;
          const auto& o = cuda->options();
          record["cuda_kernels"] = {
              {"chunked_vocab_pass", o.chunked_vocab_pass},
              {"attention_min_split_keys", o.attention_min_split_keys},
              {"pipelined_attention", o.pipelined_attention},
              {"attention_max_splits", o.attention_max_splits},
              {"attention_balanced_plan", o.attention_balanced_plan},
              {"attention_paired_tiles", o.attention_paired_tiles},
              {"attention_split_cost", o.attention_split_cost},
              {"attention_deep_pipeline", o.attention_deep_pipeline},
              {"attention_deep_pairs", o.attention_deep_pairs},
              {"attention_deep_pairs_min_keys", o.attention_deep_pairs_min_keys},
              {"attention_deep_pairs_warps", o.attention_deep_pairs_warps},
              {"early_start_after_cublas", o.early_start_after_cublas},
              {"gemm_tune_cold", o.gemm_tune_cold},
              {"fast_norms", o.fast_norms},
              {"gemm_autotune", o.gemm_autotune},
              {"skinny_gemm_rows", o.skinny_gemm_rows},
              {"fused_norm_gemm", o.fused_norm_gemm},
              {"fold_qkv_norm", o.fold_qkv_norm},
              {"fold_mlp_norm", o.fold_mlp_norm},
              {"fused_qk_norm_rope", o.fused_qk_norm_rope},
              {"fused_qk_norm_rope_tile_n", o.fused_qk_norm_rope_tile_n},
              {"fused_swiglu", o.fused_swiglu},
              {"bf16_gate_up", o.bf16_gate_up},
              {"programmatic_launch", o.programmatic_launch},
              {"programmatic_launch_few_rows", o.programmatic_launch_few_rows},
              {"pdl_early_reads", o.pdl_early_reads},
              {"stage_o_weights", o.stage_o_weights},
              {"stage_o_batch_rounds", o.stage_o_batch_rounds},
              {"early_residual_reads", o.early_residual_reads},
              {"input_norm_trigger", engine::norm_trigger_name(o.input_norm_trigger)},
              {"post_norm_trigger", engine::norm_trigger_name(o.post_norm_trigger)},
              {"wgmma_gemm", o.wgmma_gemm},
              {"wgmma_min_block_k", o.wgmma_min_block_k.value_or(-1)},  // (the backend sets it)
              {"wgmma_stage_k", o.wgmma_stage_k},
              {"stream_gemm", o.stream_gemm},
              {"stream_gemm_min_fill", o.stream_gemm_min_fill},
              {"stream_gemm_split", o.stream_gemm_split},
              {"stream_dynamic_share", o.stream_dynamic_share},
              {"stream_dynamic_min_tiles", o.stream_dynamic_min_tiles},
              {"masked_rows_only", o.masked_rows_only}};
          nlohmann::json gemms = nlohmann::json::array();
          for (const auto& g : cuda->gemm_choices())
            gemms.push_back({{"rows", g.rows},
                             {"in", g.in},
                             {"out", g.out},
                             {"accumulate", g.accumulate},
                             {"bf16_out", g.bf16_out},
                             {"candidates", g.candidates},
                             {"same_bits", g.same_bits},
                             {"chosen", g.chosen},
                             {"algo_id", g.algo_id},
                             {"tile_id", g.tile_id},
                             {"splitk", g.splitk},
                             {"stages_id", g.stages_id},
                             {"cluster_shape_id", g.cluster_shape_id},
                             {"heuristic_us", g.heuristic_us},
                             {"chosen_us", g.chosen_us},
                             {"fastest_us", g.fastest_us},
                             {"skinny", g.skinny},
                             {"skinny_n_tiles", g.skinny_n_tiles}});
          record["gemm_choices"] = gemms;
          record["gemm_tune_seconds"] = cuda->gemm_tune_seconds();
          record["passes"] = st.passes;
          record["graph_replays"] = st.graph_replays;
          record["graph_captures"] = st.graph_captures;  // in the timed run (0: none new)
          record["warmup_graph_captures"] = warmup_stats.graph_captures;
          record["deep_attention_passes"] = st.deep_attention_passes;
          record["paired_attention_passes"] = st.paired_attention_passes;
          record["deep_paired_attention_passes"] = st.deep_paired_attention_passes;
          // (in the graphs captured for this configuration, by the warm-up or the timed run)
          record["early_start_edges"] = st.early_start_edges + warmup_stats.early_start_edges;
          // GEMM launches on the streaming kernel, in the graphs captured for this configuration
          record["stream_gemms"] = st.stream_gemms + warmup_stats.stream_gemms;
          // o and down launches reading the residual before their wait, likewise
          record["early_residual_gemms"] =
              st.early_residual_gemms + warmup_stats.early_residual_gemms;
          // o launches staging their weight share before their wait, likewise
          record["staged_o_gemms"] = st.staged_o_gemms + warmup_stats.staged_o_gemms;
          // streaming launches with the dynamic tail, likewise
          record["dynamic_tail_gemms"] = st.dynamic_tail_gemms + warmup_stats.dynamic_tail_gemms;
          // RMSNorms folded into wgmma GEMMs, in the graphs captured for this configuration
          record["folded_norms"] = st.folded_norms + warmup_stats.folded_norms;
          // qkv GEMMs with the q/k norm + RoPE epilogue, likewise
          record["fused_qk_norm_rope_gemms"] =
              st.fused_qk_norm_rope_gemms + warmup_stats.fused_qk_norm_rope_gemms;
          record["rows"] = st.rows;
          record["padded_rows"] = st.padded_rows;
          record["block_rows"] = st.block_rows;  // rows given logits (--no-masked-rows-only: all)
          record["bytes"] = st.bytes;
          record["flops"] = st.flops;
          record["kv_positions_read"] = st.kv_positions_read;
          // Host share: the part of the run during which the GPU had no pass to run.
          record["device_seconds"] = st.device_seconds;
          const double host_share = seconds > 0 ? 1.0 - st.device_seconds / seconds : 0.0;
          record["host_share"] = host_share;
          // Where the host's time went (CudaForwardStats::host_*_seconds); the rest of the run's
          // wall time is the decoding logic and scheduling around the backend.
          const double caller_seconds =
              seconds - (st.host_prepare_seconds + st.host_enqueue_seconds + st.host_wait_seconds +
                         st.host_finish_seconds);
          record["host_seconds"] = {{"prepare", st.host_prepare_seconds},
                                    {"enqueue", st.host_enqueue_seconds},
                                    {"wait", st.host_wait_seconds},
                                    {"finish", st.host_finish_seconds},
                                    {"caller", caller_seconds}};
          if (st.floor_seconds > 0) {
            record["floor_seconds"] = st.floor_seconds;
            record["time_over_floor"] = seconds / st.floor_seconds;
            floor_text = fmt::format(", floor {:.3f} s, {:.2f}x the floor", st.floor_seconds,
                                     seconds / st.floor_seconds);
          }
          if (st.serial_bound_seconds > 0) {
            record["serial_bound_seconds"] = st.serial_bound_seconds;
            record["time_over_serial_bound"] = seconds / st.serial_bound_seconds;
            floor_text += fmt::format(", {:.2f}x the serial bound ({:.2f}x the floor)",
                                      seconds / st.serial_bound_seconds,
                                      st.serial_bound_seconds / st.floor_seconds);
          }
          if (st.sustained_floor_seconds > 0) {
            record["sustained_floor_seconds"] = st.sustained_floor_seconds;
            record["time_over_sustained_floor"] = seconds / st.sustained_floor_seconds;
            floor_text += fmt::format(", {:.2f}x the floor at the sustained GEMM rate",
                                      seconds / st.sustained_floor_seconds);
          }
          const double per_forward =
              1e6 / static_cast<double>(std::max<std::int64_t>(1, st.forwards));
          floor_text += fmt::format(
              ", host share {:.1f}% (per forward: prepare {:.1f} us, enqueue {:.1f} us, caller "
              "{:.1f} us)",
              100.0 * host_share, per_forward * st.host_prepare_seconds,
              per_forward * st.host_enqueue_seconds, per_forward * caller_seconds);
        }
#endif
        if (forwards == 0) forwards = schedule_stats.forwards;  // cpu
        floor_text += fmt::format(", at most {} sequences at once", schedule_stats.peak_active);
        if (schedule_stats.preemptions > 0)
          floor_text += fmt::format(", {} preemptions ({} tokens recomputed)",
                                    schedule_stats.preemptions, schedule_stats.recomputed_tokens);
        record["forwards"] = forwards;
        record["forwards_per_second"] = static_cast<double>(forwards) / seconds;
        std::cerr << fmt::format(
            "dice engine bench: {} sequences x {} tokens, store {}: {:.3f} s, {:.1f} tokens/s, "
            "{:.1f} forwards/s{}\n",
            n, t, fused ? "fused" : "unfused", seconds, static_cast<double>(tokens) / seconds,
            static_cast<double>(forwards) / seconds, floor_text);
        std::cout << record.dump() << std::endl;
        if (json_file.is_open()) json_file << record.dump() << std::endl;
      }
}

void add_bench_command(CLI::App* engine) {
  auto args = std::make_shared<BenchArgs>();
  auto* bench = engine->add_subcommand(
      "bench",
      "decoding throughput (issue 6's benchmark): sequences x new tokens with the static schedule, "
      "tokens/s, forwards/s and, on the GPU, the floor from ceilings measured in the same run; one "
      "JSON record per configuration on stdout");
  bench->add_option("--model", args->model, "model folder")->required();
  bench->add_option("--sequences", args->sequences, "sequences decoded together (a list)")
      ->capture_default_str();
  bench->add_option("--new-tokens", args->new_tokens, "new tokens per sequence (a list)")
      ->capture_default_str();
  bench->add_option("--store", args->store, "fused, unfused or fused,unfused (store pass)")
      ->capture_default_str();
  bench->add_option("--prompt-length", args->prompt_length, "random prompt ids per sequence")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  bench->add_option("--block-length", args->block_length, "B (the static schedule takes B steps)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  bench
      ->add_option("--warmup-tokens", args->warmup_tokens,
                   "new tokens of the untimed warm-up run of each configuration")
      ->capture_default_str();
  bench->add_option("--max-active", args->max_active, "sequences at once (0: as many as fit)")
      ->capture_default_str();
  bench->add_option("--seed", args->seed, "seed of the random prompts")->capture_default_str();
  bench
      ->add_option("--temperature", args->sampling.temperature,
                   "0: greedy (the benchmark's default)")
      ->capture_default_str();
  bench->add_option("--top-k", args->sampling.top_k, "0: off")->capture_default_str();
  bench->add_option("--top-p", args->sampling.top_p, "1: off")->capture_default_str();
  bench
      ->add_option("--sampling-seed", args->sampling.seed,
                   "seed of the sampling RNG; sequence i draws with this + i")
      ->capture_default_str();
  add_reserve_whole_cache_flag(*bench, args->reserve_whole_cache);
  bench->add_flag("--no-ceilings", args->no_ceilings,
                  "cuda: skip measuring copy bandwidth and GEMM rate (no floor)");
  bench
      ->add_option("--sustained-gemm-seconds", args->sustained_gemm_seconds,
                   "cuda: also measure the GEMM rate sustained over this many seconds of "
                   "back-to-back GEMMs (the card's power limit lowers its clock under long "
                   "loads), and the floor at that rate; 0: not measured")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  bench->add_option("--json", args->json_out, "also append the records to this file");
  add_backend_options(bench, args->backend);
  bench->callback([args] { run_bench(*args); });
}

}  // namespace

void add_engine_command(CLI::App& app) {
  auto* engine = app.add_subcommand("engine", "engine tools (for tests and comparisons)");
  engine->require_subcommand(1);
  auto args = std::make_shared<LogitsArgs>();
  auto* logits = engine->add_subcommand(
      "logits",
      "teacher-forced logits of the token ids on stdin, block by block as decoding computes them; "
      "rows from floor(P/B)*B on, written to --out as raw little-endian float32 [rows, vocab]");
  logits->add_option("--model", args->model, "model folder")->required();
  logits->add_option("--out", args->out, "file for the logits")->required();
  logits->add_option("--prompt-length", args->prompt_length,
                     "P: the first floor(P/B)*B ids are prefilled (default: all ids)");
  logits->add_option("--block-length", args->block_length, "B")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  logits->add_flag("!--no-fused-store", args->fused_store, "commit each block in its own forward");
  add_backend_options(logits, args->backend);
  logits->callback([args] { run_logits(*args); });
  add_bench_command(engine);
}

}  // namespace dice::cli
