#pragma once
// Problems (reference PyTorch programs in KernelBench format) and candidates (programs defining
// ModelNew, possibly raw model output), read from files, folders, JSON Lines or problem-set names.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dice::eval {

/// A reference program: defines `Model`, `get_inputs()` and `get_init_inputs()`.
struct Problem {
  std::string id;      ///< "L1/19" (KernelBench), "dice/6995" (DICE pairs), or the file stem
  std::string name;    ///< "19_ReLU"; the file stem for files
  int level = 0;       ///< KernelBench level 1-3; 0 when not from a leveled set
  std::string code;    ///< Python source
  std::string origin;  ///< where it was read: "path" or "path:line"
  /// Names a candidate file may carry to be matched to this problem (folder matching).
  std::vector<std::string> match_keys() const;
  /// "L1", "L2", "L3", or "other": the row of the summary table.
  std::string level_label() const;
};

/// A candidate for one problem: the text may be a Python program or raw model output.
struct Candidate {
  std::string problem_id;
  std::string label;  ///< where it was read: "path" or "path:line"
  std::string text;
  bool reference = false;  ///< the problem's own Model (calibration): no rules apply
};

/// Problems and candidates of one run. Candidates may bring their own problems (DICE pairs).
struct Workload {
  std::vector<Problem> problems;
  std::vector<Candidate> candidates;
  std::vector<std::string> skipped;  ///< inputs that were not usable, each with the reason
};

/// Reads problems from `spec`: a .py file; a folder of .py files; "kernelbench:L1",
/// "kernelbench:L1,L2", "kernelbench:L2/17" (read from `kernelbench_jsonl`); or a JSON Lines file
/// of {"level", "problem_id", "name", "code"} or {"id", "pytorch_code"} records. Several specs may
/// be joined with '+'. Throws dice::InputError naming the spec, file and line on bad input.
std::vector<Problem> load_problems(std::string_view spec,
                                   const std::filesystem::path& kernelbench_jsonl);

/// Reads candidates from `spec` and pairs them with `problems`: a file (.py, .txt, .md) or a
/// folder of them, matched to a problem by file stem (`<key>` or `<key>__<tag>`, keys from
/// Problem::match_keys; a single file with a single problem needs no match); or a JSON Lines file
/// of {"problem": ID, "candidate": TEXT} records, or of DICE pairs {"id", "pytorch_code",
/// "cuda_code"} which bring their problem (added to `workload.problems`). Unusable entries are
/// listed in `workload.skipped`. Throws dice::InputError if `spec` cannot be read at all.
void load_candidates(std::string_view spec, Workload& workload);

/// Each problem's own code with `ModelNew = Model` appended: the calibration candidate whose
/// speedup measures the timing noise floor.
void add_reference_candidates(Workload& workload);

}  // namespace dice::eval
