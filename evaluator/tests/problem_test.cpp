#include "dice/evaluator/problem.h"

#include <gtest/gtest.h>

#include "dice/core/error.h"
#include "test_support.h"

namespace dice::eval {
namespace {

using testing::ScratchDir;

TEST(Problems, FolderOfFilesSortedWithStemIds) {
  ScratchDir dir("dice_problems");
  dir.write("b.py", "# b");
  dir.write("a.py", "# a");
  dir.write("notes.txt", "ignored");
  const auto problems = load_problems(dir.path().string(), "");
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].id, "a");
  EXPECT_EQ(problems[1].id, "b");
  EXPECT_EQ(problems[0].level_label(), "other");
}

TEST(Problems, KernelBenchSelectors) {
  ScratchDir dir("dice_kb");
  const auto jsonl = dir.write("kb.jsonl",
                               R"({"level": 1, "problem_id": 1, "name": "1_A", "code": "a"}
{"level": 1, "problem_id": 2, "name": "2_B", "code": "b"}

{"level": 2, "problem_id": 1, "name": "1_C", "code": "c"}
)");
  EXPECT_EQ(load_problems("kernelbench:L1", jsonl).size(), 2u);
  const auto one = load_problems("kernelbench:L2/1", jsonl);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].id, "L2/1");
  EXPECT_EQ(one[0].name, "1_C");
  EXPECT_EQ(one[0].level_label(), "L2");
  EXPECT_EQ(load_problems("kernelbench:L1,L2", jsonl).size(), 3u);
  EXPECT_THROW(load_problems("kernelbench:L3", jsonl), InputError);
  EXPECT_THROW(load_problems("kernelbench:X1", jsonl), InputError);
  EXPECT_THROW(load_problems("kernelbench:L1", dir.path() / "missing.jsonl"), InputError);
}

TEST(Problems, BadJsonLineNamesFileAndLine) {
  ScratchDir dir("dice_badjson");
  const auto jsonl =
      dir.write("p.jsonl", "{\"level\": 1, \"problem_id\": 1, \"code\": \"x\"}\n{oops\n");
  try {
    load_problems(jsonl.string(), "");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("p.jsonl:2"), std::string::npos) << e.what();
  }
}

TEST(Problems, DuplicateIdsRejected) {
  ScratchDir dir("dice_dup");
  const auto a = dir.write("x.py", "# x");
  EXPECT_THROW(load_problems(a.string() + "+" + a.string(), ""), InputError);
}

TEST(Problems, MissingPathIsInputError) {
  EXPECT_THROW(load_problems("/no/such/problem.py", ""), InputError);
}

TEST(Candidates, FolderMatchedByStemAndTag) {
  ScratchDir dir("dice_cands");
  dir.write("problems/relu.py", "# relu");
  dir.write("problems/add.py", "# add");
  dir.write("cands/relu.py", "c1");
  dir.write("cands/relu__v2.txt", "c2");
  dir.write("cands/add__x.py", "c3");
  dir.write("cands/unknown.py", "c4");
  Workload w;
  w.problems = load_problems((dir.path() / "problems").string(), "");
  load_candidates((dir.path() / "cands").string(), w);
  ASSERT_EQ(w.candidates.size(), 3u);
  EXPECT_EQ(w.candidates[0].problem_id, "add");
  EXPECT_EQ(w.candidates[1].problem_id, "relu");
  EXPECT_EQ(w.candidates[2].problem_id, "relu");
  ASSERT_EQ(w.skipped.size(), 1u);
  EXPECT_NE(w.skipped[0].find("unknown.py"), std::string::npos);
}

TEST(Candidates, SingleFileForSingleProblem) {
  ScratchDir dir("dice_single");
  const auto p = dir.write("prob.py", "# p");
  const auto c = dir.write("whatever.py", "class ModelNew: pass");
  Workload w;
  w.problems = load_problems(p.string(), "");
  load_candidates(c.string(), w);
  ASSERT_EQ(w.candidates.size(), 1u);
  EXPECT_EQ(w.candidates[0].problem_id, "prob");
}

TEST(Candidates, JsonlRecordsAndDicePairs) {
  ScratchDir dir("dice_jsonl");
  const auto p = dir.write("relu.py", "# p");
  const auto jsonl = dir.write("c.jsonl",
                               R"({"problem": "relu", "candidate": "code"}
{"problem": "nope", "candidate": "code"}
{"id": 7, "pytorch_code": "ref", "cuda_code": "cand"}
{"problem": "relu"}
)");
  Workload w;
  w.problems = load_problems(p.string(), "");
  load_candidates(jsonl.string(), w);
  ASSERT_EQ(w.candidates.size(), 2u);
  EXPECT_EQ(w.candidates[1].problem_id, "dice/7");
  EXPECT_EQ(w.candidates[1].text, "cand");
  ASSERT_EQ(w.problems.size(), 2u);
  EXPECT_EQ(w.problems[1].code, "ref");
  EXPECT_EQ(w.skipped.size(), 2u);  // unknown problem, missing candidate field
}

TEST(Candidates, ReferenceAsCandidate) {
  Workload w;
  w.problems.push_back({.id = "p", .name = "p", .code = "class Model: pass"});
  add_reference_candidates(w);
  ASSERT_EQ(w.candidates.size(), 1u);
  EXPECT_NE(w.candidates[0].text.find("ModelNew = Model"), std::string::npos);
}

}  // namespace
}  // namespace dice::eval
