#pragma once
// Generators of `dice bench`: what turns a prompt into a model output. The engine (block
// diffusion on a Backend), an OpenAI-compatible endpoint (endpoint.h), or the oracle of the
// infilling self-check (the true middle). Each reports every sample as soon as it is finished, so
// evaluation overlaps generation.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dice/engine/backend.h"
#include "dice/engine/block_decoder.h"
#include "dice/engine/generation.h"
#include "dice/tokenizer/tokenizer.h"

namespace dice::generation {

/// One sample to generate.
struct SampleRequest {
  std::size_t index = 0;  ///< the caller's index, echoed back
  std::string message;    ///< the user message (the rendered prompt)
  std::uint64_t seed = 0;
  std::string oracle;  ///< the oracle generator's answer (infill --oracle-middle)
};

/// One finished sample.
struct SampleOutput {
  std::string prompt;       ///< what the model was given (chat-templated text for the engine)
  std::string text;         ///< the output (stop id left out)
  std::string stop_reason;  ///< "stop", "length" (token limit), or the endpoint's finish_reason
  std::int64_t output_tokens = 0;
  double seconds = 0;  ///< from the start of its batch (engine) or its request (endpoint)
  std::string error;   ///< set when the generator gave up on this sample
};

/// Called once per request, as soon as it is finished; calls are serialized (never concurrent).
using SampleCallback = std::function<void(const SampleRequest&, SampleOutput)>;

/// A source of model outputs.
class Generator {
 public:
  virtual ~Generator() = default;
  /// Generates every request and reports each through `done` (in any order). Throws only for
  /// errors that concern every sample (a failed backend); per-sample failures are reported with
  /// SampleOutput::error.
  virtual void generate(std::span<const SampleRequest> requests, const SampleCallback& done) = 0;
  /// One line for logs ("engine: cpu, 2 threads").
  virtual std::string describe() const = 0;
};

/// Options of the engine generator.
struct EngineGeneratorOptions {
  engine::GenerationOptions generation;  ///< sampling.seed is replaced by each request's seed
  bool chat_template = true;
  bool enable_thinking = false;
  /// Sequences decoded at once (max_active, 0: as many as the backend's KV cache holds; finished
  /// ones are replaced by waiting requests) and how KV cache room is found (admission: the
  /// default grows and preempts), passed to engine::generate.
  engine::ScheduleOptions schedule;
};

/// Block-diffusion generation on `backend` (system.md §2), many samples per batched forward
/// (engine::generate, the loop under engine::generate_batch, used directly so that each sample is
/// reported the moment its output is decided; sample seeds follow generate_batch: seed + j);
/// prompts wrapped in the tokenizer's chat template (thinking disabled unless asked). The
/// backend and tokenizer must outlive the generator.
class EngineGenerator final : public Generator {
 public:
  EngineGenerator(engine::Backend& backend, const tokenizer::Tokenizer& tokenizer,
                  EngineGeneratorOptions options, std::string description);
  void generate(std::span<const SampleRequest> requests, const SampleCallback& done) override;
  std::string describe() const override { return description_; }

 private:
  engine::Backend& backend_;
  const tokenizer::Tokenizer& tokenizer_;
  EngineGeneratorOptions options_;
  std::string description_;
};

/// Answers every request with its `oracle` text at once (the infilling self-check).
class OracleGenerator final : public Generator {
 public:
  void generate(std::span<const SampleRequest> requests, const SampleCallback& done) override;
  std::string describe() const override { return "oracle: the true middle"; }
};

}  // namespace dice::generation
