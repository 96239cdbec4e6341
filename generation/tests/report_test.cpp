#include "dice/generation/report.h"

#include <gtest/gtest.h>

#include "dice/core/error.h"

namespace dice::generation {
namespace {

using nlohmann::json;

SampleRow sample(const std::string& problem, const std::string& level, int index,
                 const std::string& verdict, std::optional<double> speedup = std::nullopt) {
  SampleRow s;
  s.problem_id = problem;
  s.problem_name = problem;
  s.level = level;
  s.sample = index;
  s.status = "generated";
  json r{{"verdict", verdict}, {"compile", {{"compiled", verdict != "compile_error"}}}};
  if (speedup) r["speedup"] = *speedup;
  s.record = r;
  return s;
}

TEST(PassAtK, MatchesTheClosedForm) {
  EXPECT_DOUBLE_EQ(pass_at_k(5, 1, 1), 0.2);
  EXPECT_NEAR(pass_at_k(10, 3, 2), 1.0 - 21.0 / 45.0, 1e-12);         // 1 - C(7,2)/C(10,2)
  EXPECT_NEAR(pass_at_k(20, 5, 10), 1.0 - 3003.0 / 184756.0, 1e-12);  // C(15,10)/C(20,10)
  EXPECT_DOUBLE_EQ(pass_at_k(4, 0, 3), 0.0);
  EXPECT_DOUBLE_EQ(pass_at_k(3, 2, 2), 1.0);  // n - c < k: every k-subset holds a pass
  EXPECT_DOUBLE_EQ(pass_at_k(1, 1, 1), 1.0);
}

TEST(PassAtK, RejectsImpossibleCounts) {
  EXPECT_THROW(pass_at_k(3, 4, 1), InputError);
  EXPECT_THROW(pass_at_k(3, 1, 4), InputError);
  EXPECT_THROW(pass_at_k(3, 1, 0), InputError);
}

TEST(Report, PaperTableOneSamplePerProblem) {
  const std::vector<SampleRow> samples{
      sample("L1/1", "L1", 0, "correct", 2.5), sample("L1/2", "L1", 0, "correct", 0.5),
      sample("L1/3", "L1", 0, "mismatch"), sample("L1/23", "L1", 0, "compile_error"),
      sample("L2/1", "L2", 0, "correct", 1.5)};
  const BenchReport r = compute_report(samples, {});
  ASSERT_EQ(r.rows.size(), 3u);
  const ReportRow& l1 = r.rows[0];
  EXPECT_EQ(l1.level, "L1");
  EXPECT_EQ(l1.samples, 4);
  EXPECT_EQ(l1.compiled, 3);
  EXPECT_EQ(l1.correct, 2);
  EXPECT_EQ(l1.fast_1, 1);
  EXPECT_EQ(l1.fast_2, 1);
  EXPECT_EQ(l1.degenerate, 1);  // L1/23 Softmax
  EXPECT_NEAR(l1.geomean_speedup, std::sqrt(2.5 * 0.5), 1e-12);
  EXPECT_TRUE(r.ks.empty());
  EXPECT_EQ(r.rows.back().level, "all");
  EXPECT_EQ(r.rows.back().correct, 3);
  EXPECT_EQ(r.degenerate.count("L1/23"), 1u);
  EXPECT_DOUBLE_EQ(fast_p(samples, 0), 0.6);
  EXPECT_DOUBLE_EQ(fast_p(samples, 1), 0.4);
  EXPECT_DOUBLE_EQ(fast_p(samples, 2), 0.2);
  const std::string md = report_markdown(r);
  EXPECT_NE(md.find("| L1 | 4 (1 degenerate) | 4 | 75.0 | 50.0 | 25.0 | 25.0 |"), std::string::npos)
      << md;
}

TEST(Report, PassAtKWithSeveralSamples) {
  std::vector<SampleRow> samples;
  // problem A: 1 of 4 correct (fast); problem B: 0 of 4.
  samples.push_back(sample("L1/1", "L1", 0, "correct", 3.0));
  for (int i = 1; i < 4; ++i) samples.push_back(sample("L1/1", "L1", i, "mismatch"));
  for (int i = 0; i < 4; ++i) samples.push_back(sample("L1/2", "L1", i, "compile_error"));
  const BenchReport r = compute_report(samples, {});
  EXPECT_EQ(r.samples_per_problem, 4);
  EXPECT_EQ(r.ks, (std::vector<int>{1, 2, 4}));
  const ReportRow& l1 = r.rows[0];
  EXPECT_DOUBLE_EQ(l1.pass_at.at(1), (0.25 + 0.0) / 2);
  EXPECT_DOUBLE_EQ(l1.pass_at.at(2), (0.5 + 0.0) / 2);  // 1 - C(3,2)/C(4,2) = 0.5
  EXPECT_DOUBLE_EQ(l1.pass_at.at(4), 0.5);
  EXPECT_DOUBLE_EQ(l1.fast_2_at.at(4), 0.5);
  EXPECT_NE(report_markdown(r).find("pass@4"), std::string::npos);
}

TEST(Report, CompileOnlyRunsSayThatCorrectnessNeedsAGpu) {
  const std::vector<SampleRow> samples{sample("L1/1", "L1", 0, "compiled")};
  const BenchReport r = compute_report(samples, {{"generation", 1.5}});
  EXPECT_TRUE(r.compile_only);
  const std::string md = report_markdown(r);
  EXPECT_NE(md.find("correctness and timing need a GPU"), std::string::npos);
  EXPECT_NE(md.find("generation 1.5 s"), std::string::npos);
}

TEST(ReportHtml, SelfContainedAndEscaped) {
  std::vector<SampleRow> samples{sample("L1/1", "L1", 0, "correct", 1.7),
                                 sample("L1/2", "L1", 0, "mismatch")};
  samples[0].candidate = "x = '<script>alert(1)</script>' & \"q\"";
  samples[0].output = "```python\n</pre><img src=x>\n```";
  const BenchReport r = compute_report(samples, {});
  const std::string html = report_html(r, samples, json{{"model", "<m>"}});
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos);  // nothing fetched: no URL at all
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_NE(html.find("x = &#39;&lt;script&gt;alert(1)&lt;/script&gt;&#39; &amp; &quot;q&quot;"),
            std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<style>"), std::string::npos);
  EXPECT_NE(html.find("&lt;m&gt;"), std::string::npos);
}

TEST(ReportHtml, EscapesEveryMetacharacter) {
  EXPECT_EQ(html_escape("<a href='x'>&\"</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
}

TEST(Degenerate, KnownBrokenProblemsAreListed) {
  for (const char* id : {"L1/23", "L2/23", "L2/80", "L2/83", "L1/94", "L2/66", "L1/95", "L1/98"})
    EXPECT_TRUE(degenerate_reason(id).has_value()) << id;
  EXPECT_FALSE(degenerate_reason("L1/19").has_value());
}

}  // namespace
}  // namespace dice::generation
