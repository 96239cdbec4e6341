#include "dice/evaluator/pipeline.h"

#include <fmt/format.h>
#include <signal.h>

#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/core/hash.h"
#include "dice/core/signals.h"
#include "dice/evaluator/evaluate.h"
#include "record_parts.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

struct Pipeline::GpuTask {
  Job job;
  PreparedCandidate prepared;
  Clock::time_point started;
};

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<double> samples(const json& timing, const char* key) {
  if (!timing.contains(key) || !timing.at(key).is_array()) return {};
  try {
    return timing.at(key).get<std::vector<double>>();
  } catch (const json::exception&) {
    return {};
  }
}

SandboxOptions sandbox_options(const PipelineConfig& config) {
  SandboxOptions o = config.sandbox;
  o.workers = std::max<std::size_t>(1, config.devices.size());
  return o;
}

/// The policy's part of a worker request (PROTOCOL.md): which dynamic checks run and how.
json with_rules(json options, const RulePolicy& policy) {
  for (const char* key : {"policy", "rule_overrides", "static_only"}) options.erase(key);
  options.update(policy.worker_options());
  return options;
}

}  // namespace

Pipeline::Pipeline(const Toolchain& toolchain, PipelineConfig config, ResultStore& store,
                   RecordSink sink)
    : toolchain_(toolchain),
      config_(std::move(config)),
      store_(store),
      sink_(std::move(sink)),
      builder_(toolchain_, config_.build),
      sandbox_(sandbox_options(config_)),
      preparer_(config_.python, builder_, config_.cache_dir, toolchain_.torch_version,
                config_.capture_timeout, {.sandbox = &sandbox_}),
      gpu_queue_(std::make_unique<BlockingQueue<GpuTask>>()) {
  fs::create_directories(config_.log_dir);
  for (std::size_t s = 0; s < config_.devices.size(); ++s)
    threads_.emplace_back([this, s] { gpu_loop(s); });
  for (int t = 0; t < std::max(1, config_.jobs); ++t) threads_.emplace_back([this] { cpu_loop(); });
}

Pipeline::~Pipeline() {
  bool idle = false;
  {
    const std::lock_guard lock(mutex_);
    idle = finished_ >= submitted_ && error_.empty();
  }
  if (idle) {  // workers are told to shut down, nothing is killed
    cpu_queue_.close();
    gpu_queue_->close();
  } else {
    cancel();
  }
  threads_.clear();  // joins
}

void Pipeline::submit(std::vector<Job> jobs) {
  {
    const std::lock_guard lock(mutex_);
    submitted_ += jobs.size();
  }
  std::size_t refused = 0;
  for (auto& job : jobs)
    if (!cpu_queue_.push(std::move(job))) ++refused;
  if (refused > 0) drop(refused);
}

bool Pipeline::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return finished_ >= submitted_ || cancelled_.load() || !error_.empty(); });
  return finished_ >= submitted_ && !cancelled_.load() && error_.empty();
}

std::string Pipeline::error() const {
  const std::lock_guard lock(mutex_);
  return error_;
}

std::size_t Pipeline::submitted() const {
  const std::lock_guard lock(mutex_);
  return submitted_;
}

std::size_t Pipeline::finished() const {
  const std::lock_guard lock(mutex_);
  return finished_;
}

void Pipeline::cancel() {
  if (cancelled_.exchange(true)) return;
  cpu_queue_.close();
  gpu_queue_->close();
  idle_.notify_all();
  // Compilers, captures and workers die now; the threads waiting on them see the flag and commit
  // nothing. Children started while this runs die in a later round.
  for (int round = 0; round < 3; ++round) {
    kill_child_process_groups();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Pipeline::drop(std::size_t n) {
  {
    const std::lock_guard lock(mutex_);
    finished_ += n;
  }
  idle_.notify_all();
}

fs::path Pipeline::problem_file(const Problem& problem) {
  const fs::path path =
      fs::absolute(config_.cache_dir / "problems" / (sha256_hex(problem.code) + ".py"));
  if (!fs::exists(path)) write_file_atomic(path, problem.code);
  return path;
}

void Pipeline::complete(const Job& job, EvalRecord record, const std::string& worker) {
  if (cancelled_.load()) return;  // may come from a process we killed: redone on resume
  if (store_.finish(job.item.id, record, worker) && sink_) sink_(job, record);
  drop();
}

void Pipeline::cpu_loop() {
  while (auto job = cpu_queue_.pop()) {
    if (cancelled_.load()) return;
    const auto started = Clock::now();
    const WorkItem& item = job->item;
    PreparedCandidate prep;
    try {
      const RulePolicy policy = policy_of(job->options);
      prep = preparer_.prepare(item.candidate, &policy, job->options.value("static_only", false));
    } catch (const std::exception& e) {
      prep.failed = Verdict::kCompileError;
      prep.compile_status = "failed";
      prep.reasons.push_back(std::string("preparing the candidate failed: ") + e.what());
    }
    if (cancelled_.load()) return;
    const bool needs_worker = !prep.failed && !config_.devices.empty();
    if (needs_worker && item.attempts >= config_.max_attempts) {
      EvalRecord r = record_of(*job, prep);
      r.verdict = Verdict::kRuntimeError;
      r.reasons.push_back(fmt::format(
          "the run was interrupted {} times while this candidate was being evaluated; it is not "
          "tried again",
          item.attempts));
      r.seconds = seconds_since(started);
      complete(*job, std::move(r), "");
    } else if (needs_worker) {
      if (!gpu_queue_->push({std::move(*job), std::move(prep), started})) drop();
    } else {
      EvalRecord r = record_of(*job, prep);
      r.verdict = prep.failed ? *prep.failed : Verdict::kCompiled;
      if (!prep.failed) r.reasons.push_back(config_.device_note);
      r.seconds = seconds_since(started);
      complete(*job, std::move(r), "");
    }
  }
}

void Pipeline::gpu_loop(std::size_t slot) {
  const std::string& device = config_.devices[slot];
  const std::string label =
      device == "cpu" && config_.devices.size() > 1 ? fmt::format("cpu#{}", slot) : device;
  WorkerClient worker(config_.python, device, config_.log_dir / fmt::format("worker-{}.log", slot),
                      config_.stages, &sandbox_);
  while (auto task = gpu_queue_->pop()) {
    if (cancelled_.load()) return;
    try {
      run_on_worker(worker, label, *task);
    } catch (const Error& e) {  // the worker cannot start at all
      {
        const std::lock_guard lock(mutex_);
        if (error_.empty()) error_ = e.what();
      }
      idle_.notify_all();
      cancel();
      return;
    }
  }
}

json Pipeline::reference_about(const Problem& problem, const json& options, const json& ready) {
  return {{"problem", sha256_hex(problem.code)},
          {"device", ready.value("device_name", "")},
          {"protocol", options.value("protocol", "dice")},
          {"seed", options.value("seed", 42)},
          {"timing_trials", options.value("timing_trials", 100)},
          {"warmup", options.value("warmup", 10)},
          {"torch", ready.value("torch", "")},
          {"cuda", ready.value("cuda", "")},
          {"driver", ready.value("driver", "")},
          {"fresh_inputs", options.value("fresh_inputs", false)},
          {"tf32", options.value("protocol", "dice") == "kernelbench"}};
}

EvalRecord Pipeline::record_of(const Job& job, const PreparedCandidate& prep) const {
  EvalRecord r = base_record(job.item.problem, job.item.candidate, prep);
  r.policy = job.item.candidate.reference ? "off (the reference as its own candidate)"
                                          : policy_label(job.options);
  r.findings = prep.findings;
  r.isolation = prep.isolation.empty() ? sandbox_.isolation() : prep.isolation;
  return r;
}

void Pipeline::run_on_worker(WorkerClient& worker, const std::string& label, GpuTask& task) {
  const Job& job = task.job;
  const WorkItem& item = job.item;
  const std::string protocol = job.options.value("protocol", "dice");
  json extensions = json::object();
  for (const auto& [digest, so] : task.prepared.extensions) extensions[digest] = so.string();
  const fs::path problem_path = problem_file(item.problem);
  const RulePolicy policy =
      item.candidate.reference ? RulePolicy::named("kernelbench") : policy_of(job.options);
  const std::string& code_hash = task.prepared.code_hash;

  // A worker killed from outside (SIGKILL, SIGTERM: an operator, the out-of-memory killer) gets
  // one more try on a fresh worker before its death counts against the candidate.
  for (int attempt = 0;; ++attempt) {
    EvalRecord r = record_of(job, task.prepared);
    json options = with_rules(job.options, policy);
    options["fresh_inputs"] =
        protocol == "dice" && policy.action("dynamic.stale_output") != RuleAction::kOff;
    std::string reference_key;
    std::optional<std::vector<double>> stored;
    const bool timed = options.value("measure_timing", true);
    if (timed && !config_.fresh_reference_timing && worker.ensure_started()) {
      reference_key =
          sha256_hex(reference_about(item.problem, options, worker.ready_event()).dump());
      stored = store_.reference_timing(reference_key);
      if (stored) options["reference_ms"] = *stored;
    }
    json request = {{"problem", {{"id", item.problem.id}, {"path", problem_path.string()}}},
                    {"candidate",
                     {{"path", fs::absolute(task.prepared.code_path).string()},
                      {"extensions", extensions},
                      {"kernels", task.prepared.kernels},
                      {"code_sha256", code_hash.substr(code_hash.find(':') + 1)}}},
                    {"options", options}};
    store_.start_attempt(item.id);
    const WorkerReply reply = worker.evaluate(std::move(request));
    if (cancelled_.load()) return;
    if (!reply.result && (reply.signal == SIGKILL || reply.signal == SIGTERM) && attempt == 0)
      continue;
    r.device = worker.device_name();
    r.worker_log_tail = reply.log_tail;
    r.isolation = worker.isolation();
    if (reply.result) {
      apply_result(r, *reply.result, protocol);
      const auto found = resolve_findings(reply.result->value("findings", json::array()), policy);
      r.findings.insert(r.findings.end(), found.begin(), found.end());
      timing_findings(r, policy);
      if (r.verdict == Verdict::kCorrect && !rejecting_rules(r.findings).empty()) {
        r.verdict = Verdict::kRejected;
        r.speedup.reset();
      }
      const json timing = reply.result->value("timing", json::object());
      if (r.reference_ms) r.reference_timing = stored ? "stored" : "interleaved";
      const auto reference = samples(timing, "reference_ms");
      // Only beside an accepted candidate: one that was rejected may have disturbed the
      // reference's timing (threads, L2 persistence), and stored samples are reused by all.
      if (!stored && !reference_key.empty() && r.reference_ms && !reference.empty() &&
          r.verdict == Verdict::kCorrect) {
        json about = reference_about(item.problem, options, worker.ready_event());
        store_.put_reference_timing(reference_key, about, reference);
      }
    } else {
      r.verdict = reply.verdict;
      r.reasons.push_back(reply.reason);
      if (!reply.rule.empty())
        r.findings.push_back({reply.rule, RuleAction::kReject, reply.reason, 0, "run"});
    }
    r.seconds = seconds_since(task.started);
    complete(job, std::move(r), label);
    return;
  }
}

}  // namespace dice::eval
