#include "dice/engine/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "dice/core/error.h"

namespace dice::engine {

namespace {

constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;

void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t product = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(product >> 32);
  lo = static_cast<std::uint32_t>(product);
}

bool allowed(std::int64_t id, const SamplingParams& params) {
  return id < params.vocab_limit && id != params.mask_id;
}

}  // namespace

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    std::uint32_t hi0 = 0, lo0 = 0, hi1 = 0, lo1 = 0;
    mulhilo(kPhiloxM0, counter[0], hi0, lo0);
    mulhilo(kPhiloxM1, counter[2], hi1, lo1);
    counter = {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
  }
  return counter;
}

double philox_uniform(std::uint64_t seed, std::int64_t position, std::int32_t step) {
  const auto pos = static_cast<std::uint64_t>(position);
  const auto out =
      philox4x32_10({static_cast<std::uint32_t>(pos), static_cast<std::uint32_t>(pos >> 32),
                     static_cast<std::uint32_t>(step), 0u},
                    {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  return static_cast<double>(out[0]) * 0x1p-32;
}

Proposal propose(std::span<const float> logits, const SamplingParams& params, std::int64_t position,
                 std::int32_t step) {
  const auto vocab = static_cast<std::int64_t>(logits.size());
  const std::int64_t limit = std::min<std::int64_t>(vocab, params.vocab_limit);
  // Max over allowed ids (lowest id on ties): the greedy choice and the softmax shift.
  std::int64_t argmax = -1;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < limit; ++i) {
    if (!allowed(i, params)) continue;
    const float l = logits[static_cast<std::size_t>(i)];
    if (std::isnan(l))
      throw Error(fmt::format("sampling at position {}: logit of id {} is NaN", position, i));
    if (argmax < 0 || l > max_logit) {
      argmax = i;
      max_logit = l;
    }
  }
  if (argmax < 0 || std::isinf(max_logit))
    throw Error(fmt::format(
        "sampling at position {}: no allowed id with a finite logit (vocab rows {}, vocab limit "
        "{}, mask id {})",
        position, vocab, params.vocab_limit, params.mask_id));

  // Temperature-1 softmax over the allowed ids: confidence and entropy.
  const double m = max_logit;
  double sum = 0, weighted = 0;
  for (std::int64_t i = 0; i < limit; ++i) {
    if (!allowed(i, params)) continue;
    const double d = static_cast<double>(logits[static_cast<std::size_t>(i)]) - m;
    const double w = std::exp(d);
    sum += w;
    if (w > 0) weighted += w * d;  // an id at -inf contributes nothing (0 * -inf is NaN)
  }
  const double log_sum = std::log(sum);
  const auto finish = [&](std::int64_t token) {
    const double d = static_cast<double>(logits[static_cast<std::size_t>(token)]) - m;
    Proposal p;
    p.token = static_cast<std::int32_t>(token);
    p.confidence = static_cast<float>(std::exp(d - log_sum));
    p.entropy = static_cast<float>(std::max(0.0, log_sum - weighted / sum));
    return p;
  };
  if (params.temperature <= 0) return finish(argmax);

  // Sampling weights at the temperature; top-k / top-p choose which ids are kept.
  std::vector<double> w(static_cast<std::size_t>(limit), 0.0);
  std::vector<char> kept(static_cast<std::size_t>(limit), 0);
  std::int64_t allowed_count = 0;
  for (std::int64_t i = 0; i < limit; ++i) {
    if (!allowed(i, params)) continue;
    const auto u = static_cast<std::size_t>(i);
    w[u] = std::exp((static_cast<double>(logits[u]) - m) / params.temperature);
    kept[u] = 1;
    ++allowed_count;
  }
  const bool use_top_k = params.top_k > 0 && params.top_k < allowed_count;
  const bool use_top_p = params.top_p < 1.0;
  if (use_top_k || use_top_p) {
    std::vector<std::int32_t> order;
    order.reserve(static_cast<std::size_t>(allowed_count));
    for (std::int64_t i = 0; i < limit; ++i)
      if (kept[static_cast<std::size_t>(i)]) order.push_back(static_cast<std::int32_t>(i));
    const auto before = [&](std::int32_t a, std::int32_t b) {
      const float la = logits[static_cast<std::size_t>(a)];
      const float lb = logits[static_cast<std::size_t>(b)];
      return la > lb || (la == lb && a < b);
    };
    std::size_t keep = order.size();
    if (use_top_k) {
      keep = static_cast<std::size_t>(params.top_k);
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep),
                        order.end(), before);
    } else {
      std::sort(order.begin(), order.end(), before);
    }
    if (use_top_p) {
      double total = 0;
      for (std::size_t j = 0; j < keep; ++j) total += w[static_cast<std::size_t>(order[j])];
      const double target = params.top_p * total;
      double running = 0;
      std::size_t prefix = 0;
      while (prefix < keep) {
        running += w[static_cast<std::size_t>(order[prefix])];
        ++prefix;
        if (running >= target) break;
      }
      keep = prefix;
    }
    std::fill(kept.begin(), kept.end(), 0);
    for (std::size_t j = 0; j < keep; ++j) kept[static_cast<std::size_t>(order[j])] = 1;
  }
  double total = 0;
  for (std::int64_t i = 0; i < limit; ++i)
    if (kept[static_cast<std::size_t>(i)]) total += w[static_cast<std::size_t>(i)];
  const double target = philox_uniform(params.seed, position, step) * total;
  double running = 0;
  std::int64_t chosen = -1;
  for (std::int64_t i = 0; i < limit; ++i) {
    if (!kept[static_cast<std::size_t>(i)]) continue;
    running += w[static_cast<std::size_t>(i)];
    chosen = i;
    if (running > target) break;
  }
  return finish(chosen);
}

}  // namespace dice::engine
