#include "dice/evaluator/evaluate.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "dice/core/error.h"
#include "test_support.h"

namespace dice::eval {
namespace {

using testing::ScratchDir;

EvalOptions options_for(const ScratchDir& dir) {
  EvalOptions o;
  o.problems = (dir.path() / "problems").string();
  o.candidates = (dir.path() / "candidates").string();
  o.out_dir = dir.path() / "out";
  o.cache_dir = dir.path() / "cache";
  o.jobs = 2;
  o.correct_trials = 2;
  o.timing_trials = 3;
  o.warmup = 1;
  o.python = testing::test_python();
  o.policy = "kernelbench";  // these candidates are PyTorch: the rules have tests of their own
  return o;
}

void write_workload(const ScratchDir& dir) {
  dir.write("problems/relu.py", testing::kReluProblem);
  dir.write("candidates/relu.py", std::string(testing::kReluProblem) + "\nModelNew = Model\n");
  dir.write("candidates/relu__wrong.py", R"(import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1.0
)");
  dir.write("candidates/relu__syntax.py", "def broken(:\n");
  dir.write("candidates/relu__nomodel.py", "import torch\n");
  dir.write("candidates/relu__output.txt",
            "Here is my kernel:\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
            "    def forward(self, x):\n        return x.clamp_min(0)\n```\nDone.\n");
}

std::map<std::string, std::string> verdicts_by_candidate(const EvalRun& run) {
  std::map<std::string, std::string> out;
  for (const auto& r : run.records)
    out[std::filesystem::path(r.candidate).filename().string()] = std::string(to_string(r.verdict));
  return out;
}

TEST(Evaluate, EndToEndOnCpu) {
  ScratchDir dir("dice_eval_cpu");
  write_workload(dir);
  EvalOptions o = options_for(dir);
  o.device = "cpu";
  std::ostringstream progress;
  const EvalRun run = run_eval(o, progress);
  const auto v = verdicts_by_candidate(run);
  EXPECT_EQ(v.at("relu.py"), "correct") << progress.str();
  EXPECT_EQ(v.at("relu__wrong.py"), "mismatch");
  EXPECT_EQ(v.at("relu__syntax.py"), "parse_error");
  EXPECT_EQ(v.at("relu__nomodel.py"), "no_model_new");
  EXPECT_EQ(v.at("relu__output.txt"), "correct");
  const auto& all = run.summary.back();
  EXPECT_EQ(all.attempted, 5);
  EXPECT_EQ(all.correct, 2);
  EXPECT_EQ(all.compiled, 3);
  // Every record reached the file, one JSON line each.
  std::istringstream lines(read_file(o.out_dir / "records.jsonl"));
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto r = EvalRecord::from_json(nlohmann::json::parse(line));
    EXPECT_FALSE(r.candidate_hash.empty());
    ++n;
  }
  EXPECT_EQ(n, 5);
  EXPECT_TRUE(std::filesystem::exists(o.out_dir / "summary.md"));
  EXPECT_TRUE(std::filesystem::exists(o.out_dir / "summary.json"));
}

TEST(Evaluate, CompileOnlyWithoutDevice) {
  ScratchDir dir("dice_eval_none");
  write_workload(dir);
  EvalOptions o = options_for(dir);
  o.device = "none";
  std::ostringstream progress;
  const EvalRun run = run_eval(o, progress);
  const auto v = verdicts_by_candidate(run);
  EXPECT_EQ(v.at("relu.py"), "compiled");
  EXPECT_EQ(v.at("relu__syntax.py"), "parse_error");
  EXPECT_FALSE(run.device_note.empty());
}

/// Under the default policy, statically detectable cheats are rejected before anything is built
/// (no device needed); the reference as its own candidate (calibration) is exempt.
TEST(Evaluate, StrictPolicyRejectsStaticallyWithoutDevice) {
  ScratchDir dir("dice_eval_strict");
  write_workload(dir);
  EvalOptions o = options_for(dir);
  o.policy = "strict";
  o.device = "none";
  o.reference_as_candidate = true;
  std::ostringstream progress;
  const EvalRun run = run_eval(o, progress);
  std::map<std::string, const EvalRecord*> by_name;
  for (const auto& r : run.records)
    by_name[std::filesystem::path(r.candidate).filename().string()] = &r;
  const auto& copy = *by_name.at("relu.py");
  EXPECT_EQ(copy.verdict, Verdict::kRejected) << progress.str();
  EXPECT_EQ(copy.rules(), std::vector<std::string>{"static.reference_model"});
  EXPECT_EQ(copy.compile_status, "skipped");
  EXPECT_EQ(by_name.at("relu__output.txt")->rules(),
            std::vector<std::string>{"static.torch_compute"});
  EXPECT_EQ(by_name.at("relu__syntax.py")->verdict, Verdict::kParseError);
  for (const auto& r : run.records) {
    if (r.candidate.find("reference as candidate") != std::string::npos) {
      EXPECT_EQ(r.verdict, Verdict::kCompiled) << r.to_json().dump();
      EXPECT_TRUE(r.findings.empty());
    }
  }
  EXPECT_EQ(run.summary.back().correct, 0);
}

TEST(Evaluate, BadInputsAreInputErrors) {
  ScratchDir dir("dice_eval_bad");
  EvalOptions o = options_for(dir);
  std::ostringstream progress;
  EXPECT_THROW(run_eval(o, progress), InputError);  // no problems folder
  dir.write("problems/relu.py", testing::kReluProblem);
  o.candidates.clear();
  EXPECT_THROW(run_eval(o, progress), InputError);  // no candidates
  o.reference_as_candidate = true;
  o.protocol = "fastest";
  EXPECT_THROW(run_eval(o, progress), InputError);
  o.protocol = "dice";
  o.policy = "paranoid";
  EXPECT_THROW(run_eval(o, progress), InputError);
  o.policy = "strict";
  o.rule_overrides = {"static.nope=warn"};
  EXPECT_THROW(run_eval(o, progress), InputError);
}

}  // namespace
}  // namespace dice::eval
