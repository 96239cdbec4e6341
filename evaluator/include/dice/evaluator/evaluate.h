#pragma once
// `dice eval`: the orchestrator. Reads problems and candidates, builds candidates on the CPU in
// parallel, runs them on one worker per GPU, writes one record per candidate as it finishes and a
// summary table at the end.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

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
  int gpus = 0;                             ///< with cuda: how many (0 = all)
  int jobs = 0;                             ///< compiler processes (0 = one per core)
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
};

struct EvalRun {
  std::vector<EvalRecord> records;
  std::vector<LevelSummary> summary;
  std::string device_note;  ///< e.g. "no GPU: candidates were compiled, not run"
};

/// Runs an evaluation and writes out_dir/records.jsonl (one line per candidate, written as each
/// finishes), summary.json and summary.md. Progress lines go to `progress`. Throws
/// dice::InputError for unusable inputs and dice::Error when the toolchain or the workers cannot
/// run at all; a bad candidate never throws.
EvalRun run_eval(const EvalOptions& options, std::ostream& progress);

}  // namespace dice::eval
