#include "dice/evaluator/pipeline.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "dice/core/files.h"
#include "dice/evaluator/evaluate.h"
#include "dice/evaluator/store.h"
#include "test_support.h"

namespace dice::eval {
namespace {

using nlohmann::json;
using testing::ScratchDir;

/// relu, but every forward call sleeps: candidates keep a worker busy for a while.
const std::string kSlowProblem = std::string(testing::kReluProblem)
                                     .replace(std::string(testing::kReluProblem).find("return"), 6,
                                              "import time; time.sleep(0.4); return");

/// A JSON Lines file of `n` identical candidates (one capture serves all) for problem `id`.
std::string same_candidates(const std::string& id, const std::string& code, int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    out += json{{"problem", id}, {"candidate", code + "\nModelNew = Model\n"}}.dump() + "\n";
  return out;
}

EvalOptions cpu_options(const ScratchDir& dir) {
  EvalOptions o;
  o.out_dir = dir.path() / "out";
  o.cache_dir = dir.path() / "cache";
  o.device = "cpu";
  o.jobs = 2;
  o.correct_trials = 1;
  o.timing_trials = 3;
  o.warmup = 0;
  o.python = testing::test_python();
  o.progress = ProgressMode::kNone;
  o.policy = "kernelbench";  // these candidates are the reference itself: strict rejects them
  return o;
}

/// Two CPU workers stand in for two GPUs: with candidates that keep a worker busy, both take work
/// from the one queue. The reference is timed with the first correct candidate of the problem on
/// each worker; later ones time only themselves against the stored samples.
TEST(Pipeline, EveryWorkerTakesWorkAndReferenceTimingIsReused) {
  ScratchDir dir("dice_pipeline_workers");
  dir.write("problems/slow.py", kSlowProblem);
  dir.write("candidates.jsonl", same_candidates("slow", kSlowProblem, 4));
  EvalOptions o = cpu_options(dir);
  o.problems = (dir.path() / "problems").string();
  o.candidates = (dir.path() / "candidates.jsonl").string();
  o.gpus = 2;
  o.timing_trials = 2;
  std::ostringstream progress;
  const EvalRun run = run_eval(o, progress);
  ASSERT_EQ(run.records.size(), 4u) << progress.str();
  int interleaved = 0, stored = 0;
  for (const auto& r : run.records) {
    EXPECT_TRUE(r.correct()) << r.to_json().dump();
    ASSERT_TRUE(r.reference_ms) << r.to_json().dump();
    interleaved += r.reference_timing == "interleaved";
    stored += r.reference_timing == "stored";
  }
  EXPECT_GE(interleaved, 1);
  EXPECT_GE(stored, 1) << progress.str();
  EXPECT_EQ(interleaved + stored, 4) << progress.str();
  const ResultStore store(o.out_dir / "results.db");
  std::set<std::string> workers;
  for (const auto& item : store.items(run.run_id, false)) workers.insert(store.worker_of(item.id));
  EXPECT_EQ(workers, (std::set<std::string>{"cpu#0", "cpu#1"})) << progress.str();
}

/// An item that was handed to a worker max_attempts times without finishing (the run died every
/// time while it ran) gets runtime_error instead of another try.
TEST(Pipeline, ItemThatKeepsInterruptingTheRunIsNotTriedAgain) {
  ScratchDir dir("dice_pipeline_attempts");
  ResultStore store(dir.path() / "results.db");
  Problem p{.id = "relu", .name = "relu", .code = testing::kReluProblem, .origin = "t"};
  Candidate c{.problem_id = "relu",
              .label = "c",
              .text = std::string(testing::kReluProblem) + "\nModelNew = Model\n"};
  const json options = {{"protocol", "dice"},
                        {"correct_trials", 1},
                        {"measure_timing", false},
                        {"policy", "kernelbench"}};
  const auto run_id = store.create_run("cli", options, {{&p, &c}});
  const auto item = store.items(run_id, true).at(0);
  for (int i = 0; i < 3; ++i) store.start_attempt(item.id);
  Toolchain toolchain;  // nothing is compiled: the candidate has no extension
  toolchain.cxx_version = "c++";
  std::vector<EvalRecord> seen;
  {
    Pipeline pipeline(toolchain,
                      {.python = testing::test_python(),
                       .cache_dir = dir.path() / "cache",
                       .log_dir = dir.path() / "logs",
                       .devices = {"cpu"},
                       .build = {.cache_dir = dir.path() / "cache"}},
                      store, [&](const Job&, const EvalRecord& r) { seen.push_back(r); });
    pipeline.submit({{store.items(run_id, true).at(0), options}});
    EXPECT_TRUE(pipeline.wait_idle());
  }
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].verdict, Verdict::kRuntimeError);
  EXPECT_NE(seen[0].reasons.back().find("interrupted 3 times"), std::string::npos);
  EXPECT_TRUE(store.worker_of(item.id).empty());  // no worker ran it
}

/// The rules apply on the pipeline path and are part of the run's stored options: the same
/// candidate is rejected under strict (static.reference_model, before it is built or run) and
/// correct under kernelbench, each run's items carry a different options hash, and --resume of a
/// run keeps the run's policy whatever the command line says.
TEST(Pipeline, PolicyDecidesAndIsStoredWithTheRun) {
  ScratchDir dir("dice_pipeline_policy");
  dir.write("problems/relu.py", testing::kReluProblem);
  dir.write("candidates.jsonl", same_candidates("relu", testing::kReluProblem, 1));
  EvalOptions o = cpu_options(dir);
  o.problems = (dir.path() / "problems").string();
  o.candidates = (dir.path() / "candidates.jsonl").string();
  o.measure_timing = false;
  o.policy = "strict";
  std::ostringstream progress;
  const EvalRun strict = run_eval(o, progress);
  ASSERT_EQ(strict.records.size(), 1u);
  EXPECT_EQ(strict.records[0].verdict, Verdict::kRejected) << strict.records[0].to_json().dump();
  EXPECT_EQ(strict.records[0].rules(), std::vector<std::string>{"static.reference_model"});
  EXPECT_EQ(strict.records[0].policy, "strict");
  EXPECT_FALSE(strict.records[0].isolation.empty());

  o.policy = "kernelbench";
  o.rule_overrides = {"timing.within_noise=off"};
  const EvalRun lenient = run_eval(o, progress);
  ASSERT_EQ(lenient.records.size(), 1u);
  EXPECT_EQ(lenient.records[0].verdict, Verdict::kCorrect) << lenient.records[0].to_json().dump();
  EXPECT_EQ(lenient.records[0].policy, "kernelbench (timing.within_noise=off)");

  const ResultStore store(o.out_dir / "results.db");
  const auto strict_items = store.items(strict.run_id, false);
  const auto other_items = store.items(lenient.run_id, false);
  EXPECT_NE(strict_items.at(0).options_hash, other_items.at(0).options_hash);
  EXPECT_EQ(store.run(strict.run_id)->options.at("policy"), "strict");

  // Resuming the newest run (kernelbench) with --policy strict on the command line keeps the
  // stored policy: nothing is left to do, and the records stay those of kernelbench.
  o.resume = true;
  o.policy = "strict";
  const EvalRun resumed = run_eval(o, progress);
  EXPECT_EQ(resumed.run_id, lenient.run_id);
  ASSERT_EQ(resumed.records.size(), 1u);
  EXPECT_EQ(resumed.records[0].verdict, Verdict::kCorrect);
  const json summary = json::parse(read_file(o.out_dir / "summary.json"));
  EXPECT_EQ(summary.at("policy"), "kernelbench (timing.within_noise=off)");
}

}  // namespace
}  // namespace dice::eval
