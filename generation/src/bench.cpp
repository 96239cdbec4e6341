#include "dice/generation/bench.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>

#include "dice/core/error.h"
#include "dice/core/file_lock.h"
#include "dice/core/files.h"
#include "dice/evaluator/evaluate.h"
#include "dice/evaluator/pipeline.h"
#include "dice/evaluator/progress.h"
#include "dice/evaluator/store.h"
#include "dice/generation/extract.h"
#include "dice/generation/prompts.h"
#include "dice/generation/sample_eval.h"

namespace dice::generation {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::vector<InfillRecord> load_infill_records(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError("infilling records " + path.string() + ": cannot read the file");
  std::vector<InfillRecord> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path.string(), number);
    try {
      const json r = json::parse(line);
      InfillRecord rec;
      const json& id = r.at("id");
      rec.problem.id = "dice/" + (id.is_string() ? id.get<std::string>() : id.dump());
      rec.problem.name = rec.problem.id;
      rec.problem.code = r.at("pytorch_code").get<std::string>();
      rec.problem.origin = where;
      rec.prefix = r.at("prefix").get<std::string>();
      rec.middle = r.at("middle").get<std::string>();
      rec.suffix = r.at("suffix").get<std::string>();
      out.push_back(std::move(rec));
    } catch (const json::exception& e) {
      throw InputError(where +
                       ": expected {id, pytorch_code, prefix, middle, suffix}: " + e.what());
    }
  }
  return out;
}

namespace {

/// Generation and evaluation counts on one line redrawn in place (a terminal), or one line per
/// event. Thread-safe.
class BenchProgress {
 public:
  BenchProgress(std::ostream& out, eval::ProgressMode mode, std::size_t total,
                std::size_t generated, std::size_t evaluated)
      : out_(out), mode_(mode), total_(total), generated_(generated), evaluated_(evaluated) {}

  void generated(const SampleRow& s) {
    const std::lock_guard lock(mutex_);
    ++generated_;
    if (mode_ == eval::ProgressMode::kLines)
      fmt::print(out_, "generated [{}/{}] {} #{}: {}, {} tokens, {:.1f} s{}\n", generated_, total_,
                 s.problem_id, s.sample, s.status, s.output_tokens, s.gen_seconds,
                 s.error.empty() ? "" : " (" + s.error + ")");
    draw();
  }
  void evaluated(const SampleRow& s, const eval::EvalRecord& r) {
    const std::lock_guard lock(mutex_);
    ++evaluated_;
    ++verdicts_[std::string(eval::to_string(r.verdict))];
    if (mode_ == eval::ProgressMode::kLines)
      fmt::print(out_, "evaluated [{}/{}] {} #{}: {}{} ({:.1f} s)\n", evaluated_, total_,
                 s.problem_id, s.sample, eval::to_string(r.verdict),
                 r.speedup ? fmt::format(" {:.3f}x", r.speedup->value) : "", r.seconds);
    draw();
  }
  void finish() {
    const std::lock_guard lock(mutex_);
    if (mode_ == eval::ProgressMode::kBar) {
      last_draw_ = {};
      draw();
      out_ << "\n";
    }
    out_.flush();
  }

 private:
  static std::string bar(std::size_t done, std::size_t total) {
    const int width = 20;
    const auto filled = total > 0 ? static_cast<int>(width * done / total) : width;
    return "[" + std::string(static_cast<std::size_t>(filled), '#') +
           std::string(static_cast<std::size_t>(width - filled), '.') + "]";
  }
  void draw() {
    if (mode_ != eval::ProgressMode::kBar) {
      out_.flush();
      return;
    }
    const auto now = Clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(200)) return;
    last_draw_ = now;
    std::string verdicts;
    for (const auto& [v, n] : verdicts_) verdicts += fmt::format(" {} {}", v, n);
    fmt::print(out_, "\rgenerate {} {}/{}  evaluate {} {}/{} {}\x1b[K", bar(generated_, total_),
               generated_, total_, bar(evaluated_, total_), evaluated_, total_,
               eval::ProgressView::duration(std::chrono::duration<double>(now - start_).count()) +
                   verdicts);
    out_.flush();
  }

  std::ostream& out_;
  eval::ProgressMode mode_;
  std::size_t total_, generated_, evaluated_;
  std::map<std::string, int> verdicts_;
  Clock::time_point start_ = Clock::now(), last_draw_{};
  std::mutex mutex_;
};

/// Problems of a run as stored in its options, in order, with their infilling records.
struct ProblemSet {
  std::vector<eval::Problem> problems;
  std::map<std::string, InfillRecord> infill;  ///< by problem id (infill mode)
};

ProblemSet load_problem_set(const json& o, const fs::path& kernelbench_jsonl) {
  ProblemSet set;
  const std::string mode = o.at("mode").get<std::string>();
  const int limit = o.value("limit", 0);
  if (mode == "e2e") {
    set.problems = eval::load_problems(o.at("problems").get<std::string>(), kernelbench_jsonl);
    if (limit > 0 && set.problems.size() > static_cast<std::size_t>(limit))
      set.problems.resize(static_cast<std::size_t>(limit));
  } else if (mode == "infill") {
    auto records = load_infill_records(o.at("infill_jsonl").get<std::string>());
    if (limit > 0 && records.size() > static_cast<std::size_t>(limit))
      records.resize(static_cast<std::size_t>(limit));
    for (auto& r : records) {
      set.problems.push_back(r.problem);
      set.infill.emplace(r.problem.id, std::move(r));
    }
  } else {
    throw InputError("--mode " + mode + ": expected e2e or infill");
  }
  if (set.problems.empty()) throw InputError("no problems to run (check --problems / --limit)");
  return set;
}

/// Writes report.md, report.html and summary.json; returns the report.
BenchReport write_reports(const fs::path& out_dir, const std::vector<SampleRow>& samples,
                          const json& options, std::map<std::string, double> stages,
                          const std::string& device_note) {
  double compile = 0, gpu = 0;
  for (const auto& s : samples) {
    if (!s.record) continue;
    const double c = s.record->value("compile", json::object()).value("seconds", 0.0);
    compile += c;
    if (!s.record->value("device", std::string()).empty())
      gpu += std::max(0.0, s.record->value("seconds", 0.0) - c);
  }
  stages["compile (sum over samples)"] = compile;
  stages["GPU evaluation (sum over samples)"] = gpu;
  BenchReport report = compute_report(samples, stages);
  std::string md = report_markdown(report);
  if (!device_note.empty()) md += "\nnote: " + device_note + "\n";
  write_file_atomic(out_dir / "report.md", md);
  write_file_atomic(out_dir / "report.html", report_html(report, samples, options));
  json rows = json::array();
  for (const auto& r : report.rows) {
    json row{{"level", r.level},
             {"problems", r.problems},
             {"samples", r.samples},
             {"evaluated", r.evaluated},
             {"compiled", r.compiled},
             {"correct", r.correct},
             {"fast_1", r.fast_1},
             {"fast_2", r.fast_2},
             {"compile_rate", r.rate(r.compiled)},
             {"exec", r.rate(r.correct)},
             {"fast_1_rate", r.rate(r.fast_1)},
             {"fast_2_rate", r.rate(r.fast_2)},
             {"geomean_speedup", r.geomean_speedup},
             {"truncated", r.truncated},
             {"degenerate_problems", r.degenerate}};
    for (const auto& [k, v] : r.pass_at) row["pass@" + std::to_string(k)] = v;
    for (const auto& [k, v] : r.fast_1_at) row["fast_1@" + std::to_string(k)] = v;
    for (const auto& [k, v] : r.fast_2_at) row["fast_2@" + std::to_string(k)] = v;
    rows.push_back(std::move(row));
  }
  write_file_atomic(out_dir / "summary.json",
                    json{{"rows", rows},
                         {"verdicts", report.verdicts},
                         {"pending", report.pending},
                         {"failed", report.failed},
                         {"degenerate", report.degenerate},
                         {"stages_seconds", report.stages},
                         {"note", device_note},
                         {"options", options}}
                        .dump(2, ' ', false, json::error_handler_t::replace));
  return report;
}

/// The evaluator's own run options (eval::run_options_json) with the bench's problem set as
/// `problems` (informative): stored as the run's "eval" and with each sample's evaluation run.
json eval_run_options(const BenchOptions& options) {
  eval::EvalOptions e = options.eval;
  e.problems =
      options.mode == "infill" ? fs::absolute(options.infill_jsonl).string() : options.problems;
  return eval::run_options_json(e);
}

/// The "eval" options of a stored run. Runs stored by older versions of dice bench hold a shorter
/// list of its own (protocol, seed, trials, warmup, measure_timing, policy, rule_overrides, arch:
/// no informative inputs, no static_only) and resume as they are: absent keys take the evaluator's
/// defaults, as before. Throws dice::InputError naming `db` when there are none.
json stored_eval_options(const json& run_options, const fs::path& db) {
  const json e = run_options.value("eval", json());
  if (!e.is_object() || !e.contains("protocol"))
    throw InputError(db.string() +
                     ": the stored run has no evaluation options (\"eval\" with \"protocol\"): "
                     "it cannot be continued; start the run again into a new --out");
  return e;
}

/// Thrown from the sample callback to leave generation on a stop request.
struct StopRequested {};

}  // namespace

BenchRun run_bench(const BenchOptions& options, const GeneratorFactory& make_generator,
                   std::ostream& progress, std::stop_token stop) {
  const fs::path out_dir = options.eval.out_dir;
  fs::create_directories(out_dir / "eval" / "logs");
  const FileLock lock(out_dir / ".lock", "output folder " + out_dir.string());
  BenchStore store(out_dir / "bench.db");
  json run_options = store.options();
  if (options.resume) {
    if (run_options.is_null())
      throw InputError("--resume: " + store.path().string() + " holds no bench run to continue");
  } else {
    if (!run_options.is_null())
      throw InputError("--out " + out_dir.string() +
                       " already holds a bench run: continue it with --resume, re-report it with "
                       "`dice bench report`, or choose another --out");
    if (options.samples < 1) throw InputError("--samples must be at least 1");
    if (options.mode == "e2e" && options.oracle_middle)
      throw InputError("--oracle-middle needs --mode infill");
    run_options = {{"mode", options.mode},
                   {"problems", options.problems},
                   {"infill_jsonl", fs::absolute(options.infill_jsonl).string()},
                   {"limit", options.limit},
                   {"samples", options.samples},
                   {"seed", options.seed},
                   {"oracle_middle", options.oracle_middle},
                   {"prompt_dir", fs::absolute(options.prompt_dir).string()},
                   {"generator", options.generator},
                   {"eval", eval_run_options(options)}};
  }
  const ProblemSet set = load_problem_set(run_options, options.eval.kernelbench_jsonl);
  if (!options.resume) {
    std::vector<SampleRow> rows;
    const int k = run_options.at("samples").get<int>();
    const auto seed = run_options.at("seed").get<std::uint64_t>();
    for (const auto& p : set.problems)
      for (int j = 0; j < k; ++j) {
        SampleRow r;
        r.problem_id = p.id;
        r.problem_name = p.name;
        r.level = p.level_label();
        r.sample = j;
        r.seed = seed + static_cast<std::uint64_t>(j);
        rows.push_back(std::move(r));
      }
    store.add_samples(rows);
    store.set_options(run_options);
  }
  std::map<std::string, const eval::Problem*> problem_by_id;
  for (const auto& p : set.problems) problem_by_id[p.id] = &p;
  const std::string mode = run_options.at("mode").get<std::string>();
  const bool oracle = run_options.value("oracle_middle", false);
  const fs::path prompt_dir = run_options.at("prompt_dir").get<std::string>();
  const json eval_options = stored_eval_options(run_options, store.path());
  const std::string arch = eval_options.value("arch", options.eval.arch);

  BenchRun run;
  std::vector<SampleRow> samples = store.samples();
  std::map<std::int64_t, std::size_t> index_by_id;
  for (std::size_t i = 0; i < samples.size(); ++i) index_by_id[samples[i].id] = i;

  // Evaluation: the evaluator's pipeline over the evaluator's store, one run per sample.
  eval::ResultStore results(out_dir / "eval" / "results.db");
  const bool evaluate = !options.no_eval;
  const eval::Toolchain toolchain =
      evaluate ? eval::query_toolchain(options.eval.python, std::chrono::seconds(300))
               : eval::Toolchain{};
  const std::vector<std::string> devices =
      evaluate ? eval::evaluation_devices(options.eval.device, options.eval.gpus, toolchain)
               : std::vector<std::string>{};
  if (!evaluate)
    run.device_note = "--no-eval: samples were generated and stored, not evaluated";
  else if (devices.empty())
    run.device_note = toolchain.cuda_available
                          ? "--device none: samples were compiled, not run"
                          : "no GPU found: samples were generated and compiled for " + arch +
                                "; correctness and timing need a GPU";
  if (evaluate && toolchain.nvcc_version.empty())
    fmt::print(progress, "warning: nvcc not found; CUDA extensions will fail to compile\n");
  std::size_t generated_before = 0, evaluated_before = 0;
  for (const auto& s : samples) {
    generated_before += s.generated();
    evaluated_before += s.evaluated();
  }
  fmt::print(
      progress,
      "dice bench: {} mode, {} problems x {} samples = {} ({} generated, {} evaluated "
      "before); torch {}; {}\n",
      mode, set.problems.size(), run_options.at("samples").get<int>(), samples.size(),
      generated_before, evaluated_before,
      evaluate ? toolchain.torch_version : std::string("not queried"),
      devices.empty() ? run.device_note : fmt::format("workers on {}", fmt::join(devices, ", ")));
  progress.flush();

  BenchProgress view(progress, options.eval.progress, samples.size(), generated_before,
                     evaluated_before);
  std::mutex samples_mutex;  // guards `samples` and `sample_by_run`
  std::map<std::int64_t, std::int64_t> sample_by_run;
  eval::PipelineConfig config{.python = options.eval.python,
                              .cache_dir = options.eval.cache_dir,
                              .log_dir = out_dir / "eval" / "logs",
                              .devices = devices,
                              .device_note = run.device_note,
                              .jobs = options.eval.jobs,
                              .build = {.cache_dir = options.eval.cache_dir,
                                        .arch = arch,
                                        .jobs = options.eval.jobs,
                                        .timeout = options.eval.compile_timeout,
                                        .pch = options.eval.pch,
                                        .main_compiler = options.eval.main_compiler},
                              .capture_timeout = options.eval.capture_timeout,
                              .stages = options.eval.stages,
                              .fresh_reference_timing = options.eval.fresh_reference_timing};
  std::string pipeline_error;
  bool complete = false;
  double generation_seconds = 0, load_seconds = 0, tail_seconds = 0;
  {
    std::optional<eval::Pipeline> pipeline;
    if (evaluate)
      pipeline.emplace(toolchain, std::move(config), results,
                       [&](const eval::Job& job, const eval::EvalRecord& r) {
                         const std::lock_guard guard(samples_mutex);
                         const auto it = sample_by_run.find(job.item.run_id);
                         if (it == sample_by_run.end()) return;
                         results.set_run_state(job.item.run_id, "finished");
                         store.set_record(it->second, r.to_json());
                         SampleRow& s = samples[index_by_id.at(it->second)];
                         s.record = r.to_json();
                         view.evaluated(s, r);
                       });
    const std::stop_callback on_stop(stop, [&] {
      if (pipeline) pipeline->cancel();
    });

    // Submits a generated sample for evaluation: its own run in the evaluator's store; an output
    // its extraction already condemns gets its verdict at once, without the pipeline.
    std::optional<SampleEvaluation> evaluation;
    if (pipeline)
      evaluation.emplace(
          results, store, eval_options, pipeline->isolation(),
          [&](std::int64_t sample_id, std::int64_t eval_run, std::vector<eval::Job> jobs) {
            {
              const std::lock_guard guard(samples_mutex);
              sample_by_run[eval_run] = sample_id;
            }
            pipeline->submit(std::move(jobs));
          });
    const auto submit = [&](SampleRow& s, const Extracted* extracted) {
      if (!evaluation) return;
      const eval::Candidate candidate{
          s.problem_id,
          fmt::format("{}/bench.db#{}:{}#{}", out_dir.string(), s.id, s.problem_id, s.sample),
          s.candidate};
      const auto early = evaluation->submit(s, *problem_by_id.at(s.problem_id), candidate,
                                            mode == "e2e" ? extracted : nullptr);
      if (early) view.evaluated(s, *early);
    };

    // Samples generated before and not evaluated: their stored evaluation, or evaluate them now
    // (e2e outputs are extracted again for an early verdict).
    std::optional<CodeExtractor> extractor;
    for (auto& s : samples) {
      if (!evaluate || !s.generated() || s.evaluated()) continue;
      if (s.eval_run) {
        const auto stored = results.records(*s.eval_run);
        if (!stored.empty()) {
          s.record = stored.front().record.to_json();
          store.set_record(s.id, *s.record);
          continue;
        }
      }
      std::optional<Extracted> extracted;
      if (mode == "e2e") {
        if (!extractor) extractor.emplace(options.eval.python);
        extracted = extractor->extract(s.output);
      }
      submit(s, extracted ? &*extracted : nullptr);
    }

    // Generation of what is left; each sample goes to evaluation as soon as it is finished.
    std::vector<SampleRequest> requests;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const SampleRow& s = samples[i];
      if (s.generated()) continue;
      const eval::Problem& p = *problem_by_id.at(s.problem_id);
      SampleRequest r;
      r.index = i;
      r.seed = s.seed;
      if (mode == "e2e") {
        r.message = render_oneshot_prompt(prompt_dir / "kernelbench_oneshot.txt", p.code);
      } else {
        const InfillRecord& rec = set.infill.at(s.problem_id);
        r.message = render_infill_prompt(prompt_dir / "kernel_infilling.txt", p.code, rec.prefix,
                                         rec.suffix);
        r.oracle = rec.middle;
      }
      requests.push_back(std::move(r));
    }
    bool stopped = false;
    if (!requests.empty() && !stop.stop_requested()) {
      if (!extractor) extractor.emplace(options.eval.python);
      const auto load_start = Clock::now();
      std::unique_ptr<Generator> generator =
          oracle ? std::make_unique<OracleGenerator>() : make_generator();
      load_seconds = std::chrono::duration<double>(Clock::now() - load_start).count();
      fmt::print(progress, "dice bench: generating {} samples with {} (ready in {:.1f} s)\n",
                 requests.size(), generator->describe(), load_seconds);
      progress.flush();
      const auto gen_start = Clock::now();
      try {
        generator->generate(requests, [&](const SampleRequest& request, SampleOutput out) {
          if (stop.stop_requested()) throw StopRequested{};
          SampleRow& s = samples[request.index];
          s.prompt = std::move(out.prompt);
          s.output = std::move(out.text);
          s.stop_reason = std::move(out.stop_reason);
          s.output_tokens = out.output_tokens;
          s.gen_seconds = out.seconds;
          s.error = std::move(out.error);
          if (!s.error.empty()) {
            s.status = "failed";
            ++run.generation_failures;
            store.set_generated(s);
            view.generated(s);
            return;
          }
          const Extracted extracted = oracle ? Extracted{s.output, false, false, std::nullopt}
                                             : extractor->extract(s.output);
          s.code = extracted.code;
          s.status = extracted.truncated || s.stop_reason == "length" ? "truncated" : "generated";
          if (mode == "e2e") {
            s.candidate = s.output;  // the evaluator extracts it itself, truncation included
          } else {
            const InfillRecord& rec = set.infill.at(s.problem_id);
            s.candidate = infill_candidate(rec.prefix, extracted, rec.suffix);
          }
          store.set_generated(s);
          view.generated(s);
          submit(s, &extracted);
        });
      } catch (const StopRequested&) {
        stopped = true;
      }
      generation_seconds = std::chrono::duration<double>(Clock::now() - gen_start).count();
    }
    const auto tail_start = Clock::now();
    complete = !stopped && (!pipeline || pipeline->wait_idle());
    tail_seconds = std::chrono::duration<double>(Clock::now() - tail_start).count();
    if (pipeline) pipeline_error = pipeline->error();
    view.finish();
  }
  if (load_seconds > 0) store.add_stage_seconds("load", load_seconds);
  if (generation_seconds > 0) store.add_stage_seconds("generation", generation_seconds);
  store.add_stage_seconds("evaluation after generation", tail_seconds);
  run.interrupted = !complete;
  run.samples = store.samples();
  run.report =
      write_reports(out_dir, run.samples, run_options, store.stage_seconds(), run.device_note);
  if (!pipeline_error.empty()) throw Error(pipeline_error);
  if (run.interrupted)
    fmt::print(progress, "dice bench: interrupted; continue with --resume --out {}\n",
               out_dir.string());
  return run;
}

BenchRun report_bench(const fs::path& out_dir) {
  if (!fs::exists(out_dir / "bench.db"))
    throw InputError("dice bench report: " + (out_dir / "bench.db").string() + " does not exist");
  BenchStore store(out_dir / "bench.db");
  const json options = store.options();
  if (options.is_null())
    throw InputError("dice bench report: " + store.path().string() + " holds no bench run");
  BenchRun run;
  run.samples = store.samples();
  for (const auto& s : run.samples)
    if (s.verdict() == "compiled") {
      run.device_note = "no GPU ran these samples: correctness and timing need a GPU";
      break;
    }
  run.report = write_reports(out_dir, run.samples, options, store.stage_seconds(), run.device_note);
  return run;
}

}  // namespace dice::generation
