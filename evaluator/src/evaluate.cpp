#include "dice/evaluator/evaluate.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <utility>

#include "dice/core/error.h"
#include "dice/core/file_lock.h"
#include "dice/core/files.h"
#include "dice/evaluator/pipeline.h"
#include "dice/evaluator/prepare.h"
#include "dice/evaluator/problem.h"
#include "dice/evaluator/store.h"
#include "record_parts.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

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
  r.compile_detail = prep.build_detail;
  return r;
}

namespace {

std::vector<double> numbers(const json& j, const char* key) {
  if (!j.contains(key)) return {};
  return j.at(key).get<std::vector<double>>();
}

}  // namespace

void timing_findings(EvalRecord& r, const RulePolicy& policy) {
  // RULES.md, timing.launch_bound: the largest speedup the protocol can show, and the absolute
  // threshold used when the worker did not measure an empty call.
  constexpr double kLaunchBoundCap = 4.0;
  constexpr double kLaunchBoundMs = 0.030;
  if (!r.speedup || !r.reference_ms) return;
  const auto add = [&](const char* rule, std::string message) {
    const RuleAction a = policy.action(rule);
    if (a != RuleAction::kOff) r.findings.push_back({rule, a, std::move(message), 0, "timing"});
  };
  const double reference = r.reference_ms->median;
  if (r.empty_call_ms && *r.empty_call_ms > 0) {
    // The empty call's cost is in every sample: no candidate can show more than
    // reference / empty; below kLaunchBoundCap the fixed cost dominates the comparison.
    const double cap = reference / *r.empty_call_ms;
    if (cap < kLaunchBoundCap)
      add("timing.launch_bound",
          fmt::format("the reference takes {:.1f} us and an empty timed call {:.1f} us: no "
                      "candidate can show more than {:.1f}x",
                      reference * 1e3, *r.empty_call_ms * 1e3, cap));
  } else if (reference < kLaunchBoundMs) {  // records without the empty call's time
    add("timing.launch_bound", fmt::format("the reference takes {:.1f} us: launch overhead "
                                           "dominates the speedup",
                                           reference * 1e3));
  }
  if (r.speedup->ci95_low <= 1.0 && r.speedup->ci95_high >= 1.0)
    add("timing.within_noise",
        fmt::format("speedup {:.3f}, 95% interval [{:.3f}, {:.3f}] "
                    "contains 1.0",
                    r.speedup->value, r.speedup->ci95_low, r.speedup->ci95_high));
}

RulePolicy policy_of(const json& options) {
  RulePolicy policy = RulePolicy::named(options.value("policy", "strict"));
  for (const auto& spec : options.value("rule_overrides", json::array()))
    policy.override_rule(spec.get<std::string>());
  return policy;
}

std::string policy_label(const json& options) {
  std::string label = options.value("policy", "strict");
  std::vector<std::string> specs;
  for (const auto& spec : options.value("rule_overrides", json::array()))
    specs.push_back(spec.get<std::string>());
  if (!specs.empty()) label += fmt::format(" ({})", fmt::join(specs, ", "));
  return label;
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
    if (timing.contains("empty_call_ms") && timing.at("empty_call_ms").is_number())
      r.empty_call_ms = timing.at("empty_call_ms").get<double>();
    Speedup s = median_speedup(*r.reference_ms, *r.candidate_ms);
    if (r.protocol == "kernelbench") {  // KernelBench compares means
      s.value = r.candidate_ms->mean > 0 ? r.reference_ms->mean / r.candidate_ms->mean : 0;
    }
    r.speedup = s;
  } catch (const std::exception& e) {
    r.reasons.push_back(std::string("timing samples unusable: ") + e.what());
  }
}

namespace {

/// records.jsonl: rewritten from the store when a session starts, appended to (flushed per line)
/// as records are committed, rewritten from the store again at the end.
class RecordsFile {
 public:
  RecordsFile(fs::path path, const std::vector<StoredRecord>& done) : path_(std::move(path)) {
    rewrite(done);
    out_.open(path_, std::ios::app);
    if (!out_) throw Error("cannot write " + path_.string());
  }

  void append(const EvalRecord& record) {
    const std::lock_guard lock(mutex_);
    out_ << record.to_json().dump() << '\n';
    out_.flush();
  }

  void rewrite(const std::vector<StoredRecord>& done) {
    const std::lock_guard lock(mutex_);
    if (out_.is_open()) out_.close();
    std::string text;
    for (const auto& s : done) text += s.record.to_json().dump() + "\n";
    write_file_atomic(path_, text);
  }

 private:
  fs::path path_;
  std::mutex mutex_;
  std::ofstream out_;
};

}  // namespace

std::vector<std::string> evaluation_devices(const std::string& device, int gpus,
                                            const Toolchain& toolchain) {
  const std::string chosen =
      device == "auto" ? (toolchain.cuda_available ? "cuda" : "none") : device;
  std::vector<std::string> devices;
  if (chosen == "cuda") {
    if (!toolchain.cuda_available)
      throw Error("--device cuda: torch sees no GPU on this machine (torch " +
                  toolchain.torch_version + ")");
    const int n = gpus > 0 ? std::min(gpus, toolchain.device_count) : toolchain.device_count;
    for (int i = 0; i < n; ++i) devices.push_back(fmt::format("cuda:{}", i));
  } else if (chosen == "cpu") {
    devices.assign(static_cast<std::size_t>(std::max(1, gpus)), "cpu");
  } else if (chosen != "none") {
    throw InputError("--device " + device + ": expected auto, cuda, cpu or none");
  }
  return devices;
}

PipelineConfig pipeline_config(const EvalOptions& options, std::string arch,
                               std::filesystem::path log_dir, std::vector<std::string> devices,
                               std::string device_note) {
  return {.python = options.python,
          .cache_dir = options.cache_dir,
          .log_dir = std::move(log_dir),
          .devices = std::move(devices),
          .device_note = std::move(device_note),
          .jobs = options.jobs,
          .build = {.cache_dir = options.cache_dir,
                    .arch = std::move(arch),
                    .jobs = options.jobs,
                    .timeout = options.compile_timeout,
                    .pch = options.pch,
                    .main_compiler = options.main_compiler,
                    .slim_headers = options.slim_headers},
          .capture_timeout = options.capture_timeout,
          .stages = options.stages,
          .fresh_reference_timing = options.fresh_reference_timing,
          .sandbox = options.sandbox};
}

json worker_options(const json& run_options) {
  json out = json::object();
  for (const char* key : {"protocol", "seed", "correct_trials", "timing_trials", "warmup",
                          "measure_timing", "policy", "rule_overrides", "static_only"})
    if (run_options.contains(key)) out[key] = run_options.at(key);
  return out;
}

json run_options_json(const EvalOptions& options) {
  return {{"protocol", options.protocol},
          {"seed", options.seed},
          {"correct_trials", options.correct_trials},
          {"timing_trials", options.timing_trials},
          {"warmup", options.warmup},
          {"measure_timing", options.measure_timing},
          {"arch", options.arch},
          {"problems", options.problems},
          {"candidates", options.candidates},
          {"reference_as_candidate", options.reference_as_candidate},
          {"policy", options.policy},
          {"rule_overrides", options.rule_overrides},
          {"static_only", options.static_only}};
}

EvalRun run_eval(const EvalOptions& options, std::ostream& progress, std::stop_token stop) {
  if (options.protocol != "dice" && options.protocol != "kernelbench")
    throw InputError("--protocol " + options.protocol + ": expected dice or kernelbench");
  policy_of(run_options_json(options));  // an unknown policy or rule fails before anything runs
  fs::create_directories(options.out_dir / "logs");
  const FileLock lock(options.out_dir / ".lock", "output folder " + options.out_dir.string());
  ResultStore store(options.out_dir / "results.db");
  EvalRun run;
  json run_options;
  if (options.resume) {
    const auto latest = store.latest_run("cli");
    if (!latest)
      throw InputError("--resume: " + store.path().string() + " holds no run to continue");
    run.run_id = latest->id;
    run_options = latest->options;
    fmt::print(progress, "dice eval: resuming run {} of {} ({} of {} candidates finished)\n",
               latest->id, latest->created_at, latest->done, latest->total);
  } else {
    if (const auto last = store.latest_run("cli"); last && last->done < last->total)
      fmt::print(progress,
                 "note: run {} in {} stopped with {} of {} candidates finished; starting a new "
                 "run (--resume continues the newest run)\n",
                 last->id, options.out_dir.string(), last->done, last->total);
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
    std::vector<std::pair<const Problem*, const Candidate*>> items;
    for (const auto& c : workload.candidates)
      items.emplace_back(problem_by_id.at(c.problem_id), &c);
    run_options = run_options_json(options);
    run.run_id = store.create_run("cli", run_options, items);
  }
  const std::string arch = run_options.value("arch", options.arch);

  const Toolchain toolchain = query_toolchain(options.python, std::chrono::seconds(300));
  const std::vector<std::string> devices =
      evaluation_devices(options.device, options.gpus, toolchain);
  if (devices.empty())
    run.device_note = toolchain.cuda_available ? "--device none: candidates were compiled, not run"
                                               : "no GPU found: candidates were compiled for " +
                                                     arch + "; correctness and timing need a GPU";
  if (toolchain.nvcc_version.empty())
    fmt::print(progress, "warning: nvcc not found; CUDA extensions will fail to compile\n");

  const std::vector<WorkItem> all = store.items(run.run_id, false);
  std::vector<Job> jobs;
  const json per_job = worker_options(run_options);
  for (const auto& item : all)
    if (!item.done) jobs.push_back({item, per_job});
  run.total = all.size();
  run.resumed = all.size() - jobs.size();
  fmt::print(
      progress, "dice eval: run {}: {} candidates ({} to do); torch {}; {}; {} compile jobs\n",
      run.run_id, run.total, jobs.size(), toolchain.torch_version,
      devices.empty() ? run.device_note : fmt::format("workers on {}", fmt::join(devices, ", ")),
      options.jobs);
  progress.flush();

  RecordsFile records_file(options.out_dir / "records.jsonl", store.records(run.run_id));
  std::string error;
  std::string isolation;
  bool complete = false;
  {
    ProgressView view(progress, options.progress, run.total, run.resumed);
    PipelineConfig config =
        pipeline_config(options, arch, options.out_dir / "logs", devices, run.device_note);
    Pipeline pipeline(toolchain, std::move(config), store, [&](const Job&, const EvalRecord& r) {
      records_file.append(r);
      view.add(r);
    });
    isolation = pipeline.isolation();
    fmt::print(progress, "policy {}; isolation: {}\n", policy_label(run_options), isolation);
    progress.flush();
    const std::stop_callback on_stop(stop, [&] { pipeline.cancel(); });
    pipeline.submit(std::move(jobs));
    complete = pipeline.wait_idle();
    error = pipeline.error();
    view.finish();
  }  // the pipeline stops its workers here
  store.set_run_state(run.run_id, complete ? "finished" : "interrupted");
  run.interrupted = !complete;

  const std::vector<StoredRecord> stored = store.records(run.run_id);
  records_file.rewrite(stored);
  for (const auto& s : stored) run.records.push_back(s.record);
  run.summary = summarize(run.records);
  write_file_atomic(options.out_dir / "summary.json",
                    json{{"summary", to_json(run.summary)},
                         {"run", run.run_id},
                         {"state", complete ? "finished" : "interrupted"},
                         {"candidates", run.total},
                         {"finished", stored.size()},
                         {"device", devices.empty() ? json("none") : json(devices)},
                         {"note", run.device_note},
                         {"protocol", run_options.value("protocol", options.protocol)},
                         {"policy", policy_label(run_options)},
                         {"isolation", isolation},
                         {"torch", toolchain.torch_version},
                         {"nvcc", toolchain.nvcc_version},
                         {"arch", arch}}
                        .dump(2));
  write_file_atomic(options.out_dir / "summary.md", to_markdown(run.summary));
  if (!error.empty()) throw Error(error);
  if (run.interrupted)
    fmt::print(progress,
               "dice eval: interrupted with {} of {} candidates finished; continue with "
               "--resume --out-dir {}\n",
               stored.size(), run.total, options.out_dir.string());
  return run;
}

}  // namespace dice::eval
