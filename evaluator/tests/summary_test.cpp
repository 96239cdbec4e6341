#include "dice/evaluator/summary.h"

#include <gtest/gtest.h>

#include <cmath>

#include "dice/core/error.h"

namespace dice::eval {
namespace {

EvalRecord record(const std::string& level, Verdict v, std::optional<double> speedup) {
  EvalRecord r;
  r.problem_id = "p";
  r.level = level;
  r.verdict = v;
  r.compiled = v != Verdict::kCompileError;
  if (speedup) r.speedup = Speedup{*speedup, *speedup, *speedup};
  return r;
}

TEST(Summary, FastPOverAllAttempted) {
  const std::vector<EvalRecord> records{
      record("L1", Verdict::kCorrect, 0.5), record("L1", Verdict::kCorrect, 1.5),
      record("L1", Verdict::kCorrect, 3.0), record("L1", Verdict::kCompileError, std::nullopt),
      record("L2", Verdict::kMismatch, std::nullopt)};
  const auto rows = summarize(records);
  ASSERT_EQ(rows.size(), 3u);
  const auto& l1 = rows[0];
  EXPECT_EQ(l1.level, "L1");
  EXPECT_EQ(l1.attempted, 4);
  EXPECT_EQ(l1.compiled, 3);
  EXPECT_EQ(l1.correct, 3);
  EXPECT_EQ(l1.faster_1, 2);
  EXPECT_EQ(l1.faster_2, 1);
  EXPECT_DOUBLE_EQ(l1.rate(l1.faster_1), 0.5);
  EXPECT_NEAR(l1.geomean_speedup, std::cbrt(0.5 * 1.5 * 3.0), 1e-12);
  EXPECT_EQ(rows[2].level, "all");
  EXPECT_EQ(rows[2].attempted, 5);
  EXPECT_EQ(rows[2].correct, 3);
  const std::string md = to_markdown(rows);
  EXPECT_NE(md.find("| L1 | 4 | 75.0% | 75.0% | 75.0% | 50.0% | 25.0% |"), std::string::npos) << md;
}

TEST(Summary, RecordJsonRoundTrip) {
  EvalRecord r = record("L3", Verdict::kCorrect, 1.25);
  r.candidate_ms = compute_stats({1, 2, 3});
  r.reference_ms = compute_stats({2, 3, 4});
  r.protocol = "dice";
  r.reasons = {"why"};
  const EvalRecord back = EvalRecord::from_json(r.to_json());
  EXPECT_EQ(back.verdict, Verdict::kCorrect);
  EXPECT_EQ(back.level, "L3");
  ASSERT_TRUE(back.speedup);
  EXPECT_DOUBLE_EQ(back.speedup->value, 1.25);
  ASSERT_TRUE(back.candidate_ms);
  EXPECT_DOUBLE_EQ(back.candidate_ms->median, 2);
  EXPECT_EQ(back.reasons, r.reasons);
}

TEST(Summary, MalformedRecordThrows) {
  EXPECT_THROW(EvalRecord::from_json({{"problem_id", "p"}, {"verdict", "bogus"}, {"compile", {}}}),
               Error);
  EXPECT_THROW(EvalRecord::from_json({{"verdict", "correct"}}), Error);
}

TEST(Verdicts, NamesRoundTrip) {
  for (const char* name :
       {"correct", "compile_error", "timeout", "wrong_dtype", "reference_error"}) {
    const auto v = parse_verdict(name);
    ASSERT_TRUE(v) << name;
    EXPECT_EQ(to_string(*v), name);
  }
  EXPECT_FALSE(parse_verdict("nope"));
}

}  // namespace
}  // namespace dice::eval
