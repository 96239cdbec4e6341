#pragma once
// Statistics of timing samples.

#include <nlohmann/json.hpp>
#include <vector>

namespace dice::eval {

/// Summary of timing samples, all in milliseconds.
struct TimingStats {
  int n = 0;
  double median = 0, mean = 0, std = 0, min = 0, max = 0;
  /// Distribution-free 95% confidence interval of the median from order statistics (normal
  /// approximation of the binomial ranks; e.g. Conover, Practical Nonparametric Statistics, 3.2).
  double ci95_low = 0, ci95_high = 0;
};

/// Statistics of `samples_ms` (ms). Throws dice::Error if empty or any sample is not finite.
TimingStats compute_stats(std::vector<double> samples_ms);

/// reference / candidate, with the interval [ref.low / cand.high, ref.high / cand.low] (a
/// conservative interval from the two medians' intervals).
struct Speedup {
  double value = 0, ci95_low = 0, ci95_high = 0;
};
Speedup median_speedup(const TimingStats& reference, const TimingStats& candidate);

nlohmann::json to_json(const TimingStats& s);

}  // namespace dice::eval
