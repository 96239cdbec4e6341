#include "dice/generation/sample_eval.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "dice/core/hash.h"
#include "dice/evaluator/evaluate.h"
#include "test_support.h"

namespace dice::generation {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::temp_dir;

/// A bench store with one sample of problem L1/19 and the evaluator's store beside it.
struct Stores {
  fs::path dir;
  BenchStore bench;
  eval::ResultStore results;
  eval::Problem problem{
      .id = "L1/19", .name = "19_ReLU", .level = 1, .code = "class Model: pass\n"};
  SampleRow sample;

  explicit Stores(const std::string& name)
      : dir(temp_dir(name)), bench(dir / "bench.db"), results(dir / "results.db") {
    SampleRow r;
    r.problem_id = problem.id;
    r.problem_name = problem.name;
    r.level = "L1";
    bench.add_samples({r});
    sample = bench.samples().front();
  }
  ~Stores() { fs::remove_all(dir); }

  eval::Candidate candidate(std::string text) const {
    return {problem.id, "bench.db#1:L1/19#0", std::move(text)};
  }
};

json run_options() {
  eval::EvalOptions o;
  o.policy = "lenient";
  o.rule_overrides = {"static.try_except=warn"};
  return eval::run_options_json(o);
}

/// An evaluator double that fails the test when anything reaches it.
SampleEvaluation::Evaluate never_called() {
  return [](std::int64_t, std::int64_t, std::vector<eval::Job>) {
    ADD_FAILURE() << "the evaluator was called for an output without usable code";
  };
}

TEST(EarlyVerdict, DecidedOnlyWithoutUsableCode) {
  const auto none = early_verdict({"", false, true, std::nullopt});
  ASSERT_TRUE(none);
  EXPECT_EQ(none->verdict, eval::Verdict::kParseError);
  EXPECT_EQ(none->reason, "no code found in candidate");
  const auto open = early_verdict({" \n", true, true, std::nullopt});
  ASSERT_TRUE(open);
  EXPECT_EQ(open->verdict, eval::Verdict::kTruncated);
  const auto prose = early_verdict(
      {"no code here", false, false, "SyntaxError: invalid syntax (<unknown>, line 1)"});
  ASSERT_TRUE(prose);
  EXPECT_EQ(prose->verdict, eval::Verdict::kParseError);
  EXPECT_EQ(prose->reason, "SyntaxError: invalid syntax (<unknown>, line 1)");
  // Code that parses, even from a truncated output (its last complete block), goes on.
  EXPECT_FALSE(early_verdict({"a = 1\n", true, true, std::nullopt}));
}

TEST(SampleEvaluation, OutputWithoutCodeBlockGetsItsVerdictWithoutTheEvaluator) {
  Stores st("early");
  SampleEvaluation evaluation(st.results, st.bench, run_options(), "none: test", never_called());
  const Extracted extracted{"", true, true, std::nullopt};  // "```python\nimport tor" cut
  const auto candidate = st.candidate("```python\nimport tor");
  const auto record = evaluation.submit(st.sample, st.problem, candidate, &extracted);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->verdict, eval::Verdict::kTruncated);
  EXPECT_EQ(record->reasons, std::vector<std::string>{"no code found in candidate"});
  EXPECT_EQ(record->candidate_hash, "sha256:" + sha256_hex(""));
  EXPECT_EQ(record->compile_status, "skipped");
  EXPECT_FALSE(record->compiled);
  EXPECT_EQ(record->policy, "lenient (static.try_except=warn)");
  EXPECT_EQ(record->isolation, "none: test");
  EXPECT_EQ(record->problem_id, "L1/19");
  EXPECT_EQ(record->level, "L1");

  // Stored like any other verdict: the evaluator's run is finished with the record, and the
  // bench store names the run and holds the record (what resume and `dice bench report` read).
  ASSERT_TRUE(st.sample.eval_run);
  const auto run = st.results.run(*st.sample.eval_run);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->kind, "bench");
  EXPECT_EQ(run->state, "finished");
  EXPECT_EQ(run->done, 1);
  EXPECT_EQ(run->options, run_options());
  const auto stored = st.results.records(*st.sample.eval_run);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored.front().record.verdict, eval::Verdict::kTruncated);
  EXPECT_EQ(stored.front().record.candidate, "bench.db#1:L1/19#0");
  const SampleRow back = st.bench.samples().front();
  EXPECT_EQ(back.eval_run, st.sample.eval_run);
  EXPECT_EQ(back.verdict(), "truncated");
  EXPECT_TRUE(st.results.items(*st.sample.eval_run, true).empty());
}

TEST(SampleEvaluation, ProseIsAParseErrorWithTheParsersMessage) {
  Stores st("prose");
  SampleEvaluation evaluation(st.results, st.bench, run_options(), "none: test", never_called());
  const Extracted extracted{"I cannot write that kernel.", false, false,
                            "SyntaxError: invalid syntax (<unknown>, line 1)"};
  const auto record =
      evaluation.submit(st.sample, st.problem, st.candidate(extracted.code), &extracted);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->verdict, eval::Verdict::kParseError);
  EXPECT_EQ(record->candidate_hash, "sha256:" + sha256_hex("I cannot write that kernel."));
  EXPECT_EQ(st.bench.samples().front().verdict(), "parse_error");
}

TEST(SampleEvaluation, CodeGoesToTheEvaluatorOnceAndResumesInTheSameRun) {
  Stores st("code");
  std::vector<std::pair<std::int64_t, std::int64_t>> calls;
  SampleEvaluation evaluation(
      st.results, st.bench, run_options(), "none: test",
      [&](std::int64_t sample_id, std::int64_t eval_run, std::vector<eval::Job> jobs) {
        calls.emplace_back(sample_id, eval_run);
        ASSERT_EQ(jobs.size(), 1u);
        EXPECT_EQ(jobs.front().options.value("policy", ""), "lenient");
        EXPECT_EQ(jobs.front().item.candidate.text, "```python\nclass ModelNew: pass\n```\n");
      });
  const Extracted extracted{"class ModelNew: pass\n", false, true, std::nullopt};
  const auto candidate = st.candidate("```python\nclass ModelNew: pass\n```\n");
  EXPECT_FALSE(evaluation.submit(st.sample, st.problem, candidate, &extracted));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls.front().first, st.sample.id);
  EXPECT_EQ(st.bench.samples().front().eval_run, st.sample.eval_run);
  // A resumed bench submits the unfinished run again: the same run, no second one.
  SampleRow again = st.bench.samples().front();
  EXPECT_FALSE(evaluation.submit(again, st.problem, candidate, &extracted));
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls.back().second, calls.front().second);
  // An early verdict also finishes a run created before (a run stored by an older dice).
  const Extracted none{"", false, true, std::nullopt};
  SampleEvaluation early(st.results, st.bench, run_options(), "none: test", never_called());
  const auto record = early.submit(again, st.problem, candidate, &none);
  ASSERT_TRUE(record);
  EXPECT_EQ(st.results.run(calls.front().second)->state, "finished");
}

TEST(SampleEvaluation, InfillingCandidatesAlwaysGoToTheEvaluator) {
  Stores st("infill");
  int calls = 0;
  SampleEvaluation evaluation(st.results, st.bench, run_options(), "none: test",
                              [&](std::int64_t, std::int64_t, std::vector<eval::Job>) { ++calls; });
  EXPECT_FALSE(evaluation.submit(st.sample, st.problem, st.candidate("prefix middle"), nullptr));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace dice::generation
