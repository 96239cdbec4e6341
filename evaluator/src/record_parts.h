#pragma once
// Internal to the evaluator: how a record is made from a prepared candidate and a worker's
// result (evaluate.cpp), shared by the pipeline.

#include <nlohmann/json.hpp>
#include <string>

#include "dice/evaluator/prepare.h"
#include "dice/evaluator/problem.h"
#include "dice/evaluator/record.h"

namespace dice::eval {

/// The fields every record has: problem, candidate, the CPU stages' outcome.
EvalRecord base_record(const Problem& p, const Candidate& c, const PreparedCandidate& prep);

/// Fills verdict, correctness and timing from a worker's result event.
void apply_result(EvalRecord& r, const nlohmann::json& result, const std::string& protocol);

}  // namespace dice::eval
