#include "dice/evaluator/record.h"

#include <algorithm>
#include <array>
#include <utility>

#include "dice/core/error.h"

namespace dice::eval {

using nlohmann::json;

namespace {

constexpr std::array<std::pair<Verdict, std::string_view>, 18> kNames{{
    {Verdict::kCorrect, "correct"},
    {Verdict::kCompiled, "compiled"},
    {Verdict::kMismatch, "mismatch"},
    {Verdict::kWrongShape, "wrong_shape"},
    {Verdict::kWrongDtype, "wrong_dtype"},
    {Verdict::kWrongOutput, "wrong_output"},
    {Verdict::kParseError, "parse_error"},
    {Verdict::kTruncated, "truncated"},
    {Verdict::kNoModelNew, "no_model_new"},
    {Verdict::kImportError, "import_error"},
    {Verdict::kCompileError, "compile_error"},
    {Verdict::kConstructorError, "constructor_error"},
    {Verdict::kRuntimeError, "runtime_error"},
    {Verdict::kOutOfMemory, "out_of_memory"},
    {Verdict::kTimeout, "timeout"},
    {Verdict::kReferenceError, "reference_error"},
    {Verdict::kRejected, "rejected"},
    {Verdict::kCaptured, "captured"},
}};

TimingStats stats_from_json(const json& j) {
  TimingStats s;
  s.n = j.at("n");
  s.median = j.at("median");
  s.mean = j.at("mean");
  s.std = j.at("std");
  s.min = j.at("min");
  s.max = j.at("max");
  s.ci95_low = j.at("ci95").at(0);
  s.ci95_high = j.at("ci95").at(1);
  return s;
}

}  // namespace

std::string_view to_string(Verdict v) {
  for (const auto& [verdict, name] : kNames)
    if (verdict == v) return name;
  return "unknown";
}

std::optional<Verdict> parse_verdict(std::string_view name) {
  for (const auto& [verdict, n] : kNames)
    if (n == name) return verdict;
  return std::nullopt;
}

json EvalRecord::to_json() const {
  json j = {{"problem_id", problem_id},
            {"problem_name", problem_name},
            {"level", level},
            {"candidate", candidate},
            {"candidate_hash", candidate_hash},
            {"verdict", to_string(verdict)},
            {"reasons", reasons},
            {"compile",
             {{"compiled", compiled},
              {"status", compile_status},
              {"seconds", compile_seconds},
              {"log_tail", compile_log_tail},
              {"detail", compile_detail.is_null() ? json::array() : compile_detail}}},
            {"correctness", correctness.is_null() ? json::object() : correctness},
            {"device", device},
            {"worker_log_tail", worker_log_tail},
            {"seconds", seconds}};
  json timing = json::object();
  if (candidate_ms) {
    timing["protocol"] = protocol;
    timing["candidate_ms"] = eval::to_json(*candidate_ms);
  }
  if (reference_ms) timing["reference_ms"] = eval::to_json(*reference_ms);
  if (empty_call_ms) timing["empty_call_ms"] = *empty_call_ms;
  if (!reference_timing.empty()) timing["reference"] = reference_timing;
  j["timing"] = timing;
  j["speedup"] = speedup ? json(speedup->value) : json();
  j["speedup_ci95"] = speedup ? json{speedup->ci95_low, speedup->ci95_high} : json();
  j["policy"] = policy;
  j["rules"] = rules();
  json found = json::array();
  for (const auto& f : findings) found.push_back(f.to_json());
  j["findings"] = found;
  j["isolation"] = isolation;
  j["problem"] = problem.is_null() ? json::object() : problem;
  return j;
}

std::vector<std::string> EvalRecord::rules() const {
  std::vector<std::string> ids;
  for (const auto& f : findings)
    if (f.action != RuleAction::kOff && std::find(ids.begin(), ids.end(), f.rule) == ids.end())
      ids.push_back(f.rule);
  return ids;
}

bool EvalRecord::degenerate_problem() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.rule == "problem.degenerate"; });
}

EvalRecord EvalRecord::from_json(const json& j) {
  try {
    EvalRecord r;
    r.problem_id = j.at("problem_id");
    r.problem_name = j.value("problem_name", r.problem_id);
    r.level = j.value("level", "other");
    r.candidate = j.value("candidate", "");
    r.candidate_hash = j.value("candidate_hash", "");
    const auto v = parse_verdict(j.at("verdict").get<std::string>());
    if (!v) throw Error("unknown verdict " + j.at("verdict").dump());
    r.verdict = *v;
    r.reasons = j.value("reasons", std::vector<std::string>{});
    const json& c = j.at("compile");
    r.compiled = c.value("compiled", false);
    r.compile_status = c.value("status", "");
    r.compile_seconds = c.value("seconds", 0.0);
    r.compile_log_tail = c.value("log_tail", "");
    r.compile_detail = c.value("detail", json::array());
    r.correctness = j.value("correctness", json::object());
    const json& t = j.value("timing", json::object());
    r.protocol = t.value("protocol", "");
    if (t.contains("candidate_ms")) r.candidate_ms = stats_from_json(t.at("candidate_ms"));
    if (t.contains("reference_ms")) r.reference_ms = stats_from_json(t.at("reference_ms"));
    if (t.contains("empty_call_ms") && t.at("empty_call_ms").is_number())
      r.empty_call_ms = t.at("empty_call_ms").get<double>();
    r.reference_timing = t.value("reference", "");
    if (j.contains("speedup") && j.at("speedup").is_number()) {
      Speedup s;
      s.value = j.at("speedup");
      s.ci95_low = j.at("speedup_ci95").at(0);
      s.ci95_high = j.at("speedup_ci95").at(1);
      r.speedup = s;
    }
    r.device = j.value("device", "");
    r.worker_log_tail = j.value("worker_log_tail", "");
    r.seconds = j.value("seconds", 0.0);
    r.policy = j.value("policy", "");
    for (const auto& f : j.value("findings", json::array()))
      r.findings.push_back(Finding::from_json(f));
    r.isolation = j.value("isolation", "");
    r.problem = j.value("problem", json::object());
    return r;
  } catch (const json::exception& e) {
    throw Error(std::string("malformed evaluation record: ") + e.what());
  }
}

}  // namespace dice::eval
