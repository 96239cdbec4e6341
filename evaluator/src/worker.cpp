#include "dice/evaluator/worker.h"

#include <fmt/format.h>
#include <signal.h>

#include "dice/core/error.h"
#include "dice/core/files.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr std::size_t kLogTail = 6000;
}

WorkerClient::WorkerClient(PythonEnv env, std::string device, fs::path log_path,
                           StageTimeouts timeouts, const Sandbox* sandbox)
    : env_(std::move(env)),
      device_(std::move(device)),
      log_path_(std::move(log_path)),
      timeouts_(timeouts),
      sandbox_(sandbox) {
  if (sandbox_ != nullptr) isolation_ = sandbox_->isolation();
}

WorkerClient::~WorkerClient() {
  stop();
}

void WorkerClient::stop() {
  if (!process_) return;
  try {
    process_->write_line(R"({"op": "shutdown"})");
    process_->close_stdin();
    process_->wait_until(Clock::now() + std::chrono::seconds(10));
  } catch (const Error&) {
  }
  drop_process();
}

void WorkerClient::drop_process() {
  process_.reset();  // kills the group if still running
  lease_.reset();    // kills what left the group, removes the scratch folder and the cgroup
}

std::string WorkerClient::log_since(std::uintmax_t offset) const {
  std::error_code ec;
  const auto size = fs::file_size(log_path_, ec);
  if (ec || size <= offset) return {};
  return read_file_tail(log_path_, std::min<std::uintmax_t>(size - offset, kLogTail));
}

void WorkerClient::start() {
  ProcessOptions options{.argv = env_.argv({"serve", "--device", device_})};
  options.env["PYTHONPATH"] = env_.worker_path.string();
  options.env["PYTHONUNBUFFERED"] = "1";
  options.pipe_stdin = true;
  options.pipe_stdout = true;
  options.stderr_file = log_path_;
  std::error_code ec;
  const auto offset = fs::exists(log_path_) ? fs::file_size(log_path_, ec) : 0;
  const bool bwrap = sandbox_ != nullptr && sandbox_->bubblewrap() && use_bwrap_;
  if (sandbox_ != nullptr) lease_.emplace(sandbox_->wrap(options, use_bwrap_));
  process_.emplace(Process::spawn(options));
  ++starts_;
  std::string line;
  // A worker that cannot start under bubblewrap is started again without it: the first try gets
  // at most 90 s so that the retry fits the start limit's budget.
  const auto deadline = Clock::now() + (bwrap ? std::min<std::chrono::seconds>(
                                                    timeouts_.start, std::chrono::seconds(90))
                                              : timeouts_.start);
  for (;;) {
    const auto status = process_->read_line(line, deadline);
    if (status != Process::ReadStatus::kLine) {
      const auto exit = process_->kill();
      process_.reset();
      lease_.reset();
      const std::string why = fmt::format(
          "{}: {}",
          status == Process::ReadStatus::kTimeout ? "no ready message in time" : exit.describe(),
          log_since(offset));
      if (bwrap) {  // e.g. the GPU is not usable inside the sandbox on this machine
        use_bwrap_ = false;
        isolation_ = sandbox_->fallback_isolation(why);
        return start();
      }
      throw Error(fmt::format("worker for {} did not start ({})", device_, why));
    }
    try {
      const json event = json::parse(line);
      if (event.value("event", "") == "ready") {
        device_name_ = event.value("device_name", device_);
        ready_ = event;
        return;
      }
    } catch (const json::exception&) {
    }
  }
}

bool WorkerClient::ensure_started() {
  if (process_) return true;
  try {
    start();
    failed_starts_ = 0;
    return true;
  } catch (const Error&) {
    if (++failed_starts_ >= 3) throw;
    return false;
  }
}

WorkerReply WorkerClient::evaluate(json request) {
  if (!ensure_started()) {
    WorkerReply reply;
    reply.reason = "the worker process could not be started";
    return reply;
  }
  std::error_code ec;
  const auto offset = fs::file_size(log_path_, ec);
  const long id = next_id_++;
  request["op"] = "evaluate";
  request["id"] = id;
  WorkerReply reply;
  try {
    process_->write_line(request.dump());
  } catch (const Error& e) {
    reply.reason = std::string("worker does not accept requests: ") + e.what();
    reply.log_tail = log_since(offset);
    drop_process();
    return reply;
  }
  std::string stage = "load";
  auto deadline = Clock::now() + timeouts_.load;
  std::string line;
  Watchdog watchdog(process_->pid(),
                    sandbox_ != nullptr ? sandbox_->worker_limits() : TreeLimits{});
  for (;;) {
    const auto wake = std::min(deadline, Clock::now() + std::chrono::milliseconds(100));
    const auto status = process_->read_line(line, wake);
    if (status == Process::ReadStatus::kTimeout && Clock::now() < deadline) {
      if (const auto violation = watchdog.check()) {
        process_->kill();
        drop_process();
        reply.reason = fmt::format("stage {}: {}", stage, violation->reason);
        reply.log_tail = log_since(offset);
        reply.verdict = violation->kind == Violation::Kind::kMemory ? Verdict::kOutOfMemory
                        : violation->kind == Violation::Kind::kCpu  ? Verdict::kTimeout
                                                                    : Verdict::kRejected;
        if (violation->kind == Violation::Kind::kTasks) reply.rule = "sandbox.processes";
        return reply;
      }
      continue;
    }
    if (status == Process::ReadStatus::kTimeout) {
      process_->kill();
      drop_process();
      reply.verdict = Verdict::kTimeout;
      const auto limit = stage == "load"          ? timeouts_.load
                         : stage == "correctness" ? timeouts_.correctness
                                                  : timeouts_.timing;
      reply.reason = fmt::format("stage {} ran past its limit of {} s", stage, limit.count());
      reply.log_tail = log_since(offset);
      return reply;
    }
    if (status == Process::ReadStatus::kEof) {
      const auto [exit, _] = process_->wait_until(Clock::now() + std::chrono::seconds(10));
      drop_process();
      reply.verdict = Verdict::kRuntimeError;
      reply.reason = fmt::format("the worker died during stage {}: {}", stage, exit.describe());
      reply.signal = exit.signal;
      if (!exit.exited && exit.signal == SIGXFSZ) {
        reply.verdict = Verdict::kRejected;
        reply.rule = "sandbox.file_size";
        reply.reason = fmt::format("stage {}: wrote a file larger than the sandbox allows", stage);
      }
      reply.log_tail = log_since(offset);
      return reply;
    }
    json event;
    try {
      event = json::parse(line);
    } catch (const json::exception&) {
      continue;  // not ours: the protocol stream carries only JSON
    }
    if (event.value("id", -1L) != id) continue;
    const std::string kind = event.value("event", "");
    if (kind == "stage") {
      stage = event.value("stage", stage);
      const auto limit = stage == "correctness" ? timeouts_.correctness
                         : stage == "timing"    ? timeouts_.timing
                                                : timeouts_.load;
      deadline = Clock::now() + limit;
    } else if (kind == "result") {
      if (event.value("fatal", false)) {
        process_->close_stdin();
        process_->wait_until(Clock::now() + std::chrono::seconds(10));
        drop_process();
      }
      reply.log_tail = log_since(offset);
      reply.result = std::move(event);
      return reply;
    }
  }
}

}  // namespace dice::eval
