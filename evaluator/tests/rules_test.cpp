#include "dice/evaluator/rules.h"

#include <gtest/gtest.h>

#include <regex>

#include "dice/core/error.h"
#include "dice/core/files.h"
#include "dice/evaluator/record.h"
#include "dice/evaluator/summary.h"

namespace dice::eval {
namespace {

using nlohmann::json;

/// The catalogue is the table of evaluator/RULES.md: same ids, same order, same actions.
TEST(Rules, CatalogueMatchesRulesMd) {
  const std::string doc = read_file(std::filesystem::path(DICE_SOURCE_DIR) / "evaluator/RULES.md");
  const std::regex row(R"(\n\| `([a-z0-9_.]+)` \| ([^|]*) \|[^|]*\| (\w+) \| (\w+) \| (\w+) \|)");
  std::vector<std::vector<std::string>> table;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator();
       ++it)
    table.push_back({(*it)[1], (*it)[2], (*it)[3], (*it)[4], (*it)[5]});
  const auto& rules = rule_catalogue();
  ASSERT_EQ(table.size(), rules.size());
  for (std::size_t i = 0; i < rules.size(); ++i) {
    EXPECT_EQ(table[i][0], rules[i].id);
    EXPECT_EQ(table[i][1], rules[i].pattern) << rules[i].id;
    EXPECT_EQ(table[i][2], to_string(rules[i].strict)) << rules[i].id;
    EXPECT_EQ(table[i][3], to_string(rules[i].lenient)) << rules[i].id;
    EXPECT_EQ(table[i][4], to_string(rules[i].kernelbench)) << rules[i].id;
  }
}

TEST(Rules, EveryPatternOfSystemMdHasARule) {
  for (int item = 1; item <= 11; ++item) {
    const std::regex mention("(^|\\D)" + std::to_string(item) + "(\\D|$)");
    EXPECT_TRUE(std::any_of(
        rule_catalogue().begin(), rule_catalogue().end(),
        [&](const RuleInfo& r) { return std::regex_search(std::string(r.pattern), mention); }))
        << "system.md §4 item " << item;
  }
}

TEST(Rules, Policies) {
  const auto strict = RulePolicy::named("strict");
  const auto lenient = RulePolicy::named("lenient");
  const auto kb = RulePolicy::named("kernelbench");
  EXPECT_EQ(strict.action("static.blas_handle"), RuleAction::kReject);
  EXPECT_EQ(lenient.action("static.blas_handle"), RuleAction::kWarn);
  EXPECT_EQ(kb.action("static.blas_handle"), RuleAction::kOff);
  EXPECT_EQ(kb.action("sandbox.processes"), RuleAction::kReject);
  EXPECT_EQ(strict.action("a.rule.from.a.newer.worker"), RuleAction::kWarn);
  EXPECT_DOUBLE_EQ(strict.foreign_share_limit(), 0.5);
  EXPECT_DOUBLE_EQ(lenient.foreign_share_limit(), 0.0);
  EXPECT_THROW(RulePolicy::named("paranoid"), InputError);
  const json w = kb.worker_options();
  EXPECT_EQ(w.at("policy"), "kernelbench");
  EXPECT_EQ(w.at("rules").size(), 3u);  // the sandbox's rules only
  EXPECT_TRUE(strict.worker_options().at("rules").contains("static.io"));
}

TEST(Rules, Overrides) {
  auto p = RulePolicy::named("strict");
  p.override_rule("static.blas_handle=warn");
  EXPECT_EQ(p.action("static.blas_handle"), RuleAction::kWarn);
  p.override_rule("dynamic.*=off");
  EXPECT_EQ(p.action("dynamic.threads"), RuleAction::kOff);
  EXPECT_EQ(p.action("static.io"), RuleAction::kReject);
  EXPECT_FALSE(p.worker_options().at("rules").contains("dynamic.threads"));
  EXPECT_THROW(p.override_rule("static.nothing=warn"), InputError);
  EXPECT_THROW(p.override_rule("static.io=maybe"), InputError);
  EXPECT_THROW(p.override_rule("static.io"), InputError);
  try {
    p.override_rule("static.nothing=warn");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("static.nothing"), std::string::npos);
  }
}

TEST(Rules, ResolveFindings) {
  auto p = RulePolicy::named("strict");
  p.override_rule("static.hardcoded_values=off");
  const json raw = json::parse(R"([
    {"rule": "static.try_except", "message": "try", "line": 3, "where": "python"},
    {"rule": "static.reduced_precision", "message": "half"},
    {"rule": "static.hardcoded_values", "message": "table"},
    {"no_rule": true}
  ])");
  const auto found = resolve_findings(raw, p);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].action, RuleAction::kReject);
  EXPECT_EQ(found[0].line, 3);
  EXPECT_EQ(found[1].action, RuleAction::kWarn);
  EXPECT_EQ(found[2].rule, "worker.malformed");
  EXPECT_EQ(rejecting_rules(found), std::vector<std::string>{"static.try_except"});
  EXPECT_TRUE(resolve_findings(json("not a list"), p).empty());
}

TEST(Rules, RecordCarriesFindingsAndIsolation) {
  EvalRecord r;
  r.problem_id = "L1/1";
  r.verdict = Verdict::kRejected;
  r.policy = "strict";
  r.isolation = "bubblewrap (...)";
  r.findings = {{"static.try_except", RuleAction::kReject, "try", 4, "python"},
                {"problem.degenerate", RuleAction::kWarn, "near zero", 0, "run"},
                {"static.try_except", RuleAction::kReject, "again", 9, "python"}};
  r.problem = {{"degenerate", {"near zero"}}};
  const json j = r.to_json();
  EXPECT_EQ(j.at("verdict"), "rejected");
  EXPECT_EQ(j.at("rules"), json({"static.try_except", "problem.degenerate"}));
  const EvalRecord back = EvalRecord::from_json(j);
  EXPECT_EQ(back.verdict, Verdict::kRejected);
  EXPECT_EQ(back.findings.size(), 3u);
  EXPECT_EQ(back.findings[1].action, RuleAction::kWarn);
  EXPECT_EQ(back.isolation, r.isolation);
  EXPECT_TRUE(back.degenerate_problem());
  EXPECT_EQ(parse_verdict("captured"), Verdict::kCaptured);
}

TEST(Rules, SummaryCountsRulesAndDegenerateProblems) {
  const auto rec = [](Verdict v, double speedup, bool degenerate) {
    EvalRecord r;
    r.problem_id = "p";
    r.level = "L1";
    r.verdict = v;
    r.compiled = true;
    if (v == Verdict::kCorrect) r.speedup = Speedup{speedup, speedup, speedup};
    if (degenerate) r.findings.push_back({"problem.degenerate", RuleAction::kWarn, "", 0, "run"});
    if (v == Verdict::kRejected)
      r.findings.push_back({"static.io", RuleAction::kReject, "", 0, "python"});
    return r;
  };
  const auto rows =
      summarize({rec(Verdict::kCorrect, 3.0, true), rec(Verdict::kCorrect, 1.5, false),
                 rec(Verdict::kRejected, 0, false), rec(Verdict::kMismatch, 0, false)});
  const auto& all = rows.back();
  EXPECT_EQ(all.attempted, 4);
  EXPECT_EQ(all.correct, 2);
  EXPECT_EQ(all.faster_2, 1);
  EXPECT_EQ(all.degenerate, 1);
  EXPECT_EQ(all.attempted_nd, 3);
  EXPECT_EQ(all.correct_nd, 1);
  EXPECT_EQ(all.faster_2_nd, 0);
  EXPECT_EQ(all.rules, (std::vector<std::pair<std::string, int>>{{"problem.degenerate", 1},
                                                                 {"static.io", 1}}));
  EXPECT_NE(to_markdown(rows).find("1 of 4 candidates are on degenerate problems"),
            std::string::npos);
  EXPECT_EQ(to_json(rows).back().at("excluding_degenerate").at("attempted"), 3);
}

}  // namespace
}  // namespace dice::eval
