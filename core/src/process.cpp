#include "dice/core/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "dice/core/error.h"
#include "dice/core/files.h"

extern char** environ;

namespace dice {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

/// A pipe whose ends close on destruction unless released.
struct Pipe {
  int read_end = -1;
  int write_end = -1;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw Error("pipe2 failed: " + errno_text());
    read_end = fds[0];
    write_end = fds[1];
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    if (read_end >= 0) ::close(read_end);
    if (write_end >= 0) ::close(write_end);
  }
  int release_read() { return std::exchange(read_end, -1); }
  int release_write() { return std::exchange(write_end, -1); }
};

double cpu_seconds(const rusage& usage) {
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

ExitStatus decode(int raw, const rusage& usage) {
  ExitStatus s;
  s.cpu_seconds = cpu_seconds(usage);
  if (WIFEXITED(raw)) {
    s.exited = true;
    s.code = WEXITSTATUS(raw);
  } else if (WIFSIGNALED(raw)) {
    s.signal = WTERMSIG(raw);
  }
  return s;
}

int open_append(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot open " + path.string() + " for writing: " + errno_text());
  return fd;
}

}  // namespace

std::string ExitStatus::describe() const {
  if (exited) return "exit code " + std::to_string(code);
  return "killed by signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
}

Process Process::spawn(const ProcessOptions& options) {
  if (options.argv.empty()) throw Error("spawn: empty command line");
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string name(entry.substr(0, entry.find('=')));
    if (options.env.contains(name)) continue;
    if (std::find(options.env_unset.begin(), options.env_unset.end(), name) !=
        options.env_unset.end())
      continue;
    env_strings.emplace_back(entry);
  }
  for (const auto& [name, value] : options.env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = options.argv;
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  // execvpe looks argv[0] up on the child's PATH.
  const std::string cwd = options.cwd.string();
  const std::string cgroup_procs = options.cgroup_procs.string();

  std::optional<Pipe> in_pipe, out_pipe;
  if (options.pipe_stdin) in_pipe.emplace();
  if (options.pipe_stdout) out_pipe.emplace();
  int out_file = -1, err_file = -1;
  if (!options.pipe_stdout && !options.stdout_file.empty())
    out_file = open_append(options.stdout_file);
  if (!options.stderr_file.empty()) {
    try {
      err_file = open_append(options.stderr_file);
    } catch (...) {
      if (out_file >= 0) ::close(out_file);
      throw;
    }
  }
  const int dev_null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::string why = errno_text();
    for (int fd : {out_file, err_file, dev_null})
      if (fd >= 0) ::close(fd);
    throw Error("cannot start " + options.argv[0] + ": fork failed: " + why);
  }
  if (pid == 0) {
    if (!cgroup_procs.empty()) {
      const int fd = ::open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(125);
      ::close(fd);
    }
    ::setpgid(0, 0);
    ::signal(SIGPIPE, SIG_DFL);
    // Signals our threads block (SignalStop) are the child's again; the child dies with us even
    // when we are killed with SIGKILL (no orphaned workers or compilers).
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(125);
    if (in_pipe) {
      ::dup2(in_pipe->read_end, STDIN_FILENO);
    } else if (dev_null >= 0) {
      ::dup2(dev_null, STDIN_FILENO);
    }
    if (out_pipe) {
      ::dup2(out_pipe->write_end, STDOUT_FILENO);
    } else if (out_file >= 0) {
      ::dup2(out_file, STDOUT_FILENO);
    }
    if (options.stderr_to_stdout) {
      ::dup2(STDOUT_FILENO, STDERR_FILENO);
    } else if (err_file >= 0) {
      ::dup2(err_file, STDERR_FILENO);
    }
    const auto limit = [](int resource, std::size_t value) {
      if (value == 0) return;
      const rlimit r{static_cast<rlim_t>(value), static_cast<rlim_t>(value)};
      ::setrlimit(resource, &r);
    };
    limit(RLIMIT_CPU, options.limits.cpu_seconds);
    limit(RLIMIT_AS, options.limits.address_space_bytes);
    limit(RLIMIT_FSIZE, options.limits.file_size_bytes);
    limit(RLIMIT_NPROC, options.limits.processes);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::execvpe(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also in the parent, so that kill() never races the child's own setpgid
  for (int fd : {out_file, err_file, dev_null})
    if (fd >= 0) ::close(fd);
  Process p;
  p.pid_ = pid;
  if (in_pipe) p.stdin_fd_ = in_pipe->release_write();
  if (out_pipe) p.stdout_fd_ = out_pipe->release_read();
  return p;
}

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      stdin_fd_(std::exchange(other.stdin_fd_, -1)),
      stdout_fd_(std::exchange(other.stdout_fd_, -1)),
      read_buffer_(std::move(other.read_buffer_)),
      status_(std::move(other.status_)) {}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0 && !status_) kill();
    close_fds();
    pid_ = std::exchange(other.pid_, -1);
    stdin_fd_ = std::exchange(other.stdin_fd_, -1);
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    read_buffer_ = std::move(other.read_buffer_);
    status_ = std::move(other.status_);
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0 && !status_) kill();
  close_fds();
}

void Process::close_fds() {
  if (stdin_fd_ >= 0) ::close(std::exchange(stdin_fd_, -1));
  if (stdout_fd_ >= 0) ::close(std::exchange(stdout_fd_, -1));
}

void Process::write_line(std::string_view line) {
  if (stdin_fd_ < 0) throw Error("process " + std::to_string(pid_) + ": stdin is closed");
  std::string data(line);
  data.push_back('\n');
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(stdin_fd_, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("process " + std::to_string(pid_) +
                  ": cannot write to its stdin: " + errno_text());
    }
    done += static_cast<std::size_t>(n);
  }
}

void Process::close_stdin() {
  if (stdin_fd_ >= 0) ::close(std::exchange(stdin_fd_, -1));
}

Process::ReadStatus Process::read_line(std::string& line, Clock::time_point deadline) {
  if (stdout_fd_ < 0) return ReadStatus::kEof;
  for (;;) {
    const auto newline = read_buffer_.find('\n');
    if (newline != std::string::npos) {
      line.assign(read_buffer_, 0, newline);
      read_buffer_.erase(0, newline + 1);
      return ReadStatus::kLine;
    }
    const auto now = Clock::now();
    if (now >= deadline) return ReadStatus::kTimeout;
    const auto wait_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    pollfd pfd{stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(wait_ms, 1'000'000)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw Error("poll failed: " + errno_text());
    }
    if (ready == 0) continue;
    char chunk[65536];
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw Error("read failed: " + errno_text());
    }
    if (n == 0) {
      if (!read_buffer_.empty()) {  // a last line without '\n'
        line = std::exchange(read_buffer_, {});
        return ReadStatus::kLine;
      }
      return ReadStatus::kEof;
    }
    read_buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::optional<ExitStatus> Process::try_wait() {
  if (status_) return status_;
  if (pid_ <= 0) return std::nullopt;
  int raw = 0;
  rusage usage{};
  const pid_t r = ::wait4(pid_, &raw, WNOHANG, &usage);
  if (r == pid_) {
    status_ = decode(raw, usage);
    ::kill(-pid_, SIGKILL);  // anything the child left behind in its group
  }
  return status_;
}

std::pair<ExitStatus, bool> Process::wait_until(Clock::time_point deadline) {
  for (;;) {
    if (auto s = try_wait()) return {*s, false};
    if (Clock::now() >= deadline) return {kill(), true};
    ::usleep(2000);
  }
}

ExitStatus Process::kill() {
  if (status_) return *status_;
  if (pid_ <= 0) return {};
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int raw = 0;
  rusage usage{};
  while (::wait4(pid_, &raw, 0, &usage) < 0 && errno == EINTR) {
  }
  status_ = decode(raw, usage);
  return *status_;
}

CommandResult run_command(ProcessOptions options, std::chrono::milliseconds timeout,
                          std::size_t max_output) {
  options.pipe_stdout = true;
  options.stderr_to_stdout = true;
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  Process p = Process::spawn(options);
  CommandResult result;
  std::string line;
  for (;;) {
    const auto status = p.read_line(line, deadline);
    if (status == Process::ReadStatus::kLine) {
      append_line_tail(result.output, line, max_output);
      continue;
    }
    if (status == Process::ReadStatus::kTimeout) result.timed_out = true;
    break;
  }
  if (result.timed_out) {
    result.status = p.kill();
  } else {
    std::tie(result.status, result.timed_out) = p.wait_until(deadline);
  }
  result.output = tail_text(result.output, max_output);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace dice
