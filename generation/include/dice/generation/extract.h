#pragma once
// Code extraction from model output, done by the evaluator's own extractor
// (evaluator/worker/dice_worker/extract.py: the last complete python code block; truncated when
// the text ends inside an open block) so that `dice bench` and `dice eval` can never disagree.
// One long-lived Python process serves every sample of a run; it also parses the extracted code,
// so that an output without usable code gets its verdict at once (early_verdict, verdicts.h).

#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "dice/core/process.h"
#include "dice/evaluator/toolchain.h"

namespace dice::generation {

/// What extraction found in one output.
struct Extracted {
  std::string code;         ///< the chosen block's content (the whole text when it has no fence)
  bool truncated = false;   ///< the text ends inside an open code block
  bool from_block = false;  ///< the code came from a fenced block
  /// "SyntaxError: ..." when `code` is not blank and Python's ast.parse rejects it, worded as the
  /// evaluator's `analyze` step words it (dice_worker/analyze.py); nothing when it parses or the
  /// parser failed otherwise (the evaluator then decides).
  std::optional<std::string> syntax_error;
};

/// A `python -c` process running dice_worker.extract.extract_code over JSON lines. Thread-safe
/// (one request at a time). Start it from a thread that outlives it (core/process.h: the child
/// gets SIGKILL when the thread that started it ends).
class CodeExtractor {
 public:
  /// Starts the process. Throws dice::Error if Python cannot start or the package is missing.
  explicit CodeExtractor(const eval::PythonEnv& env);
  /// Extracts from `text`. Throws dice::Error if the process stops answering (30 s).
  Extracted extract(std::string_view text);

 private:
  eval::PythonEnv env_;
  std::optional<Process> process_;
  std::mutex mutex_;
  void start();
};

/// The candidate program of an infilling sample: prefix + middle + suffix, where the middle is the
/// extracted code when the output holds a code block, else the whole output (system.md §5).
std::string infill_candidate(std::string_view prefix, const Extracted& middle,
                             std::string_view suffix);

}  // namespace dice::generation
