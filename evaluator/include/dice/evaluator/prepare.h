#pragma once
// The CPU half of evaluation: extract a candidate's code, record its load_inline calls
// (`dice_worker capture`) and build its extensions. Needs no GPU.

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "dice/evaluator/builder.h"
#include "dice/evaluator/problem.h"
#include "dice/evaluator/record.h"
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
  std::string log_tail;  ///< capture or compiler output when something failed
  /// Per extension: {name, key, cached, main, cuda, link_seconds, seconds}, main and cuda as
  /// {status, pch, compiler, seconds} (how each object was obtained).
  nlohmann::json build_detail = nlohmann::json::array();
};

/// Extracts, captures and builds candidates. Thread-safe; captures are cached by content in
/// cache_dir/candidates/.
class CandidatePreparer {
 public:
  CandidatePreparer(PythonEnv env, ExtensionBuilder& builder, std::filesystem::path cache_dir,
                    std::string torch_version, std::chrono::seconds capture_timeout);

  /// Never throws for a bad candidate: every failure is a verdict. Throws dice::Error only when
  /// the cache cannot be written.
  PreparedCandidate prepare(const Candidate& candidate);

 private:
  PythonEnv env_;
  ExtensionBuilder& builder_;
  std::filesystem::path cache_dir_;
  std::string torch_version_;
  std::chrono::seconds capture_timeout_;
};

}  // namespace dice::eval
