#include "dice/evaluator/summary.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace dice::eval {

using nlohmann::json;

namespace {

struct Accumulator {
  LevelSummary row;
  double log_sum = 0;
  std::map<std::string, int> verdicts;
  std::map<std::string, int> rules;

  void add(const EvalRecord& r) {
    ++row.attempted;
    if (r.compiled) ++row.compiled;
    ++verdicts[std::string(to_string(r.verdict))];
    for (const auto& id : r.rules()) ++rules[id];
    const bool degenerate = r.degenerate_problem();
    if (degenerate) {
      ++row.degenerate;
    } else {
      ++row.attempted_nd;
      if (r.correct()) ++row.correct_nd;
      if (r.correct() && r.speedup && r.speedup->value > 1.0) ++row.faster_1_nd;
      if (r.correct() && r.speedup && r.speedup->value > 2.0) ++row.faster_2_nd;
    }
    if (!r.correct()) return;
    ++row.correct;
    ++row.faster_0;
    if (!r.speedup || !(r.speedup->value > 0)) return;
    ++row.timed;
    log_sum += std::log(r.speedup->value);
    if (r.speedup->value > 1.0) ++row.faster_1;
    if (r.speedup->value > 2.0) ++row.faster_2;
  }

  LevelSummary finish() {
    if (row.timed > 0) row.geomean_speedup = std::exp(log_sum / row.timed);
    row.verdicts.assign(verdicts.begin(), verdicts.end());
    row.rules.assign(rules.begin(), rules.end());
    return row;
  }
};

}  // namespace

std::vector<LevelSummary> summarize(const std::vector<EvalRecord>& records) {
  std::map<std::string, Accumulator> levels;
  Accumulator all;
  all.row.level = "all";
  for (const auto& r : records) {
    auto& acc = levels[r.level];
    acc.row.level = r.level;
    acc.add(r);
    all.add(r);
  }
  std::vector<LevelSummary> rows;
  for (auto& [_, acc] : levels) rows.push_back(acc.finish());
  rows.push_back(all.finish());
  return rows;
}

json to_json(const std::vector<LevelSummary>& rows) {
  json out = json::array();
  for (const auto& r : rows) {
    json verdicts = json::object();
    for (const auto& [name, count] : r.verdicts) verdicts[name] = count;
    json rules = json::object();
    for (const auto& [name, count] : r.rules) rules[name] = count;
    const auto nd = [&](int count) {
      return r.attempted_nd > 0 ? double(count) / r.attempted_nd : 0.0;
    };
    out.push_back({{"level", r.level},
                   {"attempted", r.attempted},
                   {"compiled", r.compiled},
                   {"correct", r.correct},
                   {"compile_rate", r.rate(r.compiled)},
                   {"correct_rate", r.rate(r.correct)},
                   {"fast_0", r.rate(r.faster_0)},
                   {"fast_1", r.rate(r.faster_1)},
                   {"fast_2", r.rate(r.faster_2)},
                   {"timed", r.timed},
                   {"geomean_speedup", r.timed > 0 ? json(r.geomean_speedup) : json()},
                   {"verdicts", verdicts},
                   {"rules", rules},
                   {"degenerate", r.degenerate},
                   {"excluding_degenerate",
                    {{"attempted", r.attempted_nd},
                     {"correct_rate", nd(r.correct_nd)},
                     {"fast_1", nd(r.faster_1_nd)},
                     {"fast_2", nd(r.faster_2_nd)}}}});
  }
  return out;
}

std::string to_markdown(const std::vector<LevelSummary>& rows) {
  std::string out =
      "| level | attempted | compiled | correct (Exec) | fast_0 | fast_1 | fast_2 | geomean "
      "speedup |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  const auto pct = [](double x) { return fmt::format("{:.1f}%", 100.0 * x); };
  for (const auto& r : rows) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", r.level, r.attempted,
                       pct(r.rate(r.compiled)), pct(r.rate(r.correct)), pct(r.rate(r.faster_0)),
                       pct(r.rate(r.faster_1)), pct(r.rate(r.faster_2)),
                       r.timed > 0 ? fmt::format("{:.3f}x ({} timed)", r.geomean_speedup, r.timed)
                                   : std::string("-"));
  }
  for (const auto& r : rows) {
    if (r.degenerate == 0) continue;
    const auto nd = [&](int count) {
      return pct(r.attempted_nd > 0 ? double(count) / r.attempted_nd : 0.0);
    };
    out += fmt::format(
        "\n{}: {} of {} candidates are on degenerate problems (problem.degenerate); without them: "
        "{} attempted, correct {}, fast_1 {}, fast_2 {}\n",
        r.level, r.degenerate, r.attempted, r.attempted_nd, nd(r.correct_nd), nd(r.faster_1_nd),
        nd(r.faster_2_nd));
  }
  return out;
}

}  // namespace dice::eval
