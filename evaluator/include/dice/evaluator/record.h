#pragma once
// One evaluation record per candidate: the verdict and the evidence behind it. The JSON schema is
// documented in evaluator/README.md.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dice/evaluator/rules.h"
#include "dice/evaluator/stats.h"

namespace dice::eval {

/// What happened to a candidate. Only kCorrect counts as correct ("Exec" in the DICE paper).
enum class Verdict {
  kCorrect,           ///< compiled, outputs matched the reference in every trial
  kCompiled,          ///< built; not run (no GPU, or --device none)
  kMismatch,          ///< output values differ beyond tolerance
  kWrongShape,        ///< output shape differs
  kWrongDtype,        ///< output dtype differs
  kWrongOutput,       ///< output is not a tensor or has another structure
  kParseError,        ///< not valid Python
  kTruncated,         ///< model output ended inside a code block
  kNoModelNew,        ///< no class ModelNew
  kImportError,       ///< the module raised while loading
  kCompileError,      ///< the CUDA/C++ extension did not build
  kConstructorError,  ///< ModelNew(*get_init_inputs()) raised
  kRuntimeError,      ///< forward raised, or the worker died (segfault, illegal address, ...)
  kOutOfMemory,       ///< CUDA out of memory
  kTimeout,           ///< a stage ran past its time limit
  kReferenceError,    ///< the problem's own Model failed: not the candidate's fault
  kRejected,          ///< a rule whose action is reject fired (RULES.md); see `findings`
  kCaptured,          ///< passed capture and the static rules; not built (--static-only)
};

std::string_view to_string(Verdict v);
/// Parses a verdict name; nothing if unknown.
std::optional<Verdict> parse_verdict(std::string_view name);

/// The record of one candidate (one JSON line of records.jsonl).
struct EvalRecord {
  std::string problem_id;
  std::string problem_name;
  std::string level;           ///< "L1".."L3" or "other"
  std::string candidate;       ///< where the candidate was read
  std::string candidate_hash;  ///< "sha256:" + hash of the extracted code
  Verdict verdict = Verdict::kRuntimeError;
  std::vector<std::string> reasons;
  bool compiled = false;       ///< passed the compile stage
  std::string compile_status;  ///< built, cached, none (no extension), failed, timeout, skipped
  double compile_seconds = 0;  ///< ms would mislead: compiles take seconds
  std::string compile_log_tail;
  nlohmann::json compile_detail;  ///< per extension, how main.o and cuda.o were obtained
  nlohmann::json
      correctness;  ///< {"atol","rtol","trials":[{"seed","passed","max_abs_error","max_rel_error"}]}
  std::string protocol;  ///< "dice" or "kernelbench"
  std::optional<TimingStats> candidate_ms, reference_ms;
  /// Least ms of 30 timed calls to a model that does nothing, measured by the worker with the same
  /// timer: the fixed cost under every sample (timing.launch_bound, RULES.md). Absent in records
  /// of workers older than this field.
  std::optional<double> empty_call_ms;
  /// Where reference_ms comes from: "interleaved" (measured with this candidate) or "stored"
  /// (measured once for the problem on this device and software, PROTOCOL.md).
  std::string reference_timing;
  std::optional<Speedup> speedup;  ///< reference / candidate: medians (dice) or means (kernelbench)
  std::string device;
  std::string worker_log_tail;
  double seconds = 0;             ///< wall time spent on this candidate, all stages
  std::string policy;             ///< strict, lenient, kernelbench (RULES.md)
  std::vector<Finding> findings;  ///< rules that fired (reject and warn), static and dynamic
  std::string isolation;          ///< "bubblewrap ..." or "none: <why>" (evaluator/README.md)
  nlohmann::json problem;  ///< what the worker found about the problem: {"degenerate": [...], ...}

  /// Ids of the findings (reject and warn), unique, in order.
  std::vector<std::string> rules() const;
  /// Whether the problem was marked degenerate (problem.degenerate fired).
  bool degenerate_problem() const;

  bool correct() const { return verdict == Verdict::kCorrect; }
  nlohmann::json to_json() const;
  /// Reads a record back. Throws dice::Error on a malformed record.
  static EvalRecord from_json(const nlohmann::json& j);
};

}  // namespace dice::eval
