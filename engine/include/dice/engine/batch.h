#pragma once
// The batch interface for benchmarks and training (issue 6): prompts x samples per prompt through
// one backend, every sample its own sequence of one continuously refilled batch (generate()).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "dice/engine/backend.h"
#include "dice/engine/block_decoder.h"
#include "dice/engine/generation.h"

namespace dice::engine {

/// One prompt (already templated and encoded) and how many samples to draw from it.
struct BatchPrompt {
  std::vector<std::int32_t> prompt_ids;
  GenerationOptions options;
  std::int32_t samples = 1;
};

/// One finished sample.
struct BatchSample {
  std::size_t prompt = 0;  ///< index into the prompts
  std::int32_t sample = 0;
  std::uint64_t seed = 0;  ///< the sampling seed it was drawn with
  GenerationResult result;
  std::string text;  ///< output decoded by BatchOptions::decode (stop id left out), if given
};

/// Options of generate_batch.
struct BatchOptions {
  /// Sequence ids, sequences at once and KV cache admission, passed to generate().
  ScheduleOptions schedule;
  /// Turns output ids into text (the tokenizer's decode); none: texts stay empty.
  std::function<std::string(std::span<const std::int32_t>)> decode;
};

/// Draws prompts[i].samples samples of every prompt; sample j of prompt i uses seed
/// prompts[i].options.sampling.seed + j, so an RL group's samples differ and each is reproducible
/// on its own, whatever else shares the batch. Results in prompt order, then sample order.
/// Throws dice::InputError for a prompt with samples < 0 or invalid options (naming the prompt),
/// and what generate() throws.
std::vector<BatchSample> generate_batch(Backend& backend, std::span<const BatchPrompt> prompts,
                                        const BatchOptions& options = {});

}  // namespace dice::engine
