#pragma once
// Orderly stops on SIGINT and SIGTERM, and the children a stopped process must not leave behind.

#include <atomic>
#include <csignal>
#include <stop_token>
#include <thread>

namespace dice {

/// Turns SIGINT and SIGTERM into a stop request. Construct it in main() before any other thread
/// starts: it blocks both signals in the calling thread (threads started later inherit the mask;
/// children started with dice::Process get an empty mask back) and waits for them in its own
/// thread. The first signal requests stop on `source`; a second one kills every child process
/// group (kill_child_process_groups) and exits at once with 128 + the signal number.
class SignalStop {
 public:
  explicit SignalStop(std::stop_source source);
  ~SignalStop();
  SignalStop(const SignalStop&) = delete;
  SignalStop& operator=(const SignalStop&) = delete;

  /// The signal that requested the stop; 0 if none came.
  int signal() const { return signal_.load(); }

 private:
  std::stop_source source_;
  std::atomic<int> signal_{0};
  std::jthread waiter_;
};

/// Sends SIGKILL to the process group of every child of this process (dice::Process makes each
/// child the leader of its own group, so compilers' and workers' own children go too). Returns
/// how many groups were signalled. Reads /proc.
int kill_child_process_groups();

}  // namespace dice
