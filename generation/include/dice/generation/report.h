#pragma once
// The report of a bench run: the DICE paper's table (Exec, fast_1, fast_2 per level) with compile
// rate, pass@k and fast_p@k (unbiased estimator) when there are several samples per problem,
// geometric-mean speedup of correct samples, degenerate problems marked; as Markdown for the
// terminal and as one self-contained HTML file (inline CSS and SVG, nothing fetched).

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dice/generation/bench_store.h"

namespace dice::generation {

/// pass@k of a problem with `n` samples of which `c` pass: 1 - C(n-c, k) / C(n, k), the
/// unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code",
/// §2.1), computed as a product for stability. Throws dice::InputError unless 0 <= c <= n and
/// 1 <= k <= n.
double pass_at_k(int n, int c, int k);

/// Why a KernelBench problem (423217d) cannot be trusted (system.md §3), or nothing.
std::optional<std::string> degenerate_reason(std::string_view problem_id);

/// One row of the table: a level ("L1".."L3", "other") or "all".
struct ReportRow {
  std::string level;
  int problems = 0;
  int samples = 0;             ///< problems x samples per problem
  int evaluated = 0;           ///< samples with a verdict
  int compiled = 0;            ///< samples that passed the compile stage
  int correct = 0;             ///< Exec
  int fast_1 = 0;              ///< correct and speedup > 1
  int fast_2 = 0;              ///< correct and speedup > 2
  int truncated = 0;           ///< outputs that ended inside a code block or at the token limit
  int degenerate = 0;          ///< problems of this row on the degenerate list
  int timed = 0;               ///< correct samples with a speedup
  double geomean_speedup = 0;  ///< over timed correct samples; 0 if none
  /// k -> mean over problems of pass@k / fast_1@k / fast_2@k (only when samples per problem > 1).
  std::map<int, double> pass_at, fast_1_at, fast_2_at;

  double rate(int count) const { return samples > 0 ? double(count) / samples : 0.0; }
};

/// Everything the report shows.
struct BenchReport {
  std::vector<ReportRow> rows;  ///< one per level present (sorted), then "all"
  int samples_per_problem = 1;
  std::vector<int> ks;  ///< the k of pass@k columns: 1, 2, 4, ... up to and including K
  /// Degenerate problems in the run: id -> reason.
  std::map<std::string, std::string> degenerate;
  std::vector<double> speedups;  ///< of correct timed samples
  std::map<std::string, int> verdicts;
  int pending = 0;                       ///< samples not generated or not evaluated yet
  int failed = 0;                        ///< samples the generator gave up on
  bool compile_only = false;             ///< verdicts are `compiled`: no GPU ran them
  std::map<std::string, double> stages;  ///< stage -> wall seconds
};

/// Computes the report from a run's samples (every sample counts, pending ones as failures).
BenchReport compute_report(const std::vector<SampleRow>& samples,
                           const std::map<std::string, double>& stages);

/// fast_p at `p` over all samples: share that are correct with speedup > p (p = 0: correct).
double fast_p(const std::vector<SampleRow>& samples, double p);

/// The Markdown summary printed on the terminal.
std::string report_markdown(const BenchReport& report);

/// The self-contained HTML report: the table, pass@k, the speedup distribution and the fast_p
/// curve as inline SVG, and every sample's verdict, code and output (HTML-escaped). `options` is
/// the run's stored options (shown as is).
std::string report_html(const BenchReport& report, const std::vector<SampleRow>& samples,
                        const nlohmann::json& options);

/// `text` with &, <, >, " and ' escaped for HTML.
std::string html_escape(std::string_view text);

}  // namespace dice::generation
