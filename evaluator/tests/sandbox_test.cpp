#include "dice/evaluator/sandbox.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "dice/core/error.h"
#include "dice/evaluator/evaluate.h"
#include "dice/evaluator/worker.h"
#include "test_support.h"

namespace dice::eval {
namespace {

using testing::ScratchDir;

TEST(Sandbox, SampleTreeSeesChildren) {
  ProcessOptions o{.argv = {"sh", "-c", "sleep 5 & sleep 5 & sleep 5 & wait"}};
  Process p = Process::spawn(o);
  TreeUsage u;
  for (int i = 0; i < 200 && u.processes < 4; ++i) {
    ::usleep(10000);
    u = sample_tree(p.pid());
  }
  EXPECT_EQ(u.processes, 4u);
  EXPECT_GE(u.tasks, 4u);
  EXPECT_GT(u.rss_bytes, 0u);
  Watchdog tight(p.pid(), {.memory_bytes = 0, .tasks = 3, .cpu_seconds = 0});
  const auto v = tight.check();
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, Violation::Kind::kTasks);
  Watchdog loose(p.pid(), {.memory_bytes = std::size_t{1} << 40, .tasks = 100, .cpu_seconds = 100});
  EXPECT_FALSE(loose.check());
  p.kill();
  EXPECT_EQ(sample_tree(p.pid()).processes, 0u);
}

TEST(Sandbox, RunWatchedStopsAMemoryHog) {
  const auto py = testing::test_python().python;
  ProcessOptions o{.argv = {py, "-c", "x = [b'1' * (1 << 26) for _ in range(64)]; print('done')"}};
  const auto r =
      run_watched(o, std::chrono::seconds(60),
                  {.memory_bytes = std::size_t{256} << 20, .tasks = 0, .cpu_seconds = 0});
  ASSERT_TRUE(r.violation) << r.command.output;
  EXPECT_EQ(r.violation->kind, Violation::Kind::kMemory);
  EXPECT_EQ(r.command.output.find("done"), std::string::npos);
}

TEST(Sandbox, ModesAndIsolationLine) {
  EXPECT_THROW(Sandbox({.mode = "maybe"}), InputError);
  EXPECT_THROW(Sandbox({.mode = "bwrap", .bwrap = "/nonexistent/bwrap"}), InputError);
  const Sandbox none({.mode = "none"});
  EXPECT_FALSE(none.bubblewrap());
  EXPECT_EQ(none.isolation().rfind("none: --sandbox none", 0), 0u) << none.isolation();
  const Sandbox missing({.mode = "auto", .bwrap = "/nonexistent/bwrap"});
  EXPECT_FALSE(missing.bubblewrap());
  EXPECT_NE(missing.isolation().find("not found"), std::string::npos) << missing.isolation();
}

/// A Sandbox removes the per-process folder it made, also when bubblewrap mode fails to start,
/// and leaves a folder it did not make (or one still holding files) in place.
TEST(Sandbox, LeavesNoFolderBehind) {
  const auto per_process =
      std::filesystem::temp_directory_path() / ("dice-sandbox-" + std::to_string(::getpid()));
  ASSERT_FALSE(std::filesystem::exists(per_process));
  {
    const Sandbox none({.mode = "none"});
    EXPECT_TRUE(std::filesystem::is_directory(per_process));
    ProcessOptions p{.argv = {"true"}};
    const SandboxLease lease = none.wrap(p);
    EXPECT_EQ(lease.scratch().parent_path(), per_process);
  }
  EXPECT_FALSE(std::filesystem::exists(per_process));
  EXPECT_THROW(Sandbox({.mode = "bwrap", .bwrap = "/nonexistent/bwrap"}), InputError);
  EXPECT_FALSE(std::filesystem::exists(per_process));

  const ScratchDir dir("sandbox_root");
  const auto kept = dir.path() / "kept";
  std::filesystem::create_directories(kept);
  { const Sandbox given({.mode = "none", .scratch_root = kept}); }
  EXPECT_TRUE(std::filesystem::is_directory(kept));
  const auto made = dir.path() / "made";
  {
    const Sandbox given({.mode = "none", .scratch_root = made});
    std::ofstream(made / "result.txt") << "finished";
  }
  EXPECT_TRUE(std::filesystem::exists(made / "result.txt"));
}

/// Inside bubblewrap: $HOME is private and writable, the rest of the file system is read-only,
/// there is no network.
TEST(Sandbox, BubblewrapConfinesAProcess) {
  const Sandbox sandbox({});
  if (!sandbox.bubblewrap()) GTEST_SKIP() << sandbox.isolation();
  ScratchDir dir("dice_sandbox");
  const std::string script =
      "import os, socket\n"
      "open(os.path.expanduser('~/ok'), 'w').write('1')\n"
      "for path in ['" +
      dir.path().string() +
      "/escaped', '/etc/dice_escaped']:\n"
      "    try:\n        open(path, 'w')\n        print('WROTE', path)\n"
      "    except OSError as e:\n        print('blocked', e.errno)\n"
      "try:\n    socket.create_connection(('1.1.1.1', 80), timeout=3)\n    print('NET')\n"
      "except OSError as e:\n    print('no network', e.errno)\n";
  ProcessOptions o{.argv = {testing::test_python().python, "-c", script}};
  const auto lease = sandbox.wrap(o);
  const auto r = run_command(o, std::chrono::seconds(60));
  EXPECT_TRUE(r.status.ok()) << r.output;
  EXPECT_EQ(r.output.find("WROTE"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("NET"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no network"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "escaped"));
}

/// Sleepers that leave the process tree (a new session, their parent gone) are still found by
/// the sandbox's $HOME and killed when the lease ends; under bubblewrap the pid namespace ends
/// them as soon as the sandboxed command exits.
TEST(Sandbox, ProcessesThatLeaveTheTreeAreKilled) {
  const std::string script =
      "import os, subprocess\n"
      "pid = os.fork()\n"
      "if pid == 0:\n"
      "    os.setsid()\n"
      "    for _ in range(3):\n"
      "        subprocess.Popen(['sleep', '60'], stdout=subprocess.DEVNULL,\n"
      "                         stderr=subprocess.DEVNULL, start_new_session=True)\n"
      "    os._exit(0)\n"
      "os.waitpid(pid, 0)\n"
      "print('left')\n";
  const auto marked_after = [](const SandboxLease& lease) {
    std::vector<pid_t> pids = marked_processes(lease.scratch());
    for (int i = 0; i < 100 && !pids.empty(); ++i) {
      ::usleep(20000);
      pids = marked_processes(lease.scratch());
    }
    return pids;
  };
  {
    const Sandbox none({.mode = "none"});
    ProcessOptions o{.argv = {testing::test_python().python, "-c", script}};
    auto lease = none.wrap(o);
    const auto r = run_command(o, std::chrono::seconds(60));
    ASSERT_TRUE(r.status.ok()) << r.output;
    EXPECT_EQ(marked_processes(lease.scratch()).size(), 3u);
    const auto scratch = lease.scratch();
    lease = SandboxLease();
    EXPECT_TRUE(marked_processes(scratch).empty());
  }
  const Sandbox sandbox({});
  if (!sandbox.bubblewrap()) GTEST_SKIP() << sandbox.isolation();
  ProcessOptions o{.argv = {testing::test_python().python, "-c", script}};
  const auto lease = sandbox.wrap(o);
  const auto r = run_command(o, std::chrono::seconds(60));
  ASSERT_TRUE(r.status.ok()) << r.output;
  EXPECT_NE(r.output.find("left"), std::string::npos) << r.output;
  EXPECT_TRUE(marked_after(lease).empty());
}

/// A bubblewrap that passes the probe but cannot run the worker (as when a GPU is not usable
/// inside it): the worker starts again without it and says so.
TEST(Sandbox, WorkerFallsBackWhenBubblewrapFails) {
  ScratchDir dir("dice_fallback");
  const auto fake = dir.write("fake-bwrap",
                              "#!/bin/sh\n"
                              "for last; do :; done\n"
                              "[ \"$last\" = true ] && exit 0\n"
                              "echo 'no GPU in here' >&2; exit 1\n");
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  const Sandbox sandbox({.bwrap = fake.string()});
  ASSERT_TRUE(sandbox.bubblewrap()) << sandbox.isolation();
  const auto problem = dir.write("relu.py", testing::kReluProblem);
  const auto good = dir.write("good.py",
                              "import torch\nclass ModelNew(torch.nn.Module):\n"
                              "    def forward(self, x):\n        return torch.relu(x)\n");
  WorkerClient worker(testing::test_python(), "cpu", dir.path() / "worker.log", {}, &sandbox);
  const auto reply = worker.evaluate(
      {{"problem", {{"id", "relu"}, {"path", problem.string()}}},
       {"candidate", {{"path", good.string()}, {"extensions", nlohmann::json::object()}}},
       {"options", {{"correct_trials", 1}, {"measure_timing", false}}}});
  ASSERT_TRUE(reply.result) << reply.reason;
  EXPECT_EQ(reply.result->value("verdict", ""), "correct");
  EXPECT_EQ(worker.isolation().rfind("none: bubblewrap worker failed to start", 0), 0u)
      << worker.isolation();
  EXPECT_EQ(worker.starts(), 2);
}

/// Every attack of evaluator/defenses/attacks on the CPU, in one run under policy kernelbench
/// (static rules off, so that the sandbox meets them), followed by an honest candidate: each
/// ends with a clear verdict and the run goes on.
TEST(Sandbox, AttacksEndAsVerdictsAndTheRunGoesOn) {
  ScratchDir dir("dice_attacks");
  const std::filesystem::path attacks =
      std::filesystem::path(DICE_SOURCE_DIR) / "evaluator/defenses/attacks";
  dir.write("problems/relu.py", testing::kReluProblem);
  for (const char* name : {"relu__a_write_home.py", "relu__a_socket.py", "relu__a_fork_bomb.py",
                           "relu__a_host_memory.py", "relu__a_hang.py",
                           "relu__a_import_fork_bomb.py", "relu__a_rewrite_code.py"})
    dir.write(std::string("candidates/") + name, read_file(attacks / name));
  dir.write("candidates/relu__zz_honest.py",
            "import torch\nclass ModelNew(torch.nn.Module):\n"
            "    def forward(self, x):\n        return torch.relu(x)\n");
  EvalOptions o;
  o.problems = (dir.path() / "problems").string();
  o.candidates = (dir.path() / "candidates").string();
  o.out_dir = dir.path() / "out";
  o.cache_dir = dir.path() / "cache";
  o.device = "cpu";
  o.jobs = 2;
  o.correct_trials = 1;
  o.timing_trials = 2;
  o.warmup = 1;
  o.policy = "kernelbench";
  o.python = testing::test_python();
  o.capture_timeout = std::chrono::seconds(120);
  o.stages.correctness = std::chrono::seconds(20);
  o.sandbox.worker_memory_bytes = std::size_t{3} << 30;
  o.sandbox.max_tasks = 512;
  o.sandbox.scratch_root = dir.path() / "sandbox";
  std::ostringstream progress;
  const EvalRun run = run_eval(o, progress);
  std::map<std::string, const EvalRecord*> by_name;
  for (const auto& r : run.records)
    by_name[std::filesystem::path(r.candidate).filename().string()] = &r;
  const auto verdict = [&](const std::string& name) {
    return std::string(to_string(by_name.at(name)->verdict));
  };
  const bool bwrap = run.records.front().isolation.starts_with("bubblewrap");
  EXPECT_EQ(verdict("relu__a_fork_bomb.py"), "rejected") << progress.str();
  EXPECT_EQ(by_name.at("relu__a_fork_bomb.py")->rules(),
            std::vector<std::string>{"sandbox.processes"});
  EXPECT_EQ(verdict("relu__a_import_fork_bomb.py"), "rejected");
  EXPECT_EQ(verdict("relu__a_host_memory.py"), "out_of_memory");
  EXPECT_EQ(verdict("relu__a_hang.py"), "timeout");
  EXPECT_EQ(verdict("relu__zz_honest.py"), "correct");
  if (bwrap) {
    EXPECT_EQ(verdict("relu__a_write_home.py"), "runtime_error");
    EXPECT_NE(by_name.at("relu__a_write_home.py")->reasons.back().find("Read-only file system"),
              std::string::npos);
    EXPECT_EQ(verdict("relu__a_socket.py"), "runtime_error");
    EXPECT_EQ(verdict("relu__a_rewrite_code.py"), "import_error");
  } else {
    EXPECT_EQ(verdict("relu__a_rewrite_code.py"), "rejected");  // sandbox.code_changed
  }
  for (const auto& r : run.records) EXPECT_FALSE(r.isolation.empty()) << r.candidate;
  // Nothing the attacks started is left: every sandbox of the run had a scratch folder under
  // o.sandbox.scratch_root as $HOME.
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string env;
    try {
      env = read_file(entry.path() / "environ");
    } catch (const Error&) {
      continue;
    }
    if (env.find("HOME=" + o.sandbox.scratch_root.string() + "/") != std::string::npos)
      left.push_back(entry.path().filename().string());
  }
  EXPECT_TRUE(left.empty()) << left.size() << " processes left, e.g. pid " << left.front();
}

}  // namespace
}  // namespace dice::eval
