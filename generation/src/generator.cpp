#include "dice/generation/generator.h"

#include <algorithm>
#include <chrono>

#include "dice/engine/block_decoder.h"
#include "dice/tokenizer/chat_template.h"

namespace dice::generation {

using Clock = std::chrono::steady_clock;

EngineGenerator::EngineGenerator(engine::Backend& backend, const tokenizer::Tokenizer& tokenizer,
                                 EngineGeneratorOptions options, std::string description)
    : backend_(backend),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      description_(std::move(description)) {
  options_.generation.validate();
}

void EngineGenerator::generate(std::span<const SampleRequest> requests,
                               const SampleCallback& done) {
  const auto& stop_ids = options_.generation.stop_ids;
  std::vector<engine::GenerationRequest> gen;
  std::vector<std::string> prompts;
  for (const auto& r : requests) {
    std::string text = r.message;
    if (options_.chat_template) {
      const std::vector<tokenizer::ChatMessage> messages{{.role = "user", .content = text}};
      text = tokenizer::apply_chat_template(messages, true, options_.enable_thinking);
    }
    engine::GenerationRequest g{tokenizer_.encode(text), options_.generation};
    g.options.sampling.seed = r.seed;
    gen.push_back(std::move(g));
    prompts.push_back(std::move(text));
  }
  // A sample is reported as soon as its output is decided: its settled output ends with a stop
  // id or reaches the token limit (block_decoder.h), while the rest of the batch goes on.
  std::vector<std::vector<std::int32_t>> tokens(requests.size());
  std::vector<bool> reported(requests.size(), false);
  const auto start = Clock::now();
  const auto report = [&](std::size_t i, bool stopped) {
    reported[i] = true;
    std::vector<std::int32_t> ids = tokens[i];
    if (stopped && !ids.empty()) ids.pop_back();
    SampleOutput out;
    out.prompt = prompts[i];
    out.text = tokenizer_.decode(ids);
    out.stop_reason = stopped ? "stop" : "length";
    out.output_tokens = static_cast<std::int64_t>(tokens[i].size());
    out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    done(requests[i], std::move(out));
  };
  const auto on_output = [&](std::size_t i, std::span<const std::int32_t> new_tokens) {
    if (reported[i]) return;
    tokens[i].insert(tokens[i].end(), new_tokens.begin(), new_tokens.end());
    const bool stopped = !tokens[i].empty() && std::find(stop_ids.begin(), stop_ids.end(),
                                                         tokens[i].back()) != stop_ids.end();
    if (stopped ||
        static_cast<std::int64_t>(tokens[i].size()) >= options_.generation.max_new_tokens)
      report(i, stopped);
  };
  const auto results = engine::generate(backend_, gen, on_output, options_.schedule);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (reported[i]) continue;
    tokens[i] = results[i].output_ids;
    report(i, results[i].stop_reason == engine::StopReason::kStopId);
  }
}

void OracleGenerator::generate(std::span<const SampleRequest> requests,
                               const SampleCallback& done) {
  for (const auto& r : requests) {
    SampleOutput out;
    out.prompt = r.message;
    out.text = r.oracle;
    out.stop_reason = "oracle";
    done(r, std::move(out));
  }
}

}  // namespace dice::generation
