#pragma once
// Isolation of model-written code (evaluator/README.md, "Isolation"): bubblewrap when it works
// (no network, read-only file system, a private scratch tmpfs as working directory and $HOME, its
// own pid/IPC namespaces, killed with its parent), resource limits (file size, processes through
// a pids cgroup or RLIMIT_NPROC) and a watchdog over the process tree (resident memory, tasks,
// CPU time). Where bubblewrap cannot run, the limits and the watchdog still apply and every
// record says so.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dice/core/process.h"

namespace dice::eval {

struct SandboxOptions {
  std::string mode = "auto";            ///< auto (bubblewrap if it works), bwrap (required), none
  std::string bwrap = "bwrap";          ///< the bubblewrap program, looked up on PATH
  std::size_t worker_memory_bytes = 0;  ///< resident memory of a worker's tree; 0: 60% of RAM
  std::size_t workers = 1;              ///< workers at once (the default memory is shared)
  std::size_t capture_memory_bytes = std::size_t{4} << 30;  ///< of a capture process's tree
  std::size_t max_tasks = 1024;                             ///< processes + threads of one sandbox
  std::size_t file_size_bytes = std::size_t{4} << 30;       ///< RLIMIT_FSIZE
  std::size_t scratch_bytes = std::size_t{1} << 30;         ///< size of the private scratch tmpfs
  std::chrono::seconds worker_cpu{3600};  ///< CPU seconds one request may use (all threads)
  std::filesystem::path scratch_root;     ///< empty: the system's temporary folder
};

/// Limits a watchdog enforces on a process tree; zero means unlimited.
struct TreeLimits {
  std::size_t memory_bytes = 0;  ///< resident memory of all processes (forks counted in full)
  std::size_t tasks = 0;         ///< threads of all processes
  double cpu_seconds = 0;
  std::size_t processes = 0;
};

/// A snapshot of a process tree, read from /proc.
struct TreeUsage {
  std::size_t processes = 0;
  std::size_t tasks = 0;  ///< threads of all processes
  std::size_t rss_bytes = 0;
  double cpu_seconds = 0;  ///< user + system, including reaped children
};

/// The usage of `root` and every descendant (found through /proc/PID/task/TID/children, or a
/// scan of /proc where the kernel lacks it). A process that is gone counts as nothing.
TreeUsage sample_tree(pid_t root);

/// Processes other than this one whose environment has HOME=`home` exactly: every process a
/// sandbox starts inherits its scratch folder as $HOME (Sandbox::wrap), also after it left the
/// process tree. Processes whose environment cannot be read are skipped.
std::vector<pid_t> marked_processes(const std::filesystem::path& home);

/// Stops and kills marked_processes(`home`), sweeping again until none is left (at most 100
/// sweeps). Returns how many kills were sent.
std::size_t kill_marked(const std::filesystem::path& home);

/// A limit a process tree went past.
struct Violation {
  enum class Kind { kMemory, kTasks, kCpu };
  Kind kind = Kind::kMemory;
  std::string reason;
};

/// Samples a process tree against limits; CPU time counts from construction.
class Watchdog {
 public:
  Watchdog(pid_t root, TreeLimits limits);
  /// The first limit the tree is past now, if any.
  std::optional<Violation> check();

 private:
  pid_t root_;
  TreeLimits limits_;
  double cpu_start_ = 0;
};

/// The private resources of one sandboxed process: its scratch folder and its pids cgroup.
/// Destruction kills whatever is left in the cgroup and removes both.
class SandboxLease {
 public:
  SandboxLease() = default;
  SandboxLease(std::filesystem::path scratch, std::filesystem::path cgroup);
  SandboxLease(SandboxLease&& other) noexcept;
  SandboxLease& operator=(SandboxLease&& other) noexcept;
  SandboxLease(const SandboxLease&) = delete;
  SandboxLease& operator=(const SandboxLease&) = delete;
  ~SandboxLease();

  const std::filesystem::path& scratch() const { return scratch_; }

 private:
  void release();
  std::filesystem::path scratch_;
  std::filesystem::path cgroup_;
};

/// The folder the leases' scratch folders go under. Made on construction; removed on destruction
/// when this object made it and it is empty then (another Sandbox of the same process may still
/// use the per-process default). Throws dice::Error if the folder cannot be made.
class ScratchRoot {
 public:
  explicit ScratchRoot(std::filesystem::path path);
  ~ScratchRoot();
  ScratchRoot(const ScratchRoot&) = delete;
  ScratchRoot& operator=(const ScratchRoot&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  bool made_ = false;
};

/// Probes what this machine allows once, then wraps processes that run model-written code.
/// Thread-safe after construction. Leaves no folder behind in the temporary folder.
class Sandbox {
 public:
  /// Probes bubblewrap (unless mode is none) and a pids cgroup. Throws dice::InputError for an
  /// unknown mode, or for mode bwrap when bubblewrap cannot run (with its error).
  explicit Sandbox(SandboxOptions options);

  /// "bubblewrap (...)" or "none: <why>", with how processes are limited: what records carry.
  const std::string& isolation() const { return isolation_; }
  bool bubblewrap() const { return bwrap_ok_; }
  const SandboxOptions& options() const { return options_; }

  /// Rewrites `process` to run sandboxed: behind bubblewrap when it works and `with_bwrap`,
  /// scratch folder as working directory, $HOME and $TMPDIR, file-size and process limits, the
  /// pids cgroup. Returns the lease to keep while the process runs. Throws dice::Error if the
  /// scratch folder cannot be made.
  SandboxLease wrap(ProcessOptions& process, bool with_bwrap = true) const;

  /// Watchdog limits of a worker (per request) and of a capture process.
  TreeLimits worker_limits() const;
  TreeLimits capture_limits(std::chrono::seconds timeout) const;

  /// The isolation line of a worker that had to start without bubblewrap.
  std::string fallback_isolation(const std::string& why) const;

 private:
  std::string process_limit_note() const;

  SandboxOptions options_;
  ScratchRoot scratch_root_;
  std::filesystem::path pids_root_;  ///< a pids cgroup we may create children in, or empty
  std::size_t nproc_limit_ = 0;      ///< RLIMIT_NPROC for non-root users, or 0
  bool bwrap_ok_ = false;
  bool root_ = false;
  std::string isolation_;
  mutable std::atomic<long> counter_{0};
};

/// The outcome of run_watched().
struct WatchedResult {
  CommandResult command;
  std::optional<Violation> violation;  ///< set when the watchdog killed the process
};

/// run_command() with a watchdog over the process tree, sampled every 50 ms.
WatchedResult run_watched(ProcessOptions options, std::chrono::milliseconds timeout,
                          TreeLimits limits, std::size_t max_output = 1 << 20);

}  // namespace dice::eval
