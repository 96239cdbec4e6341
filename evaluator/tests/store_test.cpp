#include "dice/evaluator/store.h"

#include <gtest/gtest.h>

#include "dice/core/error.h"
#include "test_support.h"

namespace dice::eval {
namespace {

using nlohmann::json;
using testing::ScratchDir;

Problem relu_problem() {
  Problem p;
  p.id = "relu";
  p.name = "relu";
  p.code = testing::kReluProblem;
  p.origin = "relu.py";
  return p;
}

EvalRecord record_for(const WorkItem& item, Verdict v) {
  EvalRecord r;
  r.problem_id = item.problem.id;
  r.problem_name = item.problem.name;
  r.level = "other";
  r.candidate = item.candidate.label;
  r.candidate_hash = "sha256:x";
  r.verdict = v;
  return r;
}

/// Whether an item is a problem's own reference (calibration: every rule off) is stored: a
/// resumed run must not judge its references under the run's policy, nor exempt a candidate.
TEST(Store, ReferenceCandidatesStayReferences) {
  ScratchDir dir("dice_store_reference");
  const Problem p = relu_problem();
  const Candidate plain{.problem_id = "relu", .label = "x (reference as candidate)", .text = "A"};
  const Candidate reference{
      .problem_id = "relu", .label = "relu.py", .text = "B", .reference = true};
  {
    ResultStore store(dir.path() / "results.db");
    store.create_run("cli", json::object(), {{&p, &plain}, {&p, &reference}});
  }
  const ResultStore store(dir.path() / "results.db");
  const auto items = store.items(store.latest_run("cli")->id, false);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_FALSE(items[0].candidate.reference);  // the label decides nothing
  EXPECT_TRUE(items[1].candidate.reference);
}

TEST(Store, RunsItemsAndRecordsSurviveReopening) {
  ScratchDir dir("dice_store");
  const Problem p = relu_problem();
  const Candidate a{.problem_id = "relu", .label = "a.py", .text = "A"};
  const Candidate b{.problem_id = "relu", .label = "b.py", .text = "B"};
  const Candidate c{.problem_id = "relu", .label = "c.py", .text = "C"};
  const json options = {{"protocol", "dice"}, {"seed", 42}};
  std::int64_t run_id = 0;
  {
    ResultStore store(dir.path() / "sub" / "results.db");
    run_id = store.create_run("cli", options, {{&p, &a}, {&p, &b}, {&p, &c}});
    const auto items = store.items(run_id, false);
    ASSERT_EQ(items.size(), 3u);
    EXPECT_EQ(items[1].candidate.text, "B");
    EXPECT_EQ(items[1].problem.code, p.code);  // the store alone is enough to resume
    EXPECT_EQ(items[1].options_hash, options_hash(options));
    EXPECT_TRUE(store.finish(items[1].id, record_for(items[1], Verdict::kCorrect), "cpu#1"));
    // Finishing twice stores nothing the second time: no duplicates.
    EXPECT_FALSE(store.finish(items[1].id, record_for(items[1], Verdict::kMismatch), "cpu#0"));
    store.start_attempt(items[0].id);
  }
  ResultStore store(dir.path() / "sub" / "results.db");  // as after a restart
  const auto run = store.latest_run("cli");
  ASSERT_TRUE(run);
  EXPECT_EQ(run->id, run_id);
  EXPECT_EQ(run->state, "running");
  EXPECT_EQ(run->total, 3);
  EXPECT_EQ(run->done, 1);
  EXPECT_EQ(run->options, options);
  const auto pending = store.items(run_id, true);
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].candidate.label, "a.py");
  EXPECT_EQ(pending[0].attempts, 1);
  EXPECT_EQ(pending[1].candidate.label, "c.py");
  const auto done = store.records(run_id);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].record.verdict, Verdict::kCorrect);
  EXPECT_EQ(done[0].seq, 1);
  EXPECT_EQ(store.worker_of(done[0].item_id), "cpu#1");

  // Streaming by finish order: only what finished after the given point.
  ASSERT_TRUE(store.finish(pending[1].id, record_for(pending[1], Verdict::kTimeout), ""));
  std::int64_t last = 0;
  const auto later = store.records_after(run_id, done[0].finish_order, last);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].record.verdict, Verdict::kTimeout);
  EXPECT_EQ(last, later[0].finish_order);
  EXPECT_TRUE(store.records_after(run_id, last, last).empty());

  store.set_run_state(run_id, "interrupted");
  EXPECT_EQ(store.run(run_id)->state, "interrupted");
  EXPECT_TRUE(store.runs("cli", "running").empty());
  EXPECT_FALSE(store.run(run_id + 1));
  EXPECT_FALSE(store.latest_run("batch"));
}

TEST(Store, ReferenceTimingFirstMeasurementWins) {
  ScratchDir dir("dice_store_ref");
  ResultStore store(dir.path() / "results.db");
  EXPECT_FALSE(store.reference_timing("k"));
  store.put_reference_timing("k", {{"device", "cpu"}}, {1.0, 2.0});
  store.put_reference_timing("k", {{"device", "cpu"}}, {9.0});
  EXPECT_EQ(store.reference_timing("k"), (std::vector<double>{1.0, 2.0}));
}

TEST(Store, NotADatabaseIsAnError) {
  ScratchDir dir("dice_store_bad");
  const auto path = dir.write("results.db", std::string(4096, 'x'));
  EXPECT_THROW(ResultStore store(path), Error);
}

}  // namespace
}  // namespace dice::eval
