#include "dice/evaluator/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "dice/core/error.h"

namespace dice::eval {

TimingStats compute_stats(std::vector<double> samples) {
  if (samples.empty()) throw Error("timing statistics of no samples");
  for (double s : samples)
    if (!std::isfinite(s)) throw Error("timing sample is not a finite number");
  std::sort(samples.begin(), samples.end());
  TimingStats t;
  const std::size_t n = samples.size();
  t.n = static_cast<int>(n);
  t.min = samples.front();
  t.max = samples.back();
  t.median = n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  t.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n);
  double ss = 0;
  for (double s : samples) ss += (s - t.mean) * (s - t.mean);
  t.std = n > 1 ? std::sqrt(ss / static_cast<double>(n - 1)) : 0.0;
  // Ranks (1-based) n/2 -+ 1.96 sqrt(n)/2, clamped.
  const double half = 1.96 * std::sqrt(static_cast<double>(n)) / 2.0;
  const auto rank = [&](double r) {
    const long clamped = std::clamp(std::lround(r), 1L, static_cast<long>(n));
    return samples[static_cast<std::size_t>(clamped - 1)];
  };
  t.ci95_low = rank(std::floor(static_cast<double>(n) / 2.0 - half));
  t.ci95_high = rank(std::ceil(static_cast<double>(n) / 2.0 + half + 1.0));
  return t;
}

Speedup median_speedup(const TimingStats& reference, const TimingStats& candidate) {
  Speedup s;
  if (candidate.median > 0) s.value = reference.median / candidate.median;
  if (candidate.ci95_high > 0) s.ci95_low = reference.ci95_low / candidate.ci95_high;
  if (candidate.ci95_low > 0) s.ci95_high = reference.ci95_high / candidate.ci95_low;
  return s;
}

nlohmann::json to_json(const TimingStats& s) {
  return {{"n", s.n},
          {"median", s.median},
          {"mean", s.mean},
          {"std", s.std},
          {"min", s.min},
          {"max", s.max},
          {"ci95", {s.ci95_low, s.ci95_high}}};
}

}  // namespace dice::eval
