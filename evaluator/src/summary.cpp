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

  void add(const EvalRecord& r) {
    ++row.attempted;
    if (r.compiled) ++row.compiled;
    ++verdicts[std::string(to_string(r.verdict))];
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
                   {"verdicts", verdicts}});
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
  return out;
}

}  // namespace dice::eval
