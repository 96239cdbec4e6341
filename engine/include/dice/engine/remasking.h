#pragma once
// Remasking strategies: which masked positions of a block a denoising step unmasks, and the
// transfer schedule k per step (system.md §2 step 2).

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "dice/engine/sampling.h"

namespace dice::engine {

/// The four strategies of SDAR (system.md §2).
enum class RemaskingStrategy {
  kSequential,            ///< the first k masked positions, left to right
  kLowConfidenceStatic,   ///< the k most confident masked positions
  kLowConfidenceDynamic,  ///< every masked position with confidence > threshold, at least k
  kEntropyBounded,        ///< lowest-entropy positions while their entropy sum stays < bound
};

/// "sequential", "low_confidence_static", "low_confidence_dynamic", "entropy_bounded".
std::string_view strategy_name(RemaskingStrategy strategy);
/// The strategy called `name` (names as above); std::nullopt for anything else.
std::optional<RemaskingStrategy> parse_strategy(std::string_view name);

/// A strategy and its parameter.
struct RemaskingOptions {
  RemaskingStrategy strategy = RemaskingStrategy::kLowConfidenceDynamic;
  double threshold = 0.9;       ///< low_confidence_dynamic: confidence must exceed it
  double entropy_bound = 0.35;  ///< entropy_bounded: bound of the entropy sum (nats); the
                                ///< default is JetEngine's eb_threshold
};

/// Tokens to unmask at each denoising step of a block that starts with `masked` masked positions
/// and may take `steps` steps: masked // steps each, the remainder spread one each over the first
/// steps (so the schedule sums to `masked`; steps beyond `masked` get 0). Throws dice::Error if
/// masked < 0 or steps < 1.
std::vector<std::int32_t> transfer_schedule(std::int32_t masked, std::int32_t steps);

/// Block positions (indices into the block, ascending) to unmask at one step.
/// `masked[i]`: position i is still masked; `proposals[i]`: the step's proposal for position i
/// (same length). `k`: this step's entry of transfer_schedule. `last_step`: the last allowed step
/// of the block; then every masked position is unmasked, whatever the strategy (a strategy that
/// unmasked fewer than the schedule, e.g. entropy_bounded, still finishes the block in `steps`).
/// Ties in confidence or entropy go to the lower position. Every strategy unmasks at least one
/// position while one is masked (k is raised to 1 when the schedule says 0 but masks remain).
/// Throws dice::Error if the spans differ in length.
std::vector<std::int32_t> select_unmask(const RemaskingOptions& options,
                                        std::span<const bool> masked,
                                        std::span<const Proposal> proposals, std::int32_t k,
                                        bool last_step);

/// select_unmask into `chosen` (its contents replaced), with `order` as scratch: allocates
/// nothing once both hold a block's positions (the decoding loop's form: one call per sequence
/// and denoising step). The same result and errors.
void select_unmask(const RemaskingOptions& options, std::span<const bool> masked,
                   std::span<const Proposal> proposals, std::int32_t k, bool last_step,
                   std::vector<std::int32_t>& chosen, std::vector<std::int32_t>& order);

}  // namespace dice::engine
