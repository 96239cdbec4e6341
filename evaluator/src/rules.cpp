#include "dice/evaluator/rules.h"

#include <algorithm>

#include "dice/core/error.h"

namespace dice::eval {

using nlohmann::json;

namespace {

constexpr RuleAction R = RuleAction::kReject;
constexpr RuleAction W = RuleAction::kWarn;
constexpr RuleAction O = RuleAction::kOff;

}  // namespace

std::string_view to_string(RuleAction a) {
  switch (a) {
    case RuleAction::kOff:
      return "off";
    case RuleAction::kWarn:
      return "warn";
    case RuleAction::kReject:
      return "reject";
  }
  return "off";
}

std::optional<RuleAction> parse_rule_action(std::string_view name) {
  if (name == "reject") return RuleAction::kReject;
  if (name == "warn") return RuleAction::kWarn;
  if (name == "off") return RuleAction::kOff;
  return std::nullopt;
}

const std::vector<RuleInfo>& rule_catalogue() {
  static const std::vector<RuleInfo> rules = {
      {"static.try_except", "5", "try/except in the forward path (a fallback to PyTorch)", R, W, O},
      {"static.reference_model", "5", "inheriting, calling or assigning the reference Model", R, R,
       O},
      {"static.torch_compute", "6",
       "torch compute ops in the forward path or in the extension's host code", R, W, O},
      {"static.nn_forward", "6", "nn layers called in the forward path", R, W, O},
      {"static.torch_compile", "6", "torch.compile, TorchScript, dynamo, inductor", R, W, O},
      {"static.cuda_graph", "3, 6", "CUDA graphs (Python or C++)", R, W, O},
      {"static.ctypes", "6", "ctypes/cffi/cupy/numba, dlopen: native code outside load_inline", R,
       W, O},
      {"static.blas_handle", "6", "cuBLAS, cuBLASLt, cuDNN, cuFFT, cuSPARSE, cuSOLVER calls", R, W,
       O},
      {"static.concurrency", "3",
       "threads, processes, signals, CUDA streams and events (Python or C++)", R, R, O},
      {"static.monkeypatch", "7, 9",
       "replacing attributes of modules (timers, synchronize, torch ops), reseeding, TF32 flags, "
       "torch.library",
       R, R, O},
      {"static.introspection", "5, 9",
       "sys.modules, frames, gc, eval/exec, computed getattr: reaching the harness", R, R, O},
      {"static.tensor_subclass", "9", "Tensor subclasses, __torch_function__/__torch_dispatch__", R,
       R, O},
      {"static.io", "isolation", "files, sockets, subprocesses, the environment", R, R, O},
      {"static.l2_persist", "10", "L2 persistence (access policy windows, evict_last hints)", R, R,
       O},
      {"static.reduced_precision", "7", "casts to fp16/bf16/TF32, autocast", W, W, O},
      {"static.hardcoded_values", "8", "literals of 256+ numbers (hard-coded results)", W, W, O},
      {"dynamic.uncaptured_build", "6",
       "a load_inline call at run time that the compile stage never saw (unchecked sources)", R, W,
       O},
      {"dynamic.foreign_kernels", "6",
       "share of GPU time in kernels that are not the candidate's above the policy's limit", R, W,
       O},
      {"dynamic.no_own_kernel", "6", "none of the candidate's own kernels ran in a forward", R, W,
       O},
      {"dynamic.output_type", "9",
       "outputs that are not plain dense tensors (subclasses, lazy objects, wrong device)", R, R,
       O},
      {"dynamic.output_alias", "1, 4",
       "outputs that share memory with inputs, with each other or with earlier outputs", R, R, O},
      {"dynamic.unwritten_output", "1",
       "outputs holding the poison written into free memory (never written)", R, R, O},
      {"dynamic.input_mutation", "2", "inputs that the reference leaves unchanged were changed", R,
       R, O},
      {"dynamic.stale_output", "4, 10",
       "outputs of timed calls (fresh inputs each) that do not match the reference", R, R, O},
      {"dynamic.threads", "3", "threads or processes left running by the candidate", R, R, O},
      {"problem.degenerate", "8",
       "the problem's output is near constant, near zero or independent of an input", W, W, O},
      {"precision.reduced", "7",
       "error against an fp64 reference far above the fp32 reference's own error", W, W, O},
      {"timing.launch_bound", "11", "the reference takes under 30 us: launch overhead dominates", W,
       W, O},
      {"timing.within_noise", "11", "the speedup's 95% interval contains 1.0", W, W, O},
      {"sandbox.processes", "isolation", "more processes or threads than the sandbox allows", R, R,
       R},
      {"sandbox.file_size", "isolation", "a file larger than the sandbox allows", R, R, R},
      {"sandbox.code_changed", "isolation",
       "the candidate's code file changed after the static rules judged it", R, R, R},
  };
  return rules;
}

RulePolicy RulePolicy::named(std::string_view name) {
  RulePolicy p;
  p.name_ = std::string(name);
  for (const auto& r : rule_catalogue()) {
    RuleAction a = O;
    if (name == "strict") {
      a = r.strict;
    } else if (name == "lenient") {
      a = r.lenient;
    } else if (name == "kernelbench") {
      a = r.kernelbench;
    } else {
      throw InputError("--policy " + std::string(name) +
                       ": expected strict, lenient or kernelbench");
    }
    p.actions_.emplace(std::string(r.id), a);
  }
  p.foreign_share_limit_ = name == "strict" ? 0.5 : 0.0;
  return p;
}

void RulePolicy::override_rule(std::string_view spec) {
  const auto eq = spec.find('=');
  if (eq == std::string_view::npos)
    throw InputError("--rule " + std::string(spec) + ": expected ID=reject|warn|off");
  const std::string_view id = spec.substr(0, eq);
  const auto action = parse_rule_action(spec.substr(eq + 1));
  if (!action)
    throw InputError("--rule " + std::string(spec) + ": the action must be reject, warn or off");
  int matched = 0;
  for (auto& [rule, a] : actions_) {
    const bool family = id.size() > 2 && id.ends_with(".*") &&
                        std::string_view(rule).starts_with(id.substr(0, id.size() - 1));
    if (rule == id || family) {
      a = *action;
      ++matched;
    }
  }
  if (matched == 0)
    throw InputError("--rule " + std::string(spec) + ": unknown rule " + std::string(id) +
                     " (the rules are listed in evaluator/RULES.md)");
}

RuleAction RulePolicy::action(std::string_view rule) const {
  const auto it = actions_.find(rule);
  return it == actions_.end() ? W : it->second;
}

json RulePolicy::worker_options() const {
  json rules = json::object();
  for (const auto& [rule, a] : actions_)
    if (a != O) rules[rule] = std::string(to_string(a));
  return {{"policy", name_}, {"rules", rules}, {"foreign_share_limit", foreign_share_limit_}};
}

json Finding::to_json() const {
  json j = {{"rule", rule}, {"action", std::string(eval::to_string(action))}, {"message", message}};
  if (line > 0) j["line"] = line;
  if (!where.empty()) j["where"] = where;
  return j;
}

Finding Finding::from_json(const json& j) {
  try {
    Finding f;
    f.rule = j.at("rule").get<std::string>();
    f.message = j.value("message", "");
    f.line = j.value("line", 0);
    f.where = j.value("where", "");
    if (j.contains("action")) {
      const auto a = parse_rule_action(j.at("action").get<std::string>());
      if (!a) throw Error("unknown action " + j.at("action").dump());
      f.action = *a;
    }
    return f;
  } catch (const json::exception& e) {
    throw Error(std::string("malformed finding: ") + e.what());
  }
}

std::vector<Finding> resolve_findings(const json& raw, const RulePolicy& policy) {
  std::vector<Finding> out;
  if (!raw.is_array()) return out;
  for (const auto& item : raw) {
    Finding f;
    try {
      f = Finding::from_json(item);
    } catch (const Error& e) {
      out.push_back({"worker.malformed", RuleAction::kWarn, e.what(), 0, ""});
      continue;
    }
    f.action = policy.action(f.rule);
    if (f.action != RuleAction::kOff) out.push_back(std::move(f));
  }
  return out;
}

std::vector<std::string> rejecting_rules(const std::vector<Finding>& findings) {
  std::vector<std::string> ids;
  for (const auto& f : findings)
    if (f.action == RuleAction::kReject && std::find(ids.begin(), ids.end(), f.rule) == ids.end())
      ids.push_back(f.rule);
  return ids;
}

}  // namespace dice::eval
