#pragma once
// The CPU half of evaluation: extract a candidate's code, record its load_inline calls
// (`dice_worker capture`) and build its extensions. Needs no GPU.

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "dice/evaluator/builder.h"
#include "dice/evaluator/problem.h"
#include "dice/evaluator/record.h"
#include "dice/evaluator/rules.h"
#include "dice/evaluator/sandbox.h"
#include "dice/evaluator/toolchain.h"

namespace dice::eval {

/// A candidate after the CPU stages.
struct PreparedCandidate {
  std::optional<Verdict> failed;  ///< set when a CPU stage decided the verdict
  std::vector<std::string> reasons;
  std::filesystem::path code_path;  ///< the extracted Python program
  std::string code_hash;            ///< "sha256:<hex>" of the extracted code (else of the text)
  std::map<std::string, std::filesystem::path> extensions;  ///< capture digest -> built .so
  std::string compile_status;  ///< built, cached, none, failed, timeout, skipped
  double compile_seconds = 0;
  std::string log_tail;              ///< capture or compiler output when something failed
  std::vector<Finding> findings;     ///< static findings under the policy (reject and warn)
  std::vector<std::string> kernels;  ///< `__global__` names of the captured sources
  std::string isolation;             ///< how the capture ran (Sandbox::isolation)
  /// Per extension: {name, key, cached, main, cuda, link_seconds, seconds}, main and cuda as
  /// {status, pch, compiler, seconds} (how each object was obtained).
  nlohmann::json build_detail = nlohmann::json::array();
};

/// What the CPU stage checks besides building (RULES.md, evaluator/README.md "Isolation").
struct PrepareChecks {
  const RulePolicy* policy = nullptr;  ///< null: no rules (policy kernelbench)
  const Sandbox* sandbox = nullptr;    ///< null: captures run without isolation or limits
  bool static_only = false;            ///< stop after the static rules (verdict `captured`)
};

/// Extracts, captures and builds candidates. Thread-safe; captures are cached by content in
/// cache_dir/candidates/.
class CandidatePreparer {
 public:
  CandidatePreparer(PythonEnv env, ExtensionBuilder& builder, std::filesystem::path cache_dir,
                    std::string torch_version, std::chrono::seconds capture_timeout,
                    PrepareChecks checks = {});

  /// Never throws for a bad candidate: every failure is a verdict. Throws dice::Error only when
  /// the cache cannot be written. Steps: `analyze` (extraction, Python rules), `capture`
  /// (sandboxed: runs the candidate's module), `scan` (CUDA/C++ rules), build; a rule whose
  /// action is reject ends it with verdict `rejected` before anything later runs. `rules`: the
  /// policy of this candidate's run (null: PrepareChecks::policy; a reference candidate always
  /// runs with every rule off); `static_only` as PrepareChecks::static_only, for this candidate.
  PreparedCandidate prepare(const Candidate& candidate, const RulePolicy* rules = nullptr,
                            bool static_only = false);

 private:
  nlohmann::json run_step(const std::vector<std::string>& args, const std::filesystem::path& dir,
                          bool sandboxed, PreparedCandidate& out);

  PythonEnv env_;
  ExtensionBuilder& builder_;
  std::filesystem::path cache_dir_;
  std::string torch_version_;
  std::chrono::seconds capture_timeout_;
  PrepareChecks checks_;
  RulePolicy rules_off_ = RulePolicy::named("kernelbench");
  /// One lock per cache key: the same candidate prepared by two threads at once (identical
  /// rollouts) is captured once, the other thread waits and reads the cache.
  std::mutex key_locks_mutex_;
  std::map<std::string, std::shared_ptr<std::mutex>> key_locks_;
};

}  // namespace dice::eval
