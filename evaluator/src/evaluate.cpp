#include "dice/evaluator/evaluate.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>

#include "dice/core/blocking_queue.h"
#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/core/hash.h"
#include "dice/evaluator/prepare.h"
#include "dice/evaluator/problem.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// A candidate that passed the CPU stages and waits for a worker.
struct GpuJob {
  std::size_t index;
  PreparedCandidate prepared;
  Clock::time_point started;
};

/// Appends records to records.jsonl as they finish (flushed per line, so that nothing finished is
/// lost if the run is interrupted) and prints a progress line for each.
class RecordSink {
 public:
  RecordSink(const fs::path& path, std::size_t total, std::ostream& progress)
      : out_(path, std::ios::trunc), total_(total), progress_(progress) {
    if (!out_) throw Error("cannot write " + path.string());
  }

  void add(EvalRecord record) {
    const std::lock_guard lock(mutex_);
    out_ << record.to_json().dump() << '\n';
    out_.flush();
    std::string detail;
    if (record.speedup) detail = fmt::format(" {:.3f}x", record.speedup->value);
    if (!record.correct() && !record.reasons.empty()) detail = ": " + record.reasons.front();
    if (detail.size() > 160) detail = detail.substr(0, 157) + "...";
    fmt::print(progress_, "[{}/{}] {} {} -> {}{} ({:.1f} s)\n", records_.size() + 1, total_,
               record.problem_id, record.candidate, to_string(record.verdict), detail,
               record.seconds);
    progress_.flush();
    records_.push_back(std::move(record));
  }

  std::vector<EvalRecord> take() {
    const std::lock_guard lock(mutex_);
    return std::move(records_);
  }

 private:
  std::mutex mutex_;
  std::ofstream out_;
  std::size_t total_;
  std::ostream& progress_;
  std::vector<EvalRecord> records_;
};

EvalRecord base_record(const Problem& p, const Candidate& c, const PreparedCandidate& prep) {
  EvalRecord r;
  r.problem_id = p.id;
  r.problem_name = p.name;
  r.level = p.level_label();
  r.candidate = c.label;
  r.candidate_hash = prep.code_hash;
  r.compile_status = prep.compile_status;
  r.compile_seconds = prep.compile_seconds;
  r.compiled = !prep.failed.has_value();
  r.reasons = prep.reasons;
  if (prep.failed) r.compile_log_tail = prep.log_tail;
  return r;
}

std::vector<double> numbers(const json& j, const char* key) {
  if (!j.contains(key)) return {};
  return j.at(key).get<std::vector<double>>();
}

/// The C++ side's timing findings (RULES.md: timing.launch_bound, timing.within_noise).
void timing_findings(EvalRecord& r, const RulePolicy& policy) {
  if (!r.speedup || !r.reference_ms) return;
  const auto add = [&](const char* rule, std::string message) {
    const RuleAction a = policy.action(rule);
    if (a != RuleAction::kOff) r.findings.push_back({rule, a, std::move(message), 0, "timing"});
  };
  if (r.reference_ms->median < 0.030)
    add("timing.launch_bound", fmt::format("the reference takes {:.1f} us: launch overhead "
                                           "dominates the speedup",
                                           r.reference_ms->median * 1e3));
  if (r.speedup->ci95_low <= 1.0 && r.speedup->ci95_high >= 1.0)
    add("timing.within_noise",
        fmt::format("speedup {:.3f}, 95% interval [{:.3f}, {:.3f}] "
                    "contains 1.0",
                    r.speedup->value, r.speedup->ci95_low, r.speedup->ci95_high));
}

/// Fills verdict, correctness and timing from a worker's result event.
void apply_result(EvalRecord& r, const json& result, const std::string& protocol) {
  const auto verdict = parse_verdict(result.value("verdict", ""));
  if (!verdict) {
    r.verdict = Verdict::kRuntimeError;
    r.reasons.push_back("worker answered an unknown verdict: " + result.dump().substr(0, 200));
    return;
  }
  r.verdict = *verdict;
  for (const auto& reason : result.value("reasons", json::array()))
    if (reason.is_string()) r.reasons.push_back(reason.get<std::string>());
  r.correctness = result.value("correctness", json::object());
  r.problem = result.value("problem", json::object());
  if (r.verdict != Verdict::kCorrect || !result.contains("timing")) return;
  const json& timing = result.at("timing");
  try {
    const auto cand = numbers(timing, "candidate_ms");
    const auto ref = numbers(timing, "reference_ms");
    if (cand.empty() || ref.empty()) return;
    r.protocol = timing.value("protocol", protocol);
    r.candidate_ms = compute_stats(cand);
    r.reference_ms = compute_stats(ref);
    Speedup s = median_speedup(*r.reference_ms, *r.candidate_ms);
    if (r.protocol == "kernelbench") {  // KernelBench compares means
      s.value = r.candidate_ms->mean > 0 ? r.reference_ms->mean / r.candidate_ms->mean : 0;
    }
    r.speedup = s;
  } catch (const std::exception& e) {
    r.reasons.push_back(std::string("timing samples unusable: ") + e.what());
  }
}

}  // namespace

EvalRun run_eval(const EvalOptions& options, std::ostream& progress) {
  if (options.protocol != "dice" && options.protocol != "kernelbench")
    throw InputError("--protocol " + options.protocol + ": expected dice or kernelbench");
  RulePolicy policy = RulePolicy::named(options.policy);
  for (const auto& spec : options.rule_overrides) policy.override_rule(spec);
  const RulePolicy rules_off = RulePolicy::named("kernelbench");
  Workload workload;
  workload.problems = options.problems.empty()
                          ? std::vector<Problem>{}
                          : load_problems(options.problems, options.kernelbench_jsonl);
  if (!options.candidates.empty()) load_candidates(options.candidates, workload);
  if (options.reference_as_candidate) add_reference_candidates(workload);
  for (const auto& s : workload.skipped) fmt::print(progress, "skipped: {}\n", s);
  if (workload.candidates.empty())
    throw InputError("no candidates to evaluate (give --candidates or --reference-as-candidate)");
  std::map<std::string, const Problem*> problem_by_id;
  for (const auto& p : workload.problems) problem_by_id[p.id] = &p;

  const Toolchain toolchain = query_toolchain(options.python, std::chrono::seconds(300));
  EvalRun run;
  std::vector<std::string> devices;
  std::string device = options.device;
  if (device == "auto") device = toolchain.cuda_available ? "cuda" : "none";
  if (device == "cuda") {
    if (!toolchain.cuda_available)
      throw Error("--device cuda: torch sees no GPU on this machine (torch " +
                  toolchain.torch_version + ")");
    const int n =
        options.gpus > 0 ? std::min(options.gpus, toolchain.device_count) : toolchain.device_count;
    for (int i = 0; i < n; ++i) devices.push_back(fmt::format("cuda:{}", i));
  } else if (device == "cpu") {
    devices.push_back("cpu");
  } else if (device == "none") {
    run.device_note = toolchain.cuda_available
                          ? "--device none: candidates were compiled, not run"
                          : "no GPU found: candidates were compiled for " + options.arch +
                                "; correctness and timing need a GPU";
  } else {
    throw InputError("--device " + device + ": expected auto, cuda, cpu or none");
  }
  if (toolchain.nvcc_version.empty())
    fmt::print(progress, "warning: nvcc not found; CUDA extensions will fail to compile\n");
  fmt::print(
      progress, "dice eval: {} candidates, {} problems; torch {}; {}; {} compile jobs\n",
      workload.candidates.size(), workload.problems.size(), toolchain.torch_version,
      devices.empty() ? run.device_note : fmt::format("workers on {}", fmt::join(devices, ", ")),
      options.jobs);

  SandboxOptions sandbox_options = options.sandbox;
  sandbox_options.workers = std::max<std::size_t>(1, devices.size());
  const Sandbox sandbox(sandbox_options);
  fmt::print(progress, "policy {}; isolation: {}\n", policy.name(), sandbox.isolation());
  fs::create_directories(options.out_dir / "logs");
  ExtensionBuilder builder(toolchain, {.cache_dir = options.cache_dir,
                                       .arch = options.arch,
                                       .jobs = options.jobs,
                                       .timeout = options.compile_timeout});
  CandidatePreparer preparer(
      options.python, builder, options.cache_dir, toolchain.torch_version, options.capture_timeout,
      {.policy = &policy, .sandbox = &sandbox, .static_only = options.static_only});
  // Problems go to the worker as files, named by content.
  std::map<std::string, fs::path> problem_paths;
  for (const auto& p : workload.problems) {
    const fs::path path =
        fs::absolute(options.cache_dir / "problems" / (sha256_hex(p.code) + ".py"));
    if (!fs::exists(path)) write_file_atomic(path, p.code);
    problem_paths[p.id] = path;
  }
  RecordSink sink(options.out_dir / "records.jsonl", workload.candidates.size(), progress);
  BlockingQueue<GpuJob> gpu_queue;
  std::atomic<std::size_t> next_candidate{0};

  const auto record_for = [&](std::size_t index, const PreparedCandidate& prep) {
    const Candidate& c = workload.candidates[index];
    EvalRecord r = base_record(*problem_by_id.at(c.problem_id), c, prep);
    r.policy = c.reference ? "off (the reference as its own candidate)" : policy.name();
    r.findings = prep.findings;
    r.isolation = prep.isolation;
    return r;
  };

  // CPU stage: capture and build, `jobs` candidates at a time (compiler processes are bounded by
  // the builder as well).
  const auto prepare_loop = [&] {
    for (;;) {
      const std::size_t i = next_candidate++;
      if (i >= workload.candidates.size()) return;
      const auto started = Clock::now();
      PreparedCandidate prep;
      try {
        prep = preparer.prepare(workload.candidates[i]);
      } catch (const std::exception& e) {
        prep.failed = Verdict::kCompileError;
        prep.compile_status = "failed";
        prep.reasons.push_back(std::string("preparing the candidate failed: ") + e.what());
      }
      if (prep.failed || devices.empty()) {
        EvalRecord r = record_for(i, prep);
        r.verdict = prep.failed ? *prep.failed : Verdict::kCompiled;
        if (!prep.failed) r.reasons.push_back(run.device_note);
        r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
        sink.add(std::move(r));
      } else {
        gpu_queue.push({i, std::move(prep), started});
      }
    }
  };

  // GPU stage: one thread and one worker per device.
  const json worker_options = {{"protocol", options.protocol},
                               {"seed", options.seed},
                               {"correct_trials", options.correct_trials},
                               {"timing_trials", options.timing_trials},
                               {"warmup", options.warmup},
                               {"measure_timing", options.measure_timing}};
  std::mutex fatal_mutex;
  std::string fatal_error;
  const auto gpu_loop = [&](const std::string& dev, std::size_t slot) {
    WorkerClient worker(options.python, dev,
                        options.out_dir / "logs" / fmt::format("worker-{}.log", slot),
                        options.stages, &sandbox);
    while (auto job = gpu_queue.pop()) {
      const Candidate& c = workload.candidates[job->index];
      const Problem& p = *problem_by_id.at(c.problem_id);
      EvalRecord r = record_for(job->index, job->prepared);
      json extensions = json::object();
      for (const auto& [digest, so] : job->prepared.extensions) extensions[digest] = so.string();
      json request_options = worker_options;
      request_options.update((c.reference ? rules_off : policy).worker_options());
      json request = {{"problem", {{"id", p.id}, {"path", problem_paths.at(p.id).string()}}},
                      {"candidate",
                       {{"path", fs::absolute(job->prepared.code_path).string()},
                        {"extensions", extensions},
                        {"kernels", job->prepared.kernels},
                        {"code_sha256",
                         job->prepared.code_hash.substr(job->prepared.code_hash.find(':') + 1)}}},
                      {"options", request_options}};
      try {
        const WorkerReply reply = worker.evaluate(std::move(request));
        r.device = worker.device_name();
        r.worker_log_tail = reply.log_tail;
        r.isolation = worker.isolation();
        const RulePolicy& rules = c.reference ? rules_off : policy;
        if (reply.result) {
          apply_result(r, *reply.result, options.protocol);
          const auto found =
              resolve_findings(reply.result->value("findings", json::array()), rules);
          r.findings.insert(r.findings.end(), found.begin(), found.end());
          timing_findings(r, rules);
          if (r.verdict == Verdict::kCorrect && !rejecting_rules(r.findings).empty()) {
            r.verdict = Verdict::kRejected;
            r.speedup.reset();
          }
        } else {
          r.verdict = reply.verdict;
          r.reasons.push_back(reply.reason);
          if (!reply.rule.empty())
            r.findings.push_back({reply.rule, RuleAction::kReject, reply.reason, 0, "run"});
        }
      } catch (const Error& e) {
        const std::lock_guard lock(fatal_mutex);
        fatal_error = e.what();
        gpu_queue.close();
        return;
      }
      r.seconds = std::chrono::duration<double>(Clock::now() - job->started).count();
      sink.add(std::move(r));
    }
  };

  {
    std::vector<std::jthread> gpu_threads;
    for (std::size_t s = 0; s < devices.size(); ++s)
      gpu_threads.emplace_back(gpu_loop, devices[s], s);
    {
      std::vector<std::jthread> cpu_threads;
      const int n = std::max(1, options.jobs);
      for (int t = 0; t < n; ++t) cpu_threads.emplace_back(prepare_loop);
    }
    gpu_queue.close();
  }
  if (!fatal_error.empty()) throw Error(fatal_error);

  run.records = sink.take();
  run.summary = summarize(run.records);
  write_file_atomic(options.out_dir / "summary.json",
                    json{{"summary", to_json(run.summary)},
                         {"device", devices.empty() ? json("none") : json(devices)},
                         {"note", run.device_note},
                         {"protocol", options.protocol},
                         {"policy", policy.name()},
                         {"isolation", sandbox.isolation()},
                         {"torch", toolchain.torch_version},
                         {"nvcc", toolchain.nvcc_version},
                         {"arch", options.arch}}
                        .dump(2));
  write_file_atomic(options.out_dir / "summary.md", to_markdown(run.summary));
  return run;
}

}  // namespace dice::eval
