#pragma once
// The per-level table of a run: compile rate, correct rate (Exec), fast_0/1/2, geometric-mean
// speedup. fast_p is KernelBench's: the share of ALL attempted candidates that are correct and
// more than p times faster than the reference (Ouyang et al., KernelBench, 2025, §3).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dice/evaluator/record.h"

namespace dice::eval {

struct LevelSummary {
  std::string level;  ///< "L1".."L3", "other", or "all"
  int attempted = 0;
  int compiled = 0;
  int correct = 0;
  int faster_0 = 0, faster_1 = 0, faster_2 = 0;       ///< correct with speedup > 0, 1, 2
  int timed = 0;                                      ///< correct candidates with a speedup
  double geomean_speedup = 0;                         ///< over timed correct candidates; 0 if none
  std::vector<std::pair<std::string, int>> verdicts;  ///< count per verdict, by name
  std::vector<std::pair<std::string, int>> rules;     ///< candidates per fired rule id
  /// Candidates on problems marked degenerate (problem.degenerate), and the table's counts
  /// without them (RULES.md): fast_p with and without degenerate problems.
  int degenerate = 0;
  int attempted_nd = 0, correct_nd = 0, faster_1_nd = 0, faster_2_nd = 0;

  double rate(int count) const { return attempted > 0 ? double(count) / attempted : 0.0; }
};

/// One row per level present (sorted), then "all". fast_0 counts correct candidates, timed or not.
std::vector<LevelSummary> summarize(const std::vector<EvalRecord>& records);

nlohmann::json to_json(const std::vector<LevelSummary>& rows);

/// A Markdown table of the rows, percentages with one decimal; a line under it per level with
/// candidates on degenerate problems gives the rates without them.
std::string to_markdown(const std::vector<LevelSummary>& rows);

}  // namespace dice::eval
