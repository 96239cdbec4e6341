// `dice generate`: options and defaults; the work is dice::engine::generate on a backend.

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend_options.h"
#include "commands.h"
#include "decoding_options.h"
#include "defaults.h"
#include "dice/core/error.h"
#include "dice/engine/batch.h"
#include "dice/engine/block_decoder.h"
#include "dice/engine/prompt.h"
#include "dice/evaluator/problem.h"
#include "dice/generation/prompts.h"
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
  std::string batch;
  std::string out;
  std::int32_t samples = 1;
  BackendArgs backend;
  DecodingArgs decoding;
  bool json = false;
  engine::GenerationOptions options;  ///< `decoding` resolved for the loaded model
};

std::string problem_message(const GenerateArgs& args, const std::string& problem) {
  const auto problems = eval::load_problems("kernelbench:" + problem, args.kernelbench);
  if (problems.size() != 1)
    throw InputError(
        fmt::format("--problem {}: expected one problem, {} matched", problem, problems.size()));
  return engine::render_problem_prompt(args.prompt_template, problems.front().code);
}

std::string user_message(const GenerateArgs& args) {
  if (!args.problem.empty()) return problem_message(args, args.problem);
  return args.prompt;
}

/// A user message through the chat template (unless --no-chat-template), encoded.
std::vector<std::int32_t> encode_message(const GenerateArgs& args,
                                         const tokenizer::Tokenizer& tokenizer, std::string text) {
  if (!args.decoding.no_chat_template) {
    const std::vector<tokenizer::ChatMessage> messages{{.role = "user", .content = text}};
    text = tokenizer::apply_chat_template(messages, true, args.decoding.enable_thinking);
  }
  return tokenizer.encode(text);
}

json options_json(const GenerateArgs& args) {
  const auto& o = args.options;
  return {{"model", args.model},
          {"tokenizer", args.tokenizer},
          {"backend", args.backend.backend},
          {"threads", args.backend.threads},
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
          {"chat_template", !args.decoding.no_chat_template},
          {"enable_thinking", args.decoding.enable_thinking},
          {"problem", args.problem}};
}

json trace_json(const engine::GenerationResult& result) {
  json step = json::array(), block = json::array(), forward = json::array();
  for (const auto& t : result.trace) {
    step.push_back(t.step);
    block.push_back(t.block);
    forward.push_back(t.forward);
  }
  return {{"step", step}, {"block", block}, {"forward", forward}};
}

json counts_json(const engine::GenerationResult& result) {
  const auto& c = result.counts;
  return {{"prompt_tokens", result.prompt_ids.size()},
          {"output_tokens", result.output_ids.size()},
          {"forwards", c.forwards},
          {"denoising_steps", c.denoising_steps},
          {"store_passes", c.store_passes},
          {"blocks", c.blocks},
          {"committed_tokens", c.committed_tokens},
          {"prefill_tokens", c.prefill_tokens},
          {"preemptions", c.preemptions},
          {"recomputed_tokens", c.recomputed_tokens}};
}

/// Decoding options of one --batch record: the command line's, overridden by the record's keys.
engine::GenerationOptions record_options(const GenerateArgs& args, const json& record) {
  engine::GenerationOptions o = args.options;
  const auto get = [&](const char* key, auto& value) {
    if (record.contains(key))
      value = record.at(key).get<std::remove_reference_t<decltype(value)>>();
  };
  get("max_new_tokens", o.max_new_tokens);
  get("temperature", o.sampling.temperature);
  get("top_k", o.sampling.top_k);
  get("top_p", o.sampling.top_p);
  get("seed", o.sampling.seed);
  get("steps", o.steps);
  get("block_length", o.block_length);
  get("threshold", o.remasking.threshold);
  get("entropy_bound", o.remasking.entropy_bound);
  if (record.contains("strategy")) {
    const auto name = record.at("strategy").get<std::string>();
    const auto strategy = engine::parse_strategy(name);
    if (!strategy) throw InputError(fmt::format("strategy {}: unknown", name));
    o.remasking.strategy = *strategy;
  }
  if (record.contains("stop_ids"))
    o.stop_ids = record.at("stop_ids").get<std::vector<std::int32_t>>();
  return o;
}

/// Reads --batch: one JSON object per line with exactly one of "prompt" (text, chat-templated
/// unless --no-chat-template), "messages" ([{role, content}], chat-templated), "prompt_ids" or
/// "problem" (a KernelBench id); optional "samples" and option overrides (record_options).
std::vector<engine::BatchPrompt> read_batch(const GenerateArgs& args,
                                            const tokenizer::Tokenizer& tokenizer,
                                            std::vector<json>& ids) {
  std::ifstream in(args.batch);
  if (!in) throw InputError(fmt::format("--batch {}: cannot read", args.batch));
  std::vector<engine::BatchPrompt> prompts;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("--batch {} line {}", args.batch, number);
    try {
      const json record = json::parse(line);
      if (!record.is_object()) throw InputError("not a JSON object");
      const int sources = record.contains("prompt") + record.contains("messages") +
                          record.contains("prompt_ids") + record.contains("problem");
      if (sources != 1)
        throw InputError(
            "give exactly one of \"prompt\", \"messages\", \"prompt_ids\", \"problem\"");
      engine::BatchPrompt p;
      if (record.contains("prompt_ids")) {
        p.prompt_ids = record.at("prompt_ids").get<std::vector<std::int32_t>>();
      } else if (record.contains("messages")) {
        std::vector<tokenizer::ChatMessage> messages;
        for (const auto& m : record.at("messages"))
          messages.push_back({.role = m.at("role").get<std::string>(),
                              .content = m.at("content").get<std::string>()});
        p.prompt_ids = tokenizer.encode(
            tokenizer::apply_chat_template(messages, true, args.decoding.enable_thinking));
      } else if (record.contains("problem")) {
        p.prompt_ids = encode_message(
            args, tokenizer, problem_message(args, record.at("problem").get<std::string>()));
      } else {
        p.prompt_ids = encode_message(args, tokenizer, record.at("prompt").get<std::string>());
      }
      p.options = record_options(args, record);
      p.samples = record.value("samples", args.samples);
      p.options.validate();
      if (p.samples < 0) throw InputError(fmt::format("samples {} < 0", p.samples));
      for (const std::int32_t id : p.prompt_ids)
        if (id == p.options.sampling.mask_id)
          throw InputError(fmt::format("the prompt contains the mask id {}", id));
      ids.push_back(record.contains("id") ? record.at("id") : json(prompts.size()));
      prompts.push_back(std::move(p));
    } catch (const json::exception& e) {
      throw InputError(fmt::format("{}: {}", where, e.what()));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", where, e.what()));
    }
  }
  return prompts;
}

void run_batch(GenerateArgs& args, const tokenizer::Tokenizer& tokenizer, engine::Backend& backend,
               const std::string& description) {
  using Clock = std::chrono::steady_clock;
  std::vector<json> ids;
  const auto prompts = read_batch(args, tokenizer, ids);
  std::ofstream file;
  if (!args.out.empty()) {
    file.open(args.out);
    if (!file) throw InputError(fmt::format("--out {}: cannot write", args.out));
  }
  std::ostream& out = args.out.empty() ? std::cout : file;
  std::cerr << fmt::format("dice generate: {} prompts on {}\n", prompts.size(), description);
  engine::BatchOptions options;
  options.schedule = args.decoding.schedule();
  options.decode = [&](std::span<const std::int32_t> output) { return tokenizer.decode(output); };
  const auto start = Clock::now();
  const auto samples = engine::generate_batch(backend, prompts, options);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::int64_t tokens = 0;
  for (const auto& s : samples) {
    const auto& r = s.result;
    tokens += std::ssize(r.output_ids);
    const json record{{"id", ids[s.prompt]},
                      {"prompt_index", s.prompt},
                      {"sample", s.sample},
                      {"seed", s.seed},
                      {"prompt_ids", r.prompt_ids},
                      {"output_ids", r.output_ids},
                      {"text", s.text},
                      {"trace", trace_json(r)},
                      {"stop_reason", engine::stop_reason_name(r.stop_reason)},
                      {"counts", counts_json(r)},
                      {"seconds", r.seconds}};
    out << record.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
  out.flush();
  if (!out) throw Error(fmt::format("--out {}: write failed", args.out));
  std::cerr << fmt::format("dice generate: {} samples, {} tokens in {:.2f} s ({:.1f} tokens/s)\n",
                           samples.size(), tokens, seconds,
                           seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0);
}

void run_generate(GenerateArgs& args) {
  using Clock = std::chrono::steady_clock;
  const int sources =
      !args.prompt.empty() + !args.problem.empty() + !args.prompt_ids.empty() + !args.batch.empty();
  if (sources != 1)
    throw InputError(
        "give exactly one of --prompt TEXT, --problem ID (e.g. L1/19), --prompt-ids, --batch "
        "FILE");
  args.options = resolve(args.decoding);  // a bad --strategy or --stop-ids fails before loading
  if (args.tokenizer.empty()) args.tokenizer = default_tokenizer(args.model);
  resolve_backend(args.backend);  // a bad --backend fails before anything is loaded

  const auto load_start = Clock::now();
  const auto tokenizer = tokenizer::Tokenizer::load(args.tokenizer);
  std::vector<std::int32_t> prompt_ids;
  if (!args.prompt_ids.empty())
    prompt_ids = parse_token_ids(args.prompt_ids, "--prompt-ids");
  else if (args.batch.empty())
    prompt_ids = encode_message(args, tokenizer, user_message(args));
  std::unique_ptr<engine::Backend> backend;
  std::string description;
  {
    const auto checkpoint = model::Checkpoint::open(args.model);  // unmapped after the copy
    args.options =
        resolve(args.decoding, checkpoint.config().mask_token_id, tokenizer.vocab_size());
    backend = make_backend(args.backend, checkpoint, &description);
  }
  const double load_seconds = std::chrono::duration<double>(Clock::now() - load_start).count();
  if (!args.batch.empty()) return run_batch(args, tokenizer, *backend, description);

  tokenizer::StreamingDecoder stream(tokenizer, true);
  const std::vector<engine::GenerationRequest> requests{{prompt_ids, args.options}};
  const auto on_output = [&](std::size_t, std::span<const std::int32_t> tokens) {
    if (args.json) return;
    for (const std::int32_t id : tokens) std::cout << stream.push(id);
    std::cout << std::flush;
  };
  const auto result =
      engine::generate(*backend, requests, on_output, args.decoding.schedule()).at(0);
  if (!args.json) std::cout << stream.finish() << "\n";

  std::vector<std::int32_t> text_ids = result.output_ids;
  if (result.stop_reason == engine::StopReason::kStopId && !text_ids.empty()) text_ids.pop_back();
  const double tokens_per_second =
      result.seconds > 0 ? static_cast<double>(result.output_ids.size()) / result.seconds : 0.0;
  if (args.json) {
    json options = options_json(args);
    options["backend"] = description;
    const json record{{"prompt_ids", result.prompt_ids},
                      {"output_ids", result.output_ids},
                      {"text", tokenizer.decode(text_ids)},
                      {"trace", trace_json(result)},
                      {"stop_reason", engine::stop_reason_name(result.stop_reason)},
                      {"counts", counts_json(result)},
                      {"timings",
                       {{"load_seconds", load_seconds},
                        {"generate_seconds", result.seconds},
                        {"tokens_per_second", tokens_per_second}}},
                      {"options", options}};
    std::cout << record.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
  std::cerr << fmt::format(
      "dice generate: {} tokens in {:.2f} s ({:.2f} tokens/s), {} forwards, stop: {}; model "
      "loaded in {:.1f} s; backend {}\n",
      result.output_ids.size(), result.seconds, tokens_per_second, result.counts.forwards,
      engine::stop_reason_name(result.stop_reason), load_seconds, description);
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
  args->kernelbench = default_kernelbench();
  cmd->add_option("--kernelbench", args->kernelbench,
                  "KernelBench problems as JSON Lines (env DICE_KERNELBENCH)")
      ->capture_default_str();
  args->prompt_template = (generation::default_prompt_dir() / "kernelbench_oneshot.txt").string();
  cmd->add_option("--prompt-template", args->prompt_template,
                  "prompt template of --problem ({problem} is replaced by the problem's code)")
      ->capture_default_str();
  cmd->add_option("--batch", args->batch,
                  "JSON Lines of prompts (\"prompt\", \"messages\", \"prompt_ids\" or "
                  "\"problem\"; optional \"id\", \"samples\" and option overrides): one "
                  "record per sample to --out");
  cmd->add_option("--samples", args->samples,
                  "--batch: samples per prompt (sample j draws with seed + j)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--out", args->out, "--batch: output JSON Lines file (default: stdout)");
  add_backend_options(cmd, args->backend);
  add_decoding_options(*cmd, args->decoding);
  cmd->add_flag("--json", args->json,
                "print one JSON record (ids, text, trace, stop reason, counts, timings, options) "
                "instead of streaming the text");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace dice::cli
