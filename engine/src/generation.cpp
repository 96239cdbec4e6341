#include "dice/engine/generation.h"

#include <fmt/format.h>

#include "dice/core/error.h"

namespace dice::engine {

void GenerationOptions::validate() const {
  const auto bad = [](std::string_view option, const std::string& what) {
    throw InputError(fmt::format("generation option {}: {}", option, what));
  };
  if (block_length < 1) bad("block_length", fmt::format("must be >= 1, got {}", block_length));
  if (steps < 1) bad("steps", fmt::format("must be >= 1, got {}", steps));
  if (max_new_tokens < 0)
    bad("max_new_tokens", fmt::format("must be >= 0, got {}", max_new_tokens));
  if (!(remasking.threshold >= 0 && remasking.threshold <= 1))
    bad("threshold", fmt::format("must be in [0, 1], got {}", remasking.threshold));
  if (!(remasking.entropy_bound > 0))
    bad("entropy_bound", fmt::format("must be > 0, got {}", remasking.entropy_bound));
  if (!(sampling.temperature >= 0))
    bad("temperature", fmt::format("must be >= 0, got {}", sampling.temperature));
  if (sampling.top_k < 0) bad("top_k", fmt::format("must be >= 0, got {}", sampling.top_k));
  if (!(sampling.top_p > 0 && sampling.top_p <= 1))
    bad("top_p", fmt::format("must be in (0, 1], got {}", sampling.top_p));
  if (sampling.vocab_limit < 1)
    bad("vocab_limit", fmt::format("must be >= 1, got {}", sampling.vocab_limit));
  if (sampling.mask_id < 0) bad("mask_id", fmt::format("must be >= 0, got {}", sampling.mask_id));
}

std::string_view stop_reason_name(StopReason reason) {
  return reason == StopReason::kStopId ? "stop" : "length";
}

}  // namespace dice::engine
