#pragma once
// Child processes with pipes, deadlines and whole-group termination: how the orchestrator runs
// compilers and supervises Python workers without letting any of them bring it down.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dice {

using Clock = std::chrono::steady_clock;

/// How a child process ended.
struct ExitStatus {
  bool exited = false;  ///< true: returned `code`; false: killed by `signal`
  int code = 0;
  int signal = 0;
  /// CPU time (user + system) of the child and of the descendants it waited for, in seconds.
  double cpu_seconds = 0.0;
  bool ok() const { return exited && code == 0; }
  /// "exit code 1", "killed by signal 11 (Segmentation fault)".
  std::string describe() const;
};

/// Resource limits applied in the child before exec (setrlimit). Zero means "leave as is".
struct ResourceLimits {
  std::size_t cpu_seconds = 0;
  std::size_t address_space_bytes = 0;
  std::size_t file_size_bytes = 0;
  std::size_t processes = 0;  ///< RLIMIT_NPROC (tasks of the real user; root is exempt)
};

/// What to start. The child gets its own process group, so that killing it kills everything it
/// started, an empty signal mask, and SIGKILL when the thread that started it ends (so that no
/// child outlives a killed dice: start long-lived children from threads that outlive them).
/// Standard streams not piped or redirected are connected to /dev/null (stdin) or inherited
/// (stdout, stderr).
struct ProcessOptions {
  std::vector<std::string> argv;           ///< argv[0] is looked up on PATH
  std::map<std::string, std::string> env;  ///< variables set on top of ours
  std::vector<std::string> env_unset;      ///< variables removed
  std::filesystem::path cwd;               ///< empty: ours
  bool pipe_stdin = false;                 ///< write_line() feeds it
  bool pipe_stdout = false;                ///< read_line() reads it
  std::filesystem::path stdout_file;       ///< if set (and not piped): appended to
  std::filesystem::path stderr_file;       ///< if set: appended to
  bool stderr_to_stdout = false;           ///< stderr joins stdout
  ResourceLimits limits;
  /// If set: a cgroup's `cgroup.procs` that the child joins before exec (so that everything it
  /// starts is counted there from the first instruction); a child that cannot join exits 125.
  std::filesystem::path cgroup_procs;
};

/// A running child process. Destroying a Process that still runs kills its group and reaps it.
class Process {
 public:
  /// Starts the process. Throws dice::Error naming argv[0] if fork, the pipes or the redirection
  /// files fail; a program that cannot be executed exits with code 127.
  static Process spawn(const ProcessOptions& options);

  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  pid_t pid() const { return pid_; }

  /// Writes `line` plus '\n' to the child's stdin. Throws dice::Error if the child closed it.
  void write_line(std::string_view line);
  /// Closes the child's stdin (it sees end of file).
  void close_stdin();

  enum class ReadStatus { kLine, kTimeout, kEof };
  /// Reads one line (without '\n') from the child's stdout, waiting until `deadline`.
  ReadStatus read_line(std::string& line, Clock::time_point deadline);

  /// The exit status if the child has ended (reaps it), else nothing.
  std::optional<ExitStatus> try_wait();
  /// Waits until `deadline`; on time-out kills the group and reaps. Returns the status and whether
  /// it timed out.
  std::pair<ExitStatus, bool> wait_until(Clock::time_point deadline);
  /// SIGKILL to the whole process group, then reaps.
  ExitStatus kill();

 private:
  Process() = default;
  void close_fds();

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string read_buffer_;
  std::optional<ExitStatus> status_;
};

/// The result of run_command().
struct CommandResult {
  ExitStatus status;
  bool timed_out = false;
  double seconds = 0.0;  ///< wall-clock time
  std::string output;    ///< stdout and stderr together, at most the last `max_output` bytes
};

/// Runs a command to completion with a wall-clock timeout, capturing its output.
/// Throws dice::Error only if the process cannot be started.
CommandResult run_command(ProcessOptions options, std::chrono::milliseconds timeout,
                          std::size_t max_output = 1 << 20);

}  // namespace dice
