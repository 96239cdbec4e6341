#pragma once
// The defences of `dice eval` as named rules (evaluator/RULES.md): the catalogue, the policies
// that give each rule an action (reject, warn, off), and the findings of a candidate.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dice::eval {

/// What a rule that fires does to the verdict.
enum class RuleAction {
  kOff,     ///< not checked (dynamic checks are not even run)
  kWarn,    ///< reported in the record, verdict unchanged
  kReject,  ///< verdict `rejected`
};

std::string_view to_string(RuleAction a);
/// "reject", "warn" or "off"; nothing otherwise.
std::optional<RuleAction> parse_rule_action(std::string_view name);

/// One rule of RULES.md: its stable id, the cheating pattern of system.md §4 it answers, and its
/// default action under each policy.
struct RuleInfo {
  std::string_view id;       ///< e.g. "static.try_except"
  std::string_view pattern;  ///< system.md §4 item numbers, e.g. "5"
  std::string_view catches;  ///< one line
  RuleAction strict, lenient, kernelbench;
};

/// Every rule, in the order of RULES.md.
const std::vector<RuleInfo>& rule_catalogue();

/// A policy: an action for every rule and the dynamic thresholds. `strict` (default): the
/// candidate's own kernels must do the work; `lenient`: library calls allowed and reported;
/// `kernelbench`: KernelBench's own checks only (every rule off).
class RulePolicy {
 public:
  /// Throws dice::InputError unless `name` is strict, lenient or kernelbench.
  static RulePolicy named(std::string_view name);

  /// Applies one `--rule` option: "ID=reject|warn|off", where ID is a rule id or a family
  /// ("static.*"). Throws dice::InputError naming the option if the id or the action is unknown.
  void override_rule(std::string_view spec);

  /// The action of `rule`; an id this build does not know (a newer worker) is a warning.
  RuleAction action(std::string_view rule) const;
  const std::string& name() const { return name_; }
  /// Share of GPU time in kernels that are not the candidate's above which
  /// dynamic.foreign_kernels fires (0.5 under strict, 0 under lenient: every library kernel is
  /// reported).
  double foreign_share_limit() const { return foreign_share_limit_; }

  /// {"policy", "rules": {id: "reject"|"warn"} (rules that are on), "foreign_share_limit"}: the
  /// part of a worker request that says which dynamic checks to run (PROTOCOL.md).
  nlohmann::json worker_options() const;

 private:
  std::string name_;
  std::map<std::string, RuleAction, std::less<>> actions_;
  double foreign_share_limit_ = 0.5;
};

/// A rule that fired on a candidate.
struct Finding {
  std::string rule;  ///< rule id
  RuleAction action = RuleAction::kWarn;
  std::string message;
  int line = 0;       ///< 1-based in `where`; 0 for dynamic findings
  std::string where;  ///< "python", "<extension>:cuda_sources", or "run" for dynamic findings

  nlohmann::json to_json() const;
  /// Reads {"rule", "message", "line"?, "where"?, "action"?}. Throws dice::Error if malformed.
  static Finding from_json(const nlohmann::json& j);
};

/// Findings of a worker or of `dice_worker analyze`/`scan` ({"rule", "message", ...} objects)
/// with their action under `policy`; findings of rules that are off are dropped. Malformed
/// entries become a warning finding "worker.malformed" rather than an exception.
std::vector<Finding> resolve_findings(const nlohmann::json& raw, const RulePolicy& policy);

/// Ids of the findings whose action is reject (unique, in order of first appearance).
std::vector<std::string> rejecting_rules(const std::vector<Finding>& findings);

}  // namespace dice::eval
