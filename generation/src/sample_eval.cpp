#include "dice/generation/sample_eval.h"

#include <algorithm>
#include <cctype>

#include "dice/core/hash.h"
#include "dice/evaluator/evaluate.h"

namespace dice::generation {

using nlohmann::json;

namespace {

/// Python's `not code.strip()` for ASCII whitespace (other blanks are left to the evaluator).
bool blank(const std::string& code) {
  return std::all_of(code.begin(), code.end(),
                     [](unsigned char c) { return std::isspace(c) != 0; });
}

}  // namespace

std::optional<EarlyVerdict> early_verdict(const Extracted& extracted) {
  if (blank(extracted.code))
    return EarlyVerdict{
        extracted.truncated ? eval::Verdict::kTruncated : eval::Verdict::kParseError,
        "no code found in candidate"};
  if (extracted.syntax_error)
    return EarlyVerdict{eval::Verdict::kParseError, *extracted.syntax_error};
  return std::nullopt;
}

eval::EvalRecord early_record(const eval::WorkItem& item, const Extracted& extracted,
                              const EarlyVerdict& verdict, const json& run_options,
                              const std::string& isolation) {
  eval::EvalRecord r;
  r.problem_id = item.problem.id;
  r.problem_name = item.problem.name;
  r.level = item.problem.level_label();
  r.candidate = item.candidate.label;
  r.candidate_hash = "sha256:" + sha256_hex(extracted.code);
  r.verdict = verdict.verdict;
  r.reasons = {verdict.reason};
  r.compiled = false;
  r.compile_status = "skipped";
  r.compile_detail = json::array();
  r.policy = eval::policy_label(run_options);
  r.isolation = isolation;
  return r;
}

SampleEvaluation::SampleEvaluation(eval::ResultStore& results, BenchStore& store, json run_options,
                                   std::string isolation, Evaluate evaluate)
    : results_(results),
      store_(store),
      run_options_(std::move(run_options)),
      per_job_(eval::worker_options(run_options_)),
      isolation_(std::move(isolation)),
      evaluate_(std::move(evaluate)) {}

std::optional<eval::EvalRecord> SampleEvaluation::submit(SampleRow& s, const eval::Problem& problem,
                                                         const eval::Candidate& candidate,
                                                         const Extracted* extracted) {
  if (!s.eval_run) {
    const std::int64_t run = results_.create_run("bench", run_options_, {{&problem, &candidate}});
    store_.set_eval_run(s.id, run);
    s.eval_run = run;
  }
  const std::vector<eval::WorkItem> items = results_.items(*s.eval_run, true);
  if (items.empty()) return std::nullopt;
  const auto early = extracted != nullptr ? early_verdict(*extracted) : std::nullopt;
  if (early) {
    std::optional<eval::EvalRecord> record;
    for (const auto& item : items) {
      record = early_record(item, *extracted, *early, per_job_, isolation_);
      results_.finish(item.id, *record, "");
    }
    results_.set_run_state(*s.eval_run, "finished");
    s.record = record->to_json();
    store_.set_record(s.id, *s.record);
    return record;
  }
  std::vector<eval::Job> jobs;
  jobs.reserve(items.size());
  for (const auto& item : items) jobs.push_back({item, per_job_});
  evaluate_(s.id, *s.eval_run, std::move(jobs));
  return std::nullopt;
}

}  // namespace dice::generation
