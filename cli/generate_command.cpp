// `dice generate`: options and defaults; the work is dice::engine::generate on a backend.

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "dice/core/error.h"
#include "dice/engine/block_decoder.h"
#include "dice/engine/cpu_backend.h"
#include "dice/engine/prompt.h"
#include "dice/evaluator/problem.h"
#include "dice/model/checkpoint.h"
#include "dice/tokenizer/chat_template.h"
#include "dice/tokenizer/tokenizer.h"
#include "token_ids.h"

namespace dice::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct GenerateArgs {
  std::string model;
  std::string tokenizer;
  std::string prompt;
  std::string prompt_ids;
  std::string problem;
  std::string kernelbench;
  std::string prompt_template;
  std::string backend = "cpu";
  std::string strategy = "low_confidence_dynamic";
  std::string stop_ids = "151645,151643";
  std::int32_t vocab_limit = 0;
  bool no_chat_template = false;
  bool enable_thinking = false;
  bool json = false;
  int threads = 0;
  engine::GenerationOptions options;
};

/// The model folder's tokenizer if it has one, else the SDAR tokenizer beside the project.
std::string default_tokenizer(const std::string& model_dir) {
  const fs::path dir(model_dir);
  if (fs::exists(dir / "tokenizer.json") || fs::exists(dir / "vocab.json")) return model_dir;
  return (fs::path(DICE_SOURCE_DIR) / ".." / "shared" / "models" / "sdar" / "tokenizer")
      .lexically_normal()
      .string();
}

std::string user_message(const GenerateArgs& args) {
  if (!args.problem.empty()) {
    const auto problems = eval::load_problems("kernelbench:" + args.problem, args.kernelbench);
    if (problems.size() != 1)
      throw InputError(fmt::format("--problem {}: expected one problem, {} matched", args.problem,
                                   problems.size()));
    return engine::render_problem_prompt(args.prompt_template, problems.front().code);
  }
  return args.prompt;
}

json options_json(const GenerateArgs& args) {
  const auto& o = args.options;
  return {{"model", args.model},
          {"tokenizer", args.tokenizer},
          {"backend", args.backend},
          {"threads", args.threads},
          {"block_length", o.block_length},
          {"steps", o.steps},
          {"strategy", engine::strategy_name(o.remasking.strategy)},
          {"threshold", o.remasking.threshold},
          {"entropy_bound", o.remasking.entropy_bound},
          {"temperature", o.sampling.temperature},
          {"top_k", o.sampling.top_k},
          {"top_p", o.sampling.top_p},
          {"seed", o.sampling.seed},
          {"max_new_tokens", o.max_new_tokens},
          {"stop_ids", o.stop_ids},
          {"mask_id", o.sampling.mask_id},
          {"vocab_limit", o.sampling.vocab_limit},
          {"fused_store", o.fused_store},
          {"chat_template", !args.no_chat_template},
          {"enable_thinking", args.enable_thinking},
          {"problem", args.problem}};
}

void run_generate(GenerateArgs& args) {
  using Clock = std::chrono::steady_clock;
  if (args.backend == "cuda")
    throw InputError("--backend cuda: the CUDA backend is not built yet (issue 6); use cpu");
  if (args.backend != "cpu")
    throw InputError(fmt::format("--backend {}: expected cpu (or, later, cuda)", args.backend));
  const int sources = !args.prompt.empty() + !args.problem.empty() + !args.prompt_ids.empty();
  if (sources != 1)
    throw InputError("give exactly one of --prompt TEXT, --problem ID (e.g. L1/19), --prompt-ids");
  const auto strategy = engine::parse_strategy(args.strategy);
  if (!strategy)
    throw InputError(fmt::format(
        "--strategy {}: expected sequential, low_confidence_static, low_confidence_dynamic or "
        "entropy_bounded",
        args.strategy));
  args.options.remasking.strategy = *strategy;
  args.options.stop_ids = parse_token_ids(args.stop_ids, "--stop-ids");
  if (args.tokenizer.empty()) args.tokenizer = default_tokenizer(args.model);

  const auto load_start = Clock::now();
  const auto tokenizer = tokenizer::Tokenizer::load(args.tokenizer);
  std::vector<std::int32_t> prompt_ids;
  if (!args.prompt_ids.empty()) {
    prompt_ids = parse_token_ids(args.prompt_ids, "--prompt-ids");
  } else {
    std::string text = user_message(args);
    if (!args.no_chat_template) {
      const std::vector<tokenizer::ChatMessage> messages{{.role = "user", .content = text}};
      text = tokenizer::apply_chat_template(messages, true, args.enable_thinking);
    }
    prompt_ids = tokenizer.encode(text);
  }
  std::unique_ptr<engine::CpuBackend> backend;
  {
    const auto checkpoint = model::Checkpoint::open(args.model);  // unmapped after the copy
    args.options.sampling.mask_id = checkpoint.config().mask_token_id;
    backend =
        std::make_unique<engine::CpuBackend>(engine::CpuWeights::from_checkpoint(checkpoint),
                                             engine::CpuBackendOptions{.threads = args.threads});
  }
  args.options.sampling.vocab_limit =
      args.vocab_limit > 0 ? args.vocab_limit : tokenizer.vocab_size();
  args.threads = backend->threads();
  const double load_seconds = std::chrono::duration<double>(Clock::now() - load_start).count();

  tokenizer::StreamingDecoder stream(tokenizer, true);
  const std::vector<engine::GenerationRequest> requests{{prompt_ids, args.options}};
  const auto on_output = [&](std::size_t, std::span<const std::int32_t> tokens) {
    if (args.json) return;
    for (const std::int32_t id : tokens) std::cout << stream.push(id);
    std::cout << std::flush;
  };
  const auto result = engine::generate(*backend, requests, on_output).at(0);
  if (!args.json) std::cout << stream.finish() << "\n";

  std::vector<std::int32_t> text_ids = result.output_ids;
  if (result.stop_reason == engine::StopReason::kStopId && !text_ids.empty()) text_ids.pop_back();
  const double tokens_per_second =
      result.seconds > 0 ? static_cast<double>(result.output_ids.size()) / result.seconds : 0.0;
  if (args.json) {
    json trace_step = json::array(), trace_block = json::array(), trace_forward = json::array();
    for (const auto& t : result.trace) {
      trace_step.push_back(t.step);
      trace_block.push_back(t.block);
      trace_forward.push_back(t.forward);
    }
    const auto& c = result.counts;
    const json record{
        {"prompt_ids", result.prompt_ids},
        {"output_ids", result.output_ids},
        {"text", tokenizer.decode(text_ids)},
        {"trace", {{"step", trace_step}, {"block", trace_block}, {"forward", trace_forward}}},
        {"stop_reason", engine::stop_reason_name(result.stop_reason)},
        {"counts",
         {{"prompt_tokens", result.prompt_ids.size()},
          {"output_tokens", result.output_ids.size()},
          {"forwards", c.forwards},
          {"denoising_steps", c.denoising_steps},
          {"store_passes", c.store_passes},
          {"blocks", c.blocks},
          {"committed_tokens", c.committed_tokens},
          {"prefill_tokens", c.prefill_tokens}}},
        {"timings",
         {{"load_seconds", load_seconds},
          {"generate_seconds", result.seconds},
          {"tokens_per_second", tokens_per_second}}},
        {"options", options_json(args)}};
    std::cout << record.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
  std::cerr << fmt::format(
      "dice generate: {} tokens in {:.2f} s ({:.2f} tokens/s), {} forwards, stop: {}; model "
      "loaded in {:.1f} s\n",
      result.output_ids.size(), result.seconds, tokens_per_second, result.counts.forwards,
      engine::stop_reason_name(result.stop_reason), load_seconds);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand(
      "generate", "generate text (or a kernel for a KernelBench problem) with an SDAR/DICE model");
  cmd->add_option("--model", args->model, "model folder (config.json + safetensors)")->required();
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer folder (default: the model folder if it has one, else "
                  "../shared/models/sdar/tokenizer)");
  cmd->add_option("--prompt", args->prompt, "the user message");
  cmd->add_option("--problem", args->problem,
                  "a KernelBench problem (L1/19): ask for a ModelNew with custom CUDA kernels");
  cmd->add_option("--prompt-ids", args->prompt_ids,
                  "the prompt as token ids (comma or space separated), used as is");
  args->kernelbench =
      (fs::path(DICE_SOURCE_DIR) / ".." / "shared" / "data" / "kernelbench" / "problems.jsonl")
          .lexically_normal()
          .string();
  cmd->add_option("--kernelbench", args->kernelbench, "KernelBench problems as JSON Lines")
      ->capture_default_str();
  args->prompt_template =
      (fs::path(DICE_SOURCE_DIR) / "engine" / "prompts" / "kernelbench_oneshot.txt").string();
  cmd->add_option("--prompt-template", args->prompt_template,
                  "prompt template of --problem ({problem} is replaced by the problem's code)")
      ->capture_default_str();
  cmd->add_option("--backend", args->backend, "cpu (cuda: issue 6, not built yet)")
      ->capture_default_str();
  auto& o = args->options;
  cmd->add_option("--block-length", o.block_length, "tokens per block")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--steps", o.steps, "at most this many denoising steps per block")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--strategy", args->strategy,
                  "remasking: sequential, low_confidence_static, low_confidence_dynamic, "
                  "entropy_bounded")
      ->capture_default_str();
  cmd->add_option("--threshold", o.remasking.threshold,
                  "low_confidence_dynamic: unmask every position above this confidence")
      ->capture_default_str();
  cmd->add_option("--entropy-bound", o.remasking.entropy_bound,
                  "entropy_bounded: bound of the summed entropy (nats) of a step's positions")
      ->capture_default_str();
  cmd->add_option("--temperature", o.sampling.temperature, "0: greedy")->capture_default_str();
  cmd->add_option("--top-k", o.sampling.top_k, "0: off")->capture_default_str();
  cmd->add_option("--top-p", o.sampling.top_p, "1: off")->capture_default_str();
  cmd->add_option("--seed", o.sampling.seed, "seed of the counter-based sampling RNG")
      ->capture_default_str();
  cmd->add_option("--max-new-tokens", o.max_new_tokens, "token limit of the output")
      ->capture_default_str();
  cmd->add_option("--stop-ids", args->stop_ids, "the output ends at the first of these ids")
      ->capture_default_str();
  cmd->add_option("--vocab-limit", args->vocab_limit,
                  "ids at or above it are never emitted (default: the tokenizer's vocabulary)");
  cmd->add_flag("!--no-fused-store", o.fused_store,
                "run each store pass as its own forward instead of fusing it with the next "
                "block's first denoising step");
  cmd->add_flag("--no-chat-template", args->no_chat_template,
                "use the prompt as is, without the chat template");
  cmd->add_flag("--enable-thinking", args->enable_thinking,
                "chat template with thinking enabled (default: disabled, as the paper)");
  cmd->add_flag("--json", args->json,
                "print one JSON record (ids, text, trace, stop reason, counts, timings, options) "
                "instead of streaming the text");
  cmd->add_option("--threads", args->threads, "CPU threads (0: every core)")->capture_default_str();
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace dice::cli
