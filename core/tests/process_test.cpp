#include "dice/core/process.h"

#include <gtest/gtest.h>

#include <csignal>

#include "dice/core/error.h"

using namespace std::chrono_literals;

namespace dice {
namespace {

TEST(RunCommand, CapturesOutputAndExitCode) {
  const auto r = run_command({.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"}}, 10s);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 3);
  EXPECT_NE(r.output.find("out"), std::string::npos);
  EXPECT_NE(r.output.find("err"), std::string::npos);
}

TEST(RunCommand, TimesOutAndKillsTheWholeGroup) {
  // The grandchild keeps the pipe open; the kill of the group must end it too.
  const auto start = Clock::now();
  const auto r = run_command({.argv = {"sh", "-c", "sleep 30 & sleep 30"}}, 300ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.status.exited);
  EXPECT_EQ(r.status.signal, SIGKILL);
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(RunCommand, ReportsSignalDeath) {
  const auto r = run_command({.argv = {"sh", "-c", "kill -SEGV $$"}}, 10s);
  EXPECT_FALSE(r.status.exited);
  EXPECT_EQ(r.status.signal, SIGSEGV);
  EXPECT_NE(r.status.describe().find("signal 11"), std::string::npos);
}

TEST(RunCommand, MissingProgramExits127) {
  const auto r = run_command({.argv = {"dice-no-such-program"}}, 10s);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 127);
}

TEST(RunCommand, AppliesEnvironment) {
  ProcessOptions o{.argv = {"sh", "-c", "echo \"$DICE_TEST_VAR\""}};
  o.env["DICE_TEST_VAR"] = "hello";
  const auto r = run_command(o, 10s);
  EXPECT_EQ(r.output, "hello\n");
}

TEST(RunCommand, CpuLimitKillsBusyLoop) {
  ProcessOptions o{.argv = {"sh", "-c", "while :; do :; done"}};
  o.limits.cpu_seconds = 1;
  const auto r = run_command(o, 20s);
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.status.ok());
}

TEST(Process, LineProtocolWithDeadline) {
  ProcessOptions o{.argv = {"sh", "-c", "while read l; do echo \"got $l\"; done"}};
  o.pipe_stdin = true;
  o.pipe_stdout = true;
  Process p = Process::spawn(o);
  p.write_line("a");
  std::string line;
  ASSERT_EQ(p.read_line(line, Clock::now() + 5s), Process::ReadStatus::kLine);
  EXPECT_EQ(line, "got a");
  EXPECT_EQ(p.read_line(line, Clock::now() + 100ms), Process::ReadStatus::kTimeout);
  p.close_stdin();
  EXPECT_EQ(p.read_line(line, Clock::now() + 5s), Process::ReadStatus::kEof);
  const auto [status, timed_out] = p.wait_until(Clock::now() + 5s);
  EXPECT_FALSE(timed_out);
  EXPECT_TRUE(status.ok());
}

TEST(Process, DestructorKillsRunningChild) {
  pid_t pid = 0;
  {
    Process p = Process::spawn({.argv = {"sleep", "30"}});
    pid = p.pid();
  }
  EXPECT_NE(::kill(pid, 0), 0);  // reaped and gone
}

TEST(Process, EmptyCommandThrows) {
  EXPECT_THROW(Process::spawn({}), Error);
}

}  // namespace
}  // namespace dice
