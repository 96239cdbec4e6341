// timing.launch_bound and timing.within_noise from a worker's result (RULES.md).

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../src/record_parts.h"

namespace dice::eval {
namespace {

using nlohmann::json;

/// A correct record whose reference takes `reference_ms` and candidate half that, with the
/// worker's empty-call time when `empty_ms` is positive.
EvalRecord timed(double reference_ms, double empty_ms) {
  json timing = {{"protocol", "dice"},
                 {"candidate_ms", std::vector<double>(20, reference_ms / 2)},
                 {"reference_ms", std::vector<double>(20, reference_ms)}};
  if (empty_ms > 0) timing["empty_call_ms"] = empty_ms;
  EvalRecord r;
  apply_result(r, json{{"verdict", "correct"}, {"timing", timing}}, "dice");
  timing_findings(r, RulePolicy::named("strict"));
  return r;
}

bool fired(const EvalRecord& r, const std::string& rule) {
  for (const auto& f : r.findings)
    if (f.rule == rule) return true;
  return false;
}

TEST(TimingFindings, LaunchBoundIsRelativeToTheEmptyCall) {
  // 86 us against a 25 us empty call: at most 3.4x can be shown.
  const EvalRecord tiny = timed(0.086, 0.025);
  ASSERT_TRUE(tiny.empty_call_ms.has_value());
  EXPECT_DOUBLE_EQ(*tiny.empty_call_ms, 0.025);
  EXPECT_TRUE(fired(tiny, "timing.launch_bound"));
  // 150 us against the same empty call: 6x is measurable.
  EXPECT_FALSE(fired(timed(0.150, 0.025), "timing.launch_bound"));
  // A faster timer (protocol kernelbench-like, 5 us): 25 us still fires, 40 us does not.
  EXPECT_TRUE(fired(timed(0.019, 0.005), "timing.launch_bound"));
  EXPECT_FALSE(fired(timed(0.040, 0.005), "timing.launch_bound"));
}

TEST(TimingFindings, AbsoluteThresholdWithoutTheEmptyCall) {
  EXPECT_TRUE(fired(timed(0.020, 0), "timing.launch_bound"));
  EXPECT_FALSE(fired(timed(0.086, 0), "timing.launch_bound"));
}

TEST(TimingFindings, EmptyCallSurvivesTheRecordRoundTrip) {
  const EvalRecord r = timed(0.2, 0.021);
  const EvalRecord back = EvalRecord::from_json(r.to_json());
  ASSERT_TRUE(back.empty_call_ms.has_value());
  EXPECT_DOUBLE_EQ(*back.empty_call_ms, 0.021);
}

}  // namespace
}  // namespace dice::eval
