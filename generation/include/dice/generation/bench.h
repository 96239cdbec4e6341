#pragma once
// `dice bench`: problems x samples through a generator (the engine, an endpoint, or the infilling
// oracle), every finished sample extracted, stored (OUT/bench.db) and handed at once to the
// evaluator's pipeline (OUT/eval/results.db), so that compiling and GPU evaluation overlap
// generation; then the report (report.h) as OUT/report.md, OUT/report.html and OUT/summary.json.
// An interrupted run continues with `resume`: only unfinished samples are generated or evaluated.

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <vector>

#include "dice/evaluator/evaluate.h"
#include "dice/evaluator/problem.h"
#include "dice/generation/generator.h"
#include "dice/generation/report.h"

namespace dice::generation {

/// One record of the infilling set (data/dice/infilling_eval_99.jsonl): prefix + middle + suffix
/// is the reference solution `cuda_code` of the problem `pytorch_code`.
struct InfillRecord {
  eval::Problem problem;  ///< id "dice/<id>", level "other"
  std::string prefix, middle, suffix;
};

/// Reads the infilling records of `path` (JSON Lines of {id, pytorch_code, prefix, middle,
/// suffix}). Throws dice::InputError naming the file and line for a malformed record.
std::vector<InfillRecord> load_infill_records(const std::filesystem::path& path);

/// What a bench run does.
struct BenchOptions {
  std::string mode = "e2e";  ///< e2e (KernelBench one-shot) or infill (BiC-RL stage 1)
  std::string problems;      ///< e2e: eval::load_problems spec (kernelbench:L1,L2,L3, ...)
  std::filesystem::path infill_jsonl;  ///< infill: the records
  int limit = 0;                       ///< only the first N problems (0: all)
  int samples = 1;                     ///< samples per problem (K)
  std::uint64_t seed = 0;              ///< sample j of a problem uses seed + j
  bool oracle_middle = false;          ///< infill: the true middle instead of a generator
  std::filesystem::path prompt_dir;    ///< kernelbench_oneshot.txt, kernel_infilling.txt
  bool resume = false;                 ///< continue the run stored in eval.out_dir
  /// Generate and store only (no toolchain, no evaluation); a later --resume evaluates.
  bool no_eval = false;
  /// Generator settings, stored with the run for the record (model, decoding flags, endpoint).
  nlohmann::json generator;
  /// Evaluation: kernelbench_jsonl, cache_dir, device, gpus, jobs, arch, protocol, trials, seed,
  /// timeouts, python, pch, main_compiler, progress. out_dir is the bench's out_dir.
  eval::EvalOptions eval;
};

/// Makes the generator when there is something to generate (load time is the "load" stage).
using GeneratorFactory = std::function<std::unique_ptr<Generator>()>;

/// The outcome of run_bench or report_bench.
struct BenchRun {
  std::vector<SampleRow> samples;
  BenchReport report;
  std::string device_note;  ///< why verdicts are `compiled` (no GPU), else empty
  bool interrupted = false;
  int generation_failures = 0;  ///< samples the generator gave up on in this call
};

/// Runs or resumes a bench in options.eval.out_dir. The run's evaluation options are stored as
/// the evaluator stores its own (eval::run_options_json, with the bench's problem set as
/// `problems`), in bench.db and with every sample's run in eval/results.db; a run stored with the
/// shorter list of older versions resumes with it. Throws dice::InputError for bad inputs (an
/// out_dir holding another run without `resume`, an unknown mode, missing data), dice::Error
/// when the toolchain, the workers or the generator fail as a whole. A stop request on `stop`
/// ends generation and evaluation; what was committed stays for a resume.
BenchRun run_bench(const BenchOptions& options, const GeneratorFactory& make_generator,
                   std::ostream& progress, std::stop_token stop = {});

/// Re-reports the run stored in `out_dir` (no generation, no evaluation): rewrites report.md,
/// report.html and summary.json from OUT/bench.db. Throws dice::InputError if there is none.
BenchRun report_bench(const std::filesystem::path& out_dir);

}  // namespace dice::generation
