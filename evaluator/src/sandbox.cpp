#include "dice/evaluator/sandbox.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "dice/core/error.h"
#include "dice/core/files.h"

namespace dice::eval {

namespace fs = std::filesystem;

namespace {

std::optional<std::string> read_small(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

struct ProcStat {
  std::size_t threads = 0;
  std::size_t rss_pages = 0;
  double cpu_ticks = 0;
  pid_t ppid = 0;
};

/// Fields of /proc/PID/stat after the command name (which may hold spaces and parentheses).
std::optional<ProcStat> read_stat(pid_t pid) {
  const auto text = read_small(fmt::format("/proc/{}/stat", pid));
  if (!text) return std::nullopt;
  const auto close = text->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text->substr(close + 1));
  std::vector<std::string> f;
  for (std::string w; fields >> w;) f.push_back(w);
  // f[0] is field 3 (state): field N is f[N - 3].
  if (f.size() < 22) return std::nullopt;
  ProcStat s;
  try {
    s.ppid = static_cast<pid_t>(std::stol(f[1]));
    s.cpu_ticks = std::stod(f[11]) + std::stod(f[12]) + std::stod(f[13]) + std::stod(f[14]);
    s.threads = static_cast<std::size_t>(std::stoul(f[17]));
    s.rss_pages = static_cast<std::size_t>(std::max(0L, std::stol(f[21])));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return s;
}

std::vector<pid_t> numeric_entries(const fs::path& dir) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos)
      out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

bool children_files_exist() {
  return fs::exists(fmt::format("/proc/{0}/task/{0}/children", ::getpid()));
}

std::size_t mem_total_bytes() {
  const auto text = read_small("/proc/meminfo");
  if (!text) return std::size_t{16} << 30;
  std::istringstream in(*text);
  for (std::string key; in >> key;) {
    std::size_t kb = 0;
    std::string unit;
    in >> kb >> unit;
    if (key == "MemTotal:") return kb * 1024;
  }
  return std::size_t{16} << 30;
}

/// Tasks (threads) of the real user `uid` on the machine now.
std::size_t user_tasks(uid_t uid) {
  std::size_t n = 0;
  for (pid_t pid : numeric_entries("/proc")) {
    const auto text = read_small(fmt::format("/proc/{}/status", pid));
    if (!text) continue;
    std::istringstream in(*text);
    bool mine = false;
    std::size_t threads = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("Uid:")) {
        std::istringstream u(line.substr(4));
        uid_t real = 0;
        u >> real;
        mine = real == uid;
      } else if (line.starts_with("Threads:")) {
        threads = static_cast<std::size_t>(std::stoul(line.substr(8)));
      }
    }
    if (mine) n += threads;
  }
  return n;
}

/// A pids cgroup whose children we may create, or empty (cgroup v1 pids hierarchy, or v2 with
/// the pids controller enabled below our cgroup).
fs::path find_pids_cgroup() {
  const auto self = read_small("/proc/self/cgroup");
  if (!self) return {};
  std::istringstream in(*self);
  std::vector<fs::path> candidates;
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':');
    const auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (controllers == "pids")
      candidates.push_back(fs::path("/sys/fs/cgroup/pids") / path.substr(1));
    if (controllers.empty() && fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
      const fs::path dir = fs::path("/sys/fs/cgroup") / path.substr(1);
      const auto subtree = read_small(dir / "cgroup.subtree_control");
      if (subtree && subtree->find("pids") != std::string::npos) candidates.push_back(dir);
    }
  }
  for (const auto& dir : candidates) {
    const fs::path probe = dir / fmt::format("dice-probe-{}", ::getpid());
    std::error_code ec;
    if (!fs::create_directory(probe, ec) && !fs::exists(probe)) continue;
    const bool ok = write_text(probe / "pids.max", "16");
    fs::remove(probe, ec);
    if (ok) return dir;
  }
  return {};
}

std::vector<std::string> bwrap_args(const std::string& bwrap, const fs::path& scratch,
                                    std::size_t scratch_bytes, bool root) {
  std::vector<std::string> a = {bwrap,
                                "--ro-bind",
                                "/",
                                "/",
                                "--dev-bind",
                                "/dev",
                                "/dev",
                                "--proc",
                                "/proc",
                                "--tmpfs",
                                "/dev/shm",
                                "--perms",
                                "1777",
                                "--size",
                                std::to_string(scratch_bytes),
                                "--tmpfs",
                                scratch.string(),
                                "--unshare-net",
                                "--unshare-pid",
                                "--unshare-ipc",
                                "--unshare-uts",
                                "--die-with-parent",
                                "--chdir",
                                scratch.string()};
  if (root) a.insert(a.end(), {"--cap-drop", "ALL"});
  a.emplace_back("--");
  return a;
}

// Processes one sandboxed tree may have: bubblewrap's two, Python, and what a run-time build
// (ninja, nvcc and its passes) starts. Candidates themselves may not fork (static.concurrency).
constexpr std::size_t kMaxProcesses = 32;

std::string size_text(std::size_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / double(std::size_t{1} << 30));
}

}  // namespace

std::vector<pid_t> marked_processes(const fs::path& home) {
  const std::string marker = "HOME=" + home.string();
  std::vector<pid_t> out;
  const pid_t self = ::getpid();
  for (pid_t pid : numeric_entries("/proc")) {
    if (pid == self) continue;
    const auto env = read_small(fmt::format("/proc/{}/environ", pid));
    if (!env) continue;
    for (std::size_t at = 0; at < env->size();) {
      const auto end = env->find('\0', at);
      const std::string_view entry(env->data() + at,
                                   (end == std::string::npos ? env->size() : end) - at);
      if (entry == marker) {
        out.push_back(pid);
        break;
      }
      if (end == std::string::npos) break;
      at = end + 1;
    }
  }
  return out;
}

std::size_t kill_marked(const fs::path& home) {
  std::size_t killed = 0;
  // Stopped first, then killed: a process that forks while we look is stopped before its
  // children can fork again, and the sweep repeats until it finds nothing.
  for (int sweep = 0; sweep < 100; ++sweep) {
    const auto pids = marked_processes(home);
    if (pids.empty()) break;
    for (pid_t pid : pids) ::kill(pid, SIGSTOP);
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    killed += pids.size();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return killed;
}

TreeUsage sample_tree(pid_t root) {
  TreeUsage usage;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid), only without children files
  const bool children = children_files_exist();
  if (!children)
    for (pid_t pid : numeric_entries("/proc"))
      if (auto s = read_stat(pid)) parent_of.emplace_back(pid, s->ppid);
  std::vector<pid_t> todo{root};
  std::set<pid_t> seen;
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    if (!seen.insert(pid).second) continue;
    const auto s = read_stat(pid);
    if (!s) continue;
    ++usage.processes;
    usage.tasks += s->threads;
    usage.rss_bytes += s->rss_pages * static_cast<std::size_t>(page);
    usage.cpu_seconds += s->cpu_ticks / ticks;
    if (children) {
      for (pid_t tid : numeric_entries(fmt::format("/proc/{}/task", pid))) {
        const auto text = read_small(fmt::format("/proc/{}/task/{}/children", pid, tid));
        if (!text) continue;
        std::istringstream in(*text);
        for (pid_t child; in >> child;) todo.push_back(child);
      }
    } else {
      for (const auto& [child, parent] : parent_of)
        if (parent == pid) todo.push_back(child);
    }
  }
  return usage;
}

Watchdog::Watchdog(pid_t root, TreeLimits limits) : root_(root), limits_(limits) {
  if (limits_.cpu_seconds > 0) cpu_start_ = sample_tree(root_).cpu_seconds;
}

std::optional<Violation> Watchdog::check() {
  if (limits_.memory_bytes == 0 && limits_.tasks == 0 && limits_.cpu_seconds <= 0)
    return std::nullopt;
  // Only /proc/PID/stat is read: it needs no lock of the process's memory map (smaps does, and
  // a process that forks without end holds it most of the time).
  const TreeUsage u = sample_tree(root_);
  if ((limits_.tasks > 0 && u.tasks >= limits_.tasks) ||
      (limits_.processes > 0 && u.processes > limits_.processes))
    return Violation{Violation::Kind::kTasks,
                     fmt::format("{} processes with {} threads: past the sandbox's limit of {} "
                                 "processes or {} tasks (a fork bomb or a thread storm)",
                                 u.processes, u.tasks, limits_.processes, limits_.tasks)};
  if (limits_.memory_bytes > 0 && u.rss_bytes > limits_.memory_bytes && u.processes > 3)
    return Violation{
        Violation::Kind::kTasks,
        fmt::format("{} processes (forks) hold {} of host memory (limit {})", u.processes,
                    size_text(u.rss_bytes), size_text(limits_.memory_bytes))};
  if (limits_.memory_bytes > 0 && u.rss_bytes > limits_.memory_bytes)
    return Violation{Violation::Kind::kMemory,
                     fmt::format("host memory of the candidate's processes reached {} (limit {})",
                                 size_text(u.rss_bytes), size_text(limits_.memory_bytes))};
  if (limits_.cpu_seconds > 0 && u.cpu_seconds - cpu_start_ > limits_.cpu_seconds)
    return Violation{Violation::Kind::kCpu,
                     fmt::format("used {:.0f} s of CPU time (limit {:.0f} s)",
                                 u.cpu_seconds - cpu_start_, limits_.cpu_seconds)};
  return std::nullopt;
}

SandboxLease::SandboxLease(fs::path scratch, fs::path cgroup)
    : scratch_(std::move(scratch)), cgroup_(std::move(cgroup)) {}

SandboxLease::SandboxLease(SandboxLease&& other) noexcept
    : scratch_(std::exchange(other.scratch_, {})), cgroup_(std::exchange(other.cgroup_, {})) {}

SandboxLease& SandboxLease::operator=(SandboxLease&& other) noexcept {
  if (this != &other) {
    release();
    scratch_ = std::exchange(other.scratch_, {});
    cgroup_ = std::exchange(other.cgroup_, {});
  }
  return *this;
}

SandboxLease::~SandboxLease() {
  release();
}

void SandboxLease::release() {
  std::error_code ec;
  // Processes that left the tree (a new session whose leader exited, a double fork) are found by
  // the $HOME every sandboxed process inherits; bubblewrap's pid namespace and the pids cgroup
  // already end them where those exist, this covers a root run with neither.
  if (!scratch_.empty()) kill_marked(scratch_);
  if (!cgroup_.empty()) {
    // Whatever is still in the cgroup (daemonized children included) is killed, then the
    // cgroup removed once the kernel has let go of its tasks.
    for (int attempt = 0; attempt < 200; ++attempt) {
      if (const auto procs = read_small(cgroup_ / "cgroup.procs")) {
        std::istringstream in(*procs);
        for (pid_t pid; in >> pid;) ::kill(pid, SIGKILL);
      }
      if (fs::remove(cgroup_, ec) || !fs::exists(cgroup_)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    cgroup_.clear();
  }
  if (!scratch_.empty()) {
    fs::remove_all(scratch_, ec);
    scratch_.clear();
  }
}

ScratchRoot::ScratchRoot(fs::path path) : path_(std::move(path)) {
  std::error_code ec;
  made_ = fs::create_directories(path_, ec);
  if (ec) throw Error("cannot make the sandbox folder " + path_.string() + ": " + ec.message());
}

ScratchRoot::~ScratchRoot() {
  std::error_code ec;
  if (made_) fs::remove(path_, ec);  // only when empty: a lease or another Sandbox may remain
}

namespace {

/// The Sandbox's scratch root: the option, or a per-process folder in the temporary folder.
/// Throws dice::InputError for an unknown mode first, so that nothing is made for it.
fs::path scratch_root_of(const SandboxOptions& options) {
  if (options.mode != "auto" && options.mode != "bwrap" && options.mode != "none")
    throw InputError("--sandbox " + options.mode + ": expected auto, bwrap or none");
  return options.scratch_root.empty()
             ? fs::temp_directory_path() / fmt::format("dice-sandbox-{}", ::getpid())
             : options.scratch_root;
}

}  // namespace

Sandbox::Sandbox(SandboxOptions options)
    : options_(std::move(options)), scratch_root_(scratch_root_of(options_)) {
  root_ = ::geteuid() == 0;
  pids_root_ = find_pids_cgroup();
  if (pids_root_.empty() && !root_) nproc_limit_ = user_tasks(::getuid()) + options_.max_tasks;
  std::string why;
  if (options_.mode == "none") {
    why = "--sandbox none";
  } else {
    const fs::path probe = scratch_root_.path() / "probe";
    fs::create_directories(probe);
    ProcessOptions p{.argv = bwrap_args(options_.bwrap, probe, 1 << 20, root_)};
    p.argv.emplace_back("true");
    try {
      const auto r = run_command(p, std::chrono::seconds(30), 4000);
      bwrap_ok_ = r.status.ok();
      if (!bwrap_ok_) {
        why = fmt::format("{} does not run here ({}): {}", options_.bwrap, r.status.describe(),
                          tail_text(r.output, 300));
        if (r.status.exited && r.status.code == 127) why = options_.bwrap + " not found";
      }
    } catch (const Error& e) {
      why = e.what();
    }
    std::error_code ec;
    fs::remove_all(probe, ec);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    if (!bwrap_ok_ && options_.mode == "bwrap")
      throw InputError("--sandbox bwrap: bubblewrap cannot run: " + why);
  }
  isolation_ = bwrap_ok_ ? "bubblewrap (no network, read-only file system, private scratch, pid "
                           "namespace; " +
                               process_limit_note() + ")"
                         : "none: " + why + " (" + process_limit_note() + ")";
}

std::string Sandbox::process_limit_note() const {
  const std::string limits =
      fmt::format("memory {} per worker by watchdog, file size {}",
                  size_text(worker_limits().memory_bytes), size_text(options_.file_size_bytes));
  if (!pids_root_.empty())
    return fmt::format("{} tasks by pids cgroup; {}", options_.max_tasks, limits);
  if (nproc_limit_ > 0)
    return fmt::format("{} tasks by RLIMIT_NPROC and watchdog; {}", options_.max_tasks, limits);
  return fmt::format("{} tasks by watchdog only (root without a pids cgroup); {}",
                     options_.max_tasks, limits);
}

std::string Sandbox::fallback_isolation(const std::string& why) const {
  return "none: bubblewrap worker failed to start: " + why.substr(0, 300) + " (" +
         process_limit_note() + ")";
}

TreeLimits Sandbox::worker_limits() const {
  const std::size_t memory =
      options_.worker_memory_bytes > 0
          ? options_.worker_memory_bytes
          : mem_total_bytes() / 10 * 6 / std::max<std::size_t>(1, options_.workers);
  return {memory, options_.max_tasks, static_cast<double>(options_.worker_cpu.count()),
          kMaxProcesses};
}

TreeLimits Sandbox::capture_limits(std::chrono::seconds timeout) const {
  return {options_.capture_memory_bytes, options_.max_tasks,
          static_cast<double>(timeout.count()) * 2, kMaxProcesses};
}

SandboxLease Sandbox::wrap(ProcessOptions& process, bool with_bwrap) const {
  const long n = counter_++;
  const fs::path scratch = scratch_root_.path() / fmt::format("s{}", n);
  std::error_code ec;
  fs::create_directories(scratch, ec);
  if (ec) throw Error("cannot make the sandbox folder " + scratch.string() + ": " + ec.message());
  fs::permissions(scratch, fs::perms::owner_all, ec);
  fs::path cgroup;
  if (!pids_root_.empty()) {
    cgroup = pids_root_ / fmt::format("dice-{}-{}", ::getpid(), n);
    if (fs::create_directory(cgroup, ec) &&
        write_text(cgroup / "pids.max", std::to_string(options_.max_tasks))) {
      process.cgroup_procs = cgroup / "cgroup.procs";
    } else {
      fs::remove(cgroup, ec);
      cgroup.clear();
    }
  }
  SandboxLease lease(scratch, cgroup);
  // The working directory changes: relative paths are made absolute first.
  const fs::path base = process.cwd.empty() ? fs::current_path() : process.cwd;
  for (std::size_t i = 1; i < process.argv.size(); ++i) {
    const fs::path p(process.argv[i]);
    if (p.is_relative() && fs::exists(base / p, ec)) process.argv[i] = (base / p).string();
  }
  if (auto it = process.env.find("PYTHONPATH"); it != process.env.end())
    if (fs::path(it->second).is_relative()) it->second = (base / it->second).string();
  process.env["HOME"] = scratch.string();
  process.env["TMPDIR"] = scratch.string();
  process.env["XDG_CACHE_HOME"] = (scratch / ".cache").string();
  process.env["PYTHONDONTWRITEBYTECODE"] = "1";
  process.limits.file_size_bytes = options_.file_size_bytes;
  process.limits.processes = nproc_limit_;
  if (with_bwrap && bwrap_ok_) {
    std::vector<std::string> argv =
        bwrap_args(options_.bwrap, scratch, options_.scratch_bytes, root_);
    argv.insert(argv.end(), process.argv.begin(), process.argv.end());
    process.argv = std::move(argv);
    process.cwd.clear();
  } else {
    process.cwd = scratch;
  }
  return lease;
}

WatchedResult run_watched(ProcessOptions options, std::chrono::milliseconds timeout,
                          TreeLimits limits, std::size_t max_output) {
  options.pipe_stdout = true;
  options.stderr_to_stdout = true;
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  Process p = Process::spawn(options);
  Watchdog watchdog(p.pid(), limits);
  WatchedResult out;
  CommandResult& result = out.command;
  std::string line;
  for (;;) {
    const auto wake = std::min(deadline, Clock::now() + std::chrono::milliseconds(50));
    const auto status = p.read_line(line, wake);
    if (status == Process::ReadStatus::kLine) {
      append_line_tail(result.output, line, max_output);
      continue;
    }
    if (status == Process::ReadStatus::kEof) break;
    if (Clock::now() >= deadline) {
      result.timed_out = true;
      break;
    }
    if ((out.violation = watchdog.check())) break;
  }
  if (result.timed_out || out.violation) {
    result.status = p.kill();
  } else {
    std::tie(result.status, result.timed_out) = p.wait_until(deadline);
  }
  result.output = tail_text(result.output, max_output);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

}  // namespace dice::eval
