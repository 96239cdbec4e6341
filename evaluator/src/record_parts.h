#pragma once
// Internal to the evaluator: how a record is made from a prepared candidate and a worker's
// result (evaluate.cpp), shared by the pipeline.

#include <nlohmann/json.hpp>
#include <string>

#include "dice/evaluator/prepare.h"
#include "dice/evaluator/problem.h"
#include "dice/evaluator/record.h"
#include "dice/evaluator/rules.h"

namespace dice::eval {

/// The fields every record has: problem, candidate, the CPU stages' outcome.
EvalRecord base_record(const Problem& p, const Candidate& c, const PreparedCandidate& prep);

/// Fills verdict, correctness and timing from a worker's result event.
void apply_result(EvalRecord& r, const nlohmann::json& result, const std::string& protocol);

/// The C++ side's timing findings (RULES.md: timing.launch_bound, timing.within_noise), added to
/// `r` with their action under `policy`.
void timing_findings(EvalRecord& r, const RulePolicy& policy);

/// The rule policy of a job's options ({"policy", "rule_overrides": ["ID=action", ...]}; strict
/// when absent). Throws dice::InputError for an unknown policy, rule or action.
RulePolicy policy_of(const nlohmann::json& options);

}  // namespace dice::eval
