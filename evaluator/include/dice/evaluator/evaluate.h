#pragma once
// `dice eval`: the orchestrator. Reads problems and candidates, stores them as a run in the
// results database (OUT/results.db), evaluates the run's unfinished items through the pipeline
// (pipeline.h), writes one record per candidate as it finishes and a summary table at the end. An
// interrupted run continues with `resume`.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <stop_token>
#include <string>
#include <vector>

#include "dice/evaluator/pipeline.h"
#include "dice/evaluator/progress.h"
#include "dice/evaluator/record.h"
#include "dice/evaluator/sandbox.h"
#include "dice/evaluator/summary.h"
#include "dice/evaluator/toolchain.h"
#include "dice/evaluator/worker.h"

namespace dice::eval {

struct EvalOptions {
  std::string problems;                     ///< load_problems() spec
  std::string candidates;                   ///< load_candidates() spec; may be empty
  bool reference_as_candidate = false;      ///< add each problem's own code as a candidate
  std::filesystem::path kernelbench_jsonl;  ///< for kernelbench:<...> specs
  std::filesystem::path out_dir;            ///< records.jsonl, summary.json, summary.md, logs/
  std::filesystem::path cache_dir;          ///< builds and captures
  std::string device = "auto";              ///< auto (cuda if any GPU, else none), cuda, cpu, none
  int gpus = 0;  ///< with cuda: how many (0 = all); with cpu: how many CPU workers (0 = one)
  int jobs = 0;  ///< compiler processes (0 = one per core)
  std::string arch = "sm_90";
  std::string protocol = "dice";  ///< dice or kernelbench (PROTOCOL.md)
  int correct_trials = 5;
  int timing_trials = 100;
  int warmup = 10;
  std::uint64_t seed = 42;
  bool measure_timing = true;
  std::chrono::seconds capture_timeout{120};
  std::chrono::seconds compile_timeout{600};
  StageTimeouts stages;
  PythonEnv python;
  std::string policy = "strict";            ///< strict, lenient, kernelbench (RULES.md)
  std::vector<std::string> rule_overrides;  ///< "ID=reject|warn|off", applied in order
  SandboxOptions sandbox;                   ///< isolation of captures and workers
  bool static_only = false;  ///< stop after capture and the static rules (verdict `captured`)
  /// Continue the newest run stored in out_dir/results.db instead of starting one: its inputs and
  /// result-deciding options come from the store; only unfinished items are evaluated.
  bool resume = false;
  /// Time the reference with every candidate (interleaved) instead of reusing samples measured
  /// once per problem, device and software (PROTOCOL.md, "Reference timing").
  bool fresh_reference_timing = false;
  bool pch = true;                     ///< BuildOptions::pch
  std::string main_compiler = "auto";  ///< BuildOptions::main_compiler
  bool slim_headers = true;            ///< BuildOptions::slim_headers
  ProgressMode progress = ProgressMode::kLines;
};

struct EvalRun {
  std::vector<EvalRecord> records;  ///< every finished record of the run, in finishing order
  std::vector<LevelSummary> summary;
  std::string device_note;   ///< e.g. "no GPU: candidates were compiled, not run"
  std::int64_t run_id = 0;   ///< in out_dir/results.db
  std::size_t total = 0;     ///< candidates of the run
  std::size_t resumed = 0;   ///< records that were finished before this call
  bool interrupted = false;  ///< stopped before every candidate finished (resume continues it)
};

/// Runs (or with options.resume continues) an evaluation. Every verdict is committed to
/// out_dir/results.db first; out_dir/records.jsonl (one line per record, appended as each
/// finishes, rewritten from the database at the end), summary.json and summary.md follow. A stop
/// request on `stop` (SIGINT/SIGTERM) kills compilers and workers, keeps what was committed and
/// returns with `interrupted`. Progress goes to `progress`. Throws dice::InputError for unusable
/// inputs (or an out_dir in use by another process) and dice::Error when the toolchain or the
/// workers cannot run at all; a bad candidate never throws.
EvalRun run_eval(const EvalOptions& options, std::ostream& progress, std::stop_token stop = {});

/// The result-deciding options of `options` as stored with a run: protocol, seed, trials, warmup,
/// measure_timing, arch, and the inputs' specs (informative).
nlohmann::json run_options_json(const EvalOptions& options);

/// The policy label records carry for a job's options ({"policy", "rule_overrides"}): "strict",
/// or "strict (static.try_except=warn, ...)" with the overrides. Never throws on missing keys
/// (strict); throws nlohmann::json::exception when an override is not a string.
std::string policy_label(const nlohmann::json& options);

/// The evaluation workers for `device` (auto, cuda, cpu, none) and `gpus` (cuda: how many GPUs,
/// 0 = all; cpu: how many CPU workers, at least 1): "cuda:0", "cuda:1", ... or "cpu" per worker.
/// Empty: compile only (none, or auto without a GPU). Throws dice::InputError for an unknown
/// device and dice::Error for cuda when torch sees no GPU. Shared by eval, serve and bench.
std::vector<std::string> evaluation_devices(const std::string& device, int gpus,
                                            const Toolchain& toolchain);

/// The pipeline configuration of `options`: builds for `arch` (options.arch resolved), workers on
/// `devices` (evaluation_devices; empty: compile only, `device_note` given with the `compiled`
/// verdicts), worker logs in `log_dir`. Shared by eval and serve. Never throws.
PipelineConfig pipeline_config(const EvalOptions& options, std::string arch,
                               std::filesystem::path log_dir, std::vector<std::string> devices,
                               std::string device_note);

/// The worker's per-job options (PROTOCOL.md) taken from stored run options: protocol, seed,
/// trials, warmup, measure_timing and the rule policy (policy, rule_overrides, static_only);
/// keys absent from `run_options` stay absent (the pipeline's defaults apply).
nlohmann::json worker_options(const nlohmann::json& run_options);

}  // namespace dice::eval
