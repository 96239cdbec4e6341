#include "dice/engine/batch.h"

#include <fmt/format.h>

#include "dice/core/error.h"

namespace dice::engine {

std::vector<BatchSample> generate_batch(Backend& backend, std::span<const BatchPrompt> prompts,
                                        const BatchOptions& options) {
  std::vector<GenerationRequest> requests;
  std::vector<BatchSample> samples;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const BatchPrompt& p = prompts[i];
    if (p.samples < 0)
      throw InputError(fmt::format("prompt {}: samples must be >= 0, got {}", i, p.samples));
    try {
      p.options.validate();
    } catch (const InputError& e) {
      throw InputError(fmt::format("prompt {}: {}", i, e.what()));
    }
    for (std::int32_t j = 0; j < p.samples; ++j) {
      GenerationRequest r{p.prompt_ids, p.options};
      r.options.sampling.seed = p.options.sampling.seed + static_cast<std::uint64_t>(j);
      requests.push_back(std::move(r));
      BatchSample s;
      s.prompt = i;
      s.sample = j;
      s.seed = requests.back().options.sampling.seed;
      samples.push_back(std::move(s));
    }
  }
  auto results = generate(backend, requests, {}, options.schedule);
  for (std::size_t k = 0; k < samples.size(); ++k) {
    samples[k].result = std::move(results[k]);
    if (options.decode) {
      std::span<const std::int32_t> ids = samples[k].result.output_ids;
      if (samples[k].result.stop_reason == StopReason::kStopId && !ids.empty())
        ids = ids.first(ids.size() - 1);
      samples[k].text = options.decode(ids);
    }
  }
  return samples;
}

}  // namespace dice::engine
