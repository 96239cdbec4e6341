#pragma once
// Handing generated samples to evaluation. Each sample is its own run (kind "bench") in the
// evaluator's store OUT/eval/results.db. An output whose verdict its extraction already decides
// (no code, or code Python cannot parse) is finished there at once, in C++, with the record the
// evaluator's CPU stage would have written (verdict, reasons, candidate hash, policy, isolation):
// no Python process and no worker per sample. The others go to the evaluator's pipeline.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dice/evaluator/pipeline.h"
#include "dice/evaluator/problem.h"
#include "dice/evaluator/record.h"
#include "dice/evaluator/store.h"
#include "dice/generation/bench_store.h"
#include "dice/generation/extract.h"

namespace dice::generation {

/// A verdict decided at extraction time.
struct EarlyVerdict {
  eval::Verdict verdict = eval::Verdict::kParseError;
  std::string reason;  ///< the record's reason, worded as the evaluator's analyze step words it
};

/// The verdict of an output that cannot be a program, as evaluator/worker/dice_worker/analyze.py
/// decides it: blank extracted code is `truncated` when the text ended inside an open code block,
/// else `parse_error` ("no code found in candidate"); code Python's parser rejects is
/// `parse_error` ("SyntaxError: ..."). Nothing when the evaluator has to look further.
std::optional<EarlyVerdict> early_verdict(const Extracted& extracted);

/// The record of `item` with an early verdict: the fields the evaluator's pipeline fills for a
/// candidate its CPU stage turned down before anything was built (problem, candidate label,
/// "sha256:" hash of the extracted code, compile status `skipped`, the policy label of
/// `run_options`, `isolation`).
eval::EvalRecord early_record(const eval::WorkItem& item, const Extracted& extracted,
                              const EarlyVerdict& verdict, const nlohmann::json& run_options,
                              const std::string& isolation);

/// Submits samples to evaluation. Called from one thread at a time.
class SampleEvaluation {
 public:
  /// Queues the pending `jobs` of evaluation run `eval_run`, which evaluates bench sample
  /// `sample_id` (bench hands them to eval::Pipeline::submit).
  using Evaluate = std::function<void(std::int64_t sample_id, std::int64_t eval_run,
                                      std::vector<eval::Job> jobs)>;

  /// `run_options`: the evaluator's options stored with each run (eval::run_options_json);
  /// `isolation`: how the pipeline isolates captures (eval::Pipeline::isolation).
  SampleEvaluation(eval::ResultStore& results, BenchStore& store, nlohmann::json run_options,
                   std::string isolation, Evaluate evaluate);

  /// Creates the sample's evaluation run unless `s.eval_run` names one, then either finishes its
  /// pending items with an early verdict from `extracted` (null: none possible, e.g. infilling
  /// candidates), stores the record in both stores and returns it, or hands the pending items to
  /// `evaluate` and returns nothing. Throws dice::Error when a store fails.
  std::optional<eval::EvalRecord> submit(SampleRow& s, const eval::Problem& problem,
                                         const eval::Candidate& candidate,
                                         const Extracted* extracted);

 private:
  eval::ResultStore& results_;
  BenchStore& store_;
  nlohmann::json run_options_;
  nlohmann::json per_job_;
  std::string isolation_;
  Evaluate evaluate_;
};

}  // namespace dice::generation
