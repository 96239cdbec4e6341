#include "dice/core/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "dice/core/error.h"

namespace dice {

namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR2);  // wakes the waiter at destruction
  return set;
}

/// The parent pid in /proc/<pid>/stat (field 4; the command name in field 2 may hold spaces).
pid_t parent_of(const std::filesystem::path& stat) {
  std::ifstream in(stat);
  std::string text;
  std::getline(in, text);
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 4 > text.size()) return -1;
  // ") S 1234 ..."
  const std::string rest = text.substr(close + 2);
  const auto space = rest.find(' ');
  if (space == std::string::npos) return -1;
  return static_cast<pid_t>(std::atol(rest.c_str() + space + 1));
}

}  // namespace

SignalStop::SignalStop(std::stop_source source) : source_(std::move(source)) {
  const sigset_t set = stop_signals();
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) throw Error("cannot block SIGINT/SIGTERM");
  waiter_ = std::jthread([this](std::stop_token stop) {
    const sigset_t wanted = stop_signals();
    while (!stop.stop_requested()) {
      int sig = 0;
      if (sigwait(&wanted, &sig) != 0) continue;
      if (sig == SIGUSR2) continue;      // the destructor's wake-up; the loop condition decides
      if (signal_.exchange(sig) != 0) {  // the second signal: no more waiting
        kill_child_process_groups();
        std::_Exit(128 + sig);
      }
      source_.request_stop();
    }
  });
}

SignalStop::~SignalStop() {
  waiter_.request_stop();
  pthread_kill(waiter_.native_handle(), SIGUSR2);
}

int kill_child_process_groups() {
  const pid_t self = ::getpid();
  int killed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (parent_of(entry.path() / "stat") != self) continue;
    const auto pid = static_cast<pid_t>(std::atol(name.c_str()));
    // A child that leads its own group takes the group with it; one that does not (a child not
    // started by dice::Process) goes alone.
    if (::getpgid(pid) == pid) ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    ++killed;
  }
  return killed;
}

}  // namespace dice
