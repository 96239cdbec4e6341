#include "dice/evaluator/worker.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace dice::eval {
namespace {

using nlohmann::json;
using testing::ScratchDir;

json request(const std::filesystem::path& problem, const std::filesystem::path& candidate) {
  return {{"problem", {{"id", "relu"}, {"path", problem.string()}}},
          {"candidate", {{"path", candidate.string()}, {"extensions", json::object()}}},
          {"options",
           {{"protocol", "dice"},
            {"seed", 42},
            {"correct_trials", 2},
            {"timing_trials", 3},
            {"warmup", 1},
            {"measure_timing", true}}}};
}

/// One worker process on the CPU: an honest candidate, one that kills the worker, one that hangs;
/// after each failure the next request gets a fresh worker.
TEST(Worker, VerdictsCrashesAndHangsOnCpu) {
  ScratchDir dir("dice_worker_test");
  const auto problem = dir.write("relu.py", testing::kReluProblem);
  const auto good =
      dir.write("good.py", std::string(testing::kReluProblem) + "\nModelNew = Model\n");
  const auto crash = dir.write("crash.py", R"(import os, signal
import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        os.kill(os.getpid(), signal.SIGSEGV)
)");
  const auto hang = dir.write("hang.py", R"(import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        while True:
            pass
)");
  StageTimeouts timeouts;
  timeouts.load = std::chrono::seconds(120);
  timeouts.correctness = std::chrono::seconds(5);
  WorkerClient worker(testing::test_python(), "cpu", dir.path() / "worker.log", timeouts);

  const auto ok = worker.evaluate(request(problem, good));
  ASSERT_TRUE(ok.result) << ok.reason << ok.log_tail;
  EXPECT_EQ(ok.result->value("verdict", ""), "correct") << ok.result->dump();
  EXPECT_EQ(ok.result->at("timing").at("candidate_ms").size(), 3u);
  EXPECT_EQ(ok.result->at("correctness").at("trials").size(), 2u);

  const auto crashed = worker.evaluate(request(problem, crash));
  EXPECT_FALSE(crashed.result);
  EXPECT_EQ(crashed.verdict, Verdict::kRuntimeError);
  EXPECT_NE(crashed.reason.find("signal 11"), std::string::npos) << crashed.reason;

  const auto hung = worker.evaluate(request(problem, hang));
  EXPECT_FALSE(hung.result);
  EXPECT_EQ(hung.verdict, Verdict::kTimeout);
  EXPECT_NE(hung.reason.find("correctness"), std::string::npos) << hung.reason;

  const auto again = worker.evaluate(request(problem, good));
  ASSERT_TRUE(again.result) << again.reason;
  EXPECT_EQ(again.result->value("verdict", ""), "correct");
  EXPECT_EQ(worker.starts(), 3);
}

}  // namespace
}  // namespace dice::eval
