#include "dice/evaluator/stats.h"

#include <gtest/gtest.h>

#include <limits>

#include "dice/core/error.h"

namespace dice::eval {
namespace {

TEST(Stats, MedianMeanStdMin) {
  const auto s = compute_stats({3.0, 1.0, 2.0, 4.0});
  EXPECT_EQ(s.n, 4);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 4.0);
  EXPECT_NEAR(s.std, 1.2909944, 1e-6);
}

TEST(Stats, MedianIntervalBracketsMedianAndNarrowsWithN) {
  std::vector<double> small, large;
  for (int i = 1; i <= 11; ++i) small.push_back(i);
  for (int i = 1; i <= 101; ++i) large.push_back(i);
  const auto s = compute_stats(small);
  const auto l = compute_stats(large);
  EXPECT_LE(s.ci95_low, s.median);
  EXPECT_GE(s.ci95_high, s.median);
  EXPECT_LT(s.ci95_low, s.ci95_high);
  // 95% interval of the median of 1..101 covers ranks about 41..61.
  EXPECT_NEAR(l.ci95_low, 41, 2);
  EXPECT_NEAR(l.ci95_high, 61, 2);
  EXPECT_LT((l.ci95_high - l.ci95_low) / 101.0, (s.ci95_high - s.ci95_low) / 11.0);
}

TEST(Stats, RejectsEmptyAndNonFinite) {
  EXPECT_THROW(compute_stats({}), Error);
  EXPECT_THROW(compute_stats({1.0, std::numeric_limits<double>::quiet_NaN()}), Error);
}

TEST(Stats, SpeedupIsReferenceOverCandidate) {
  const auto ref = compute_stats({4, 4, 4, 4, 4});
  const auto cand = compute_stats({2, 2, 2, 2, 2});
  const auto sp = median_speedup(ref, cand);
  EXPECT_DOUBLE_EQ(sp.value, 2.0);
  EXPECT_LE(sp.ci95_low, 2.0);
  EXPECT_GE(sp.ci95_high, 2.0);
}

}  // namespace
}  // namespace dice::eval
