#include "dice/engine/remasking.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "dice/core/error.h"

namespace dice::engine {

namespace {

constexpr std::array<std::pair<RemaskingStrategy, std::string_view>, 4> kNames{{
    {RemaskingStrategy::kSequential, "sequential"},
    {RemaskingStrategy::kLowConfidenceStatic, "low_confidence_static"},
    {RemaskingStrategy::kLowConfidenceDynamic, "low_confidence_dynamic"},
    {RemaskingStrategy::kEntropyBounded, "entropy_bounded"},
}};

/// Fills `order` with the masked positions ordered by `key` ascending, ties by position (a sort
/// on (key, position): the stable order, with no merge buffer to allocate).
template <typename Key>
void masked_by(std::span<const bool> masked, Key key, std::vector<std::int32_t>& order) {
  order.clear();
  for (std::size_t i = 0; i < masked.size(); ++i)
    if (masked[i]) order.push_back(static_cast<std::int32_t>(i));
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return std::pair(key(a), a) < std::pair(key(b), b);
  });
}

}  // namespace

std::string_view strategy_name(RemaskingStrategy strategy) {
  for (const auto& [s, name] : kNames)
    if (s == strategy) return name;
  return "unknown";
}

std::optional<RemaskingStrategy> parse_strategy(std::string_view name) {
  for (const auto& [s, n] : kNames)
    if (n == name) return s;
  return std::nullopt;
}

std::vector<std::int32_t> transfer_schedule(std::int32_t masked, std::int32_t steps) {
  if (masked < 0 || steps < 1)
    throw Error(fmt::format("transfer schedule: need masked >= 0 and steps >= 1, got {} and {}",
                            masked, steps));
  std::vector<std::int32_t> schedule(static_cast<std::size_t>(steps), masked / steps);
  for (std::int32_t s = 0; s < masked % steps; ++s) ++schedule[static_cast<std::size_t>(s)];
  return schedule;
}

std::vector<std::int32_t> select_unmask(const RemaskingOptions& options,
                                        std::span<const bool> masked,
                                        std::span<const Proposal> proposals, std::int32_t k,
                                        bool last_step) {
  std::vector<std::int32_t> chosen, order;
  select_unmask(options, masked, proposals, k, last_step, chosen, order);
  return chosen;
}

void select_unmask(const RemaskingOptions& options, std::span<const bool> masked,
                   std::span<const Proposal> proposals, std::int32_t k, bool last_step,
                   std::vector<std::int32_t>& chosen, std::vector<std::int32_t>& order) {
  if (masked.size() != proposals.size())
    throw Error(fmt::format("select_unmask: {} mask flags but {} proposals", masked.size(),
                            proposals.size()));
  chosen.clear();
  const auto remaining = static_cast<std::int32_t>(std::count(masked.begin(), masked.end(), true));
  if (remaining == 0) return;
  if (last_step) k = remaining;
  k = std::clamp(k, 1, remaining);
  const auto conf = [&](std::int32_t i) {
    return proposals[static_cast<std::size_t>(i)].confidence;
  };
  switch (options.strategy) {
    case RemaskingStrategy::kSequential: {
      for (std::size_t i = 0; i < masked.size() && std::ssize(chosen) < k; ++i)
        if (masked[i]) chosen.push_back(static_cast<std::int32_t>(i));
      break;
    }
    case RemaskingStrategy::kLowConfidenceStatic: {
      masked_by(
          masked, [&](std::int32_t i) { return -conf(i); }, order);
      chosen.assign(order.begin(), order.begin() + k);
      break;
    }
    case RemaskingStrategy::kLowConfidenceDynamic: {
      for (std::size_t i = 0; i < masked.size(); ++i)
        if (masked[i] && proposals[i].confidence > options.threshold)
          chosen.push_back(static_cast<std::int32_t>(i));
      if (std::ssize(chosen) < k) {
        masked_by(
            masked, [&](std::int32_t i) { return -conf(i); }, order);
        chosen.assign(order.begin(), order.begin() + k);
      }
      break;
    }
    case RemaskingStrategy::kEntropyBounded: {
      masked_by(
          masked, [&](std::int32_t i) { return proposals[static_cast<std::size_t>(i)].entropy; },
          order);
      double running = 0;
      for (std::size_t j = 0; j < order.size(); ++j) {
        running += proposals[static_cast<std::size_t>(order[j])].entropy;
        if (j > 0 && running >= options.entropy_bound) break;
        chosen.push_back(order[j]);
      }
      if (last_step) chosen.assign(order.begin(), order.end());
      break;
    }
  }
  std::sort(chosen.begin(), chosen.end());
}

}  // namespace dice::engine
