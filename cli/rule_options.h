#pragma once
// The rule-policy options shared by `dice eval` and `dice bench` (evaluator/RULES.md).

#include <CLI/CLI.hpp>

#include "dice/evaluator/evaluate.h"

namespace dice::cli {

/// Registers --policy (strict, lenient, kernelbench) and the repeatable --rule ID=ACTION on
/// `command`, writing into `options.policy` and `options.rule_overrides`. Unknown policies and
/// rules are reported when the run starts (dice::InputError from the evaluator).
inline void add_rule_options(CLI::App* command, eval::EvalOptions& options) {
  command
      ->add_option("--policy", options.policy,
                   "strict (own kernels must do the work), lenient (library calls reported), "
                   "kernelbench (KernelBench's own checks only); evaluator/RULES.md")
      ->capture_default_str();
  command->add_option("--rule", options.rule_overrides,
                      "override a rule's action: ID=reject|warn|off (ID may be a family: "
                      "static.*); repeatable");
}

}  // namespace dice::cli
