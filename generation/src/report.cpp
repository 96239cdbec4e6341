#include "dice/generation/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "dice/core/error.h"

namespace dice::generation {

using nlohmann::json;

double pass_at_k(int n, int c, int k) {
  if (n < 1 || c < 0 || c > n || k < 1 || k > n)
    throw InputError(
        fmt::format("pass@k needs 0 <= c <= n and 1 <= k <= n, got n={} c={} k={}", n, c, k));
  if (n - c < k) return 1.0;
  // 1 - prod_{i = n-c+1}^{n} (1 - k / i)
  double miss = 1.0;
  for (int i = n - c + 1; i <= n; ++i) miss *= 1.0 - double(k) / double(i);
  return 1.0 - miss;
}

std::optional<std::string> degenerate_reason(std::string_view id) {
  static const std::map<std::string_view, std::string_view> kKnown{
      {"L1/23", "Softmax: accepts all-zero outputs"},
      {"L2/23", "accepts all-zero outputs"},
      {"L2/80", "outputs exactly 0 for every input"},
      {"L2/83", "outputs exactly 0 for every input"},
      {"L1/94", "MSE answerable in closed form without reading the targets"},
      {"L2/66", "dropout in training mode cannot match itself"},
      {"L1/95", "casts integer labels to float"},
      {"L1/98", "casts integer labels to float"},
  };
  const auto it = kKnown.find(id);
  if (it == kKnown.end()) return std::nullopt;
  return std::string(it->second);
}

namespace {

bool correct(const SampleRow& s) {
  return s.verdict() == "correct";
}
bool faster(const SampleRow& s, double p) {
  const auto sp = s.speedup();
  return correct(s) && (p <= 0 || (sp && *sp > p));
}
bool compiled(const SampleRow& s) {
  return s.record && s.record->value("compile", json::object()).value("compiled", false);
}

ReportRow make_row(const std::string& level, const std::vector<const SampleRow*>& rows,
                   const std::vector<int>& ks) {
  ReportRow r;
  r.level = level;
  std::map<std::string, std::vector<const SampleRow*>> by_problem;
  double log_sum = 0;
  for (const SampleRow* s : rows) {
    by_problem[s->problem_id].push_back(s);
    ++r.samples;
    r.evaluated += s->evaluated();
    r.compiled += compiled(*s);
    r.correct += correct(*s);
    r.fast_1 += faster(*s, 1.0);
    r.fast_2 += faster(*s, 2.0);
    r.truncated += s->status == "truncated" || s->verdict() == "truncated";
    if (const auto sp = s->speedup(); correct(*s) && sp && *sp > 0) {
      ++r.timed;
      log_sum += std::log(*sp);
    }
  }
  r.problems = static_cast<int>(by_problem.size());
  r.geomean_speedup = r.timed > 0 ? std::exp(log_sum / r.timed) : 0.0;
  for (const auto& [id, list] : by_problem) r.degenerate += degenerate_reason(id).has_value();
  for (const int k : ks) {
    double pass = 0, f1 = 0, f2 = 0;
    int counted = 0;
    for (const auto& [id, list] : by_problem) {
      const int n = static_cast<int>(list.size());
      if (k > n) continue;
      int c = 0, c1 = 0, c2 = 0;
      for (const SampleRow* s : list) {
        c += correct(*s);
        c1 += faster(*s, 1.0);
        c2 += faster(*s, 2.0);
      }
      pass += pass_at_k(n, c, k);
      f1 += pass_at_k(n, c1, k);
      f2 += pass_at_k(n, c2, k);
      ++counted;
    }
    if (counted == 0) continue;
    r.pass_at[k] = pass / counted;
    r.fast_1_at[k] = f1 / counted;
    r.fast_2_at[k] = f2 / counted;
  }
  return r;
}

std::string pct(double x) {
  return fmt::format("{:.1f}", 100.0 * x);
}

}  // namespace

double fast_p(const std::vector<SampleRow>& samples, double p) {
  if (samples.empty()) return 0;
  const auto n = std::count_if(samples.begin(), samples.end(),
                               [p](const SampleRow& s) { return faster(s, p); });
  return double(n) / double(samples.size());
}

BenchReport compute_report(const std::vector<SampleRow>& samples,
                           const std::map<std::string, double>& stages) {
  BenchReport report;
  report.stages = stages;
  std::map<std::string, int> per_problem;
  for (const auto& s : samples) ++per_problem[s.problem_id];
  for (const auto& [id, n] : per_problem) {
    report.samples_per_problem = std::max(report.samples_per_problem, n);
    if (const auto why = degenerate_reason(id)) report.degenerate[id] = *why;
  }
  if (report.samples_per_problem > 1) {
    for (int k = 1; k < report.samples_per_problem; k *= 2) report.ks.push_back(k);
    report.ks.push_back(report.samples_per_problem);
  }
  std::map<std::string, std::vector<const SampleRow*>> by_level;
  std::vector<const SampleRow*> all;
  for (const auto& s : samples) {
    by_level[s.level].push_back(&s);
    all.push_back(&s);
    if (!s.evaluated()) ++report.pending;
    if (s.status == "failed") ++report.failed;
    if (s.evaluated()) ++report.verdicts[s.verdict()];
    if (s.verdict() == "compiled") report.compile_only = true;
    if (const auto sp = s.speedup(); correct(s) && sp) report.speedups.push_back(*sp);
  }
  for (const auto& [level, rows] : by_level)
    report.rows.push_back(make_row(level, rows, report.ks));
  report.rows.push_back(make_row("all", all, report.ks));
  return report;
}

std::string report_markdown(const BenchReport& report) {
  std::string out =
      "| level | problems | samples | compiled % | Exec % | fast_1 % | fast_2 % | geomean speedup "
      "| truncated |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : report.rows)
    out += fmt::format("| {} | {}{} | {} | {} | {} | {} | {} | {} | {} |\n", r.level, r.problems,
                       r.degenerate > 0 ? fmt::format(" ({} degenerate)", r.degenerate) : "",
                       r.samples, pct(r.rate(r.compiled)), pct(r.rate(r.correct)),
                       pct(r.rate(r.fast_1)), pct(r.rate(r.fast_2)),
                       r.timed > 0 ? fmt::format("{:.3f}x", r.geomean_speedup) : "-", r.truncated);
  if (!report.ks.empty()) {
    out += "\n| level |";
    std::string rule = "|---|";
    for (const int k : report.ks) {
      out += fmt::format(" pass@{} % | fast_1@{} % | fast_2@{} % |", k, k, k);
      rule += "---|---|---|";
    }
    out += "\n" + rule + "\n";
    for (const auto& r : report.rows) {
      out += "| " + r.level + " |";
      for (const int k : report.ks) {
        const auto get = [k](const std::map<int, double>& m) {
          const auto it = m.find(k);
          return it == m.end() ? std::string("-") : pct(it->second);
        };
        out += fmt::format(" {} | {} | {} |", get(r.pass_at), get(r.fast_1_at), get(r.fast_2_at));
      }
      out += "\n";
    }
    out += fmt::format(
        "\npass@k and fast_p@k: unbiased estimator (Chen et al. 2021), {} samples "
        "per problem, averaged over problems.\n",
        report.samples_per_problem);
  }
  std::string verdicts;
  for (const auto& [v, n] : report.verdicts)
    verdicts += fmt::format("{}{} {}", verdicts.empty() ? "" : ", ", v, n);
  if (!verdicts.empty()) out += "\nverdicts: " + verdicts + "\n";
  if (!report.degenerate.empty()) {
    out += "\ndegenerate problems in this run (counted, but their verdicts prove little):";
    for (const auto& [id, why] : report.degenerate) out += fmt::format(" {} ({});", id, why);
    out += "\n";
  }
  if (report.pending > 0)
    out += fmt::format("\n{} samples not finished (continue with --resume)\n", report.pending);
  if (report.failed > 0) out += fmt::format("{} samples failed to generate\n", report.failed);
  if (report.compile_only)
    out +=
        "\nnote: no GPU ran these samples: they were generated and compiled only (verdict "
        "`compiled`); correctness and timing need a GPU, so Exec and fast_p are 0 here.\n";
  if (!report.stages.empty()) {
    out += "\nwall time per stage:";
    for (const auto& [stage, seconds] : report.stages)
      out += fmt::format(" {} {:.1f} s;", stage, seconds);
    out += "\n";
  }
  return out;
}

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

constexpr const char* kCss = R"css(
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px;max-height:40em}
.v-correct{color:#080;font-weight:bold}.v-other{color:#a00}.v-compiled{color:#a60}
.note{background:#fff6d6;padding:8px;border-left:4px solid #e0b000}
details{margin:2px 0}summary{cursor:pointer}.deg{color:#a60}
)css";

/// A histogram of log2 speedups of correct samples (bins of 0.5).
std::string speedup_svg(const std::vector<double>& speedups) {
  if (speedups.empty()) return "<p>No correct timed samples: no speedup distribution.</p>";
  std::map<int, int> bins;
  for (const double s : speedups)
    ++bins[static_cast<int>(std::floor(std::log2(std::max(s, 1e-6)) * 2.0))];
  const int lo = std::min(bins.begin()->first, -2), hi = std::max(bins.rbegin()->first, 2);
  int top = 1;
  for (const auto& [b, n] : bins) top = std::max(top, n);
  const int w = 600, h = 200, n = hi - lo + 1;
  const double bw = double(w - 40) / n;
  std::string svg = fmt::format("<svg width='{}' height='{}' role='img'>", w, h + 40);
  for (int b = lo; b <= hi; ++b) {
    const int count = bins.count(b) ? bins.at(b) : 0;
    const double bh = double(h - 10) * count / top;
    const double x = 30 + (b - lo) * bw;
    svg += fmt::format(
        "<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' "
        "fill='{}'><title>{:.2f}x-{:.2f}x:"
        " {}</title></rect>",
        x, h - bh, bw - 1, bh, b >= 0 ? "#4a8" : "#c66", std::exp2(b / 2.0),
        std::exp2((b + 1) / 2.0), count);
    if ((b - lo) % 2 == 0)
      svg += fmt::format("<text x='{:.1f}' y='{}' font-size='10'>{:.2g}x</text>", x, h + 14,
                         std::exp2(b / 2.0));
  }
  svg += fmt::format("<line x1='30' y1='{}' x2='{}' y2='{}' stroke='#333'/>", h, w - 10, h);
  svg += fmt::format("<text x='30' y='{}' font-size='11'>speedup (log scale; count max {})</text>",
                     h + 32, top);
  return svg + "</svg>";
}

/// fast_p as a function of p, from 0 to max(2, the largest speedup).
std::string fast_p_svg(const std::vector<SampleRow>& samples, const std::vector<double>& speedups) {
  double pmax = 2.0;
  for (const double s : speedups) pmax = std::max(pmax, std::min(s * 1.1, 20.0));
  const int w = 600, h = 200, steps = 200;
  std::string points;
  double top = 0;
  std::vector<double> ys;
  for (int i = 0; i <= steps; ++i) {
    ys.push_back(fast_p(samples, pmax * i / steps));
    top = std::max(top, ys.back());
  }
  if (top <= 0) top = 1;
  for (int i = 0; i <= steps; ++i)
    points += fmt::format("{:.1f},{:.1f} ", 40 + double(w - 60) * i / steps,
                          h - double(h - 10) * ys[static_cast<std::size_t>(i)] / top);
  std::string svg = fmt::format(
      "<svg width='{}' height='{}' role='img'>"
      "<polyline fill='none' stroke='#36c' stroke-width='2' points='{}'/>"
      "<line x1='40' y1='{}' x2='{}' y2='{}' stroke='#333'/>"
      "<line x1='40' y1='10' x2='40' y2='{}' stroke='#333'/>",
      w, h + 40, points, h, w - 20, h, h);
  for (const double p : {0.0, 1.0, 2.0, pmax}) {
    const double x = 40 + double(w - 60) * p / pmax;
    svg += fmt::format("<text x='{:.1f}' y='{}' font-size='10'>{:.1f}</text>", x, h + 14, p);
  }
  svg += fmt::format(
      "<text x='2' y='14' font-size='10'>{:.1f}%</text><text x='40' y='{}' "
      "font-size='11'>p (fast_p = share of samples correct and more than p times faster)</text>",
      100 * top, h + 32);
  return svg + "</svg>";
}

std::string verdict_class(const std::string& v) {
  if (v == "correct") return "v-correct";
  if (v == "compiled" || v.empty()) return "v-compiled";
  return "v-other";
}

}  // namespace

std::string report_html(const BenchReport& report, const std::vector<SampleRow>& samples,
                        const json& options) {
  std::string h =
      "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>dice bench "
      "report</title><style>";
  h += kCss;
  h += "</style></head><body><h1>dice bench report</h1>";
  if (report.compile_only)
    h += "<p class='note'>No GPU ran these samples: they were generated and compiled only "
         "(verdict <code>compiled</code>). Correctness and timing need a GPU, so Exec and fast_p "
         "are 0 here.</p>";
  if (report.pending > 0)
    h += fmt::format(
        "<p class='note'>{} samples are not finished (continue with "
        "<code>--resume</code>).</p>",
        report.pending);
  h += "<h2>Table</h2><table><tr><th>level</th><th>problems</th><th>samples</th><th>compiled "
       "%</th><th>Exec %</th><th>fast_1 %</th><th>fast_2 %</th><th>geomean speedup</th>"
       "<th>truncated</th></tr>";
  for (const auto& r : report.rows)
    h += fmt::format(
        "<tr><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td></tr>",
        html_escape(r.level), r.problems,
        r.degenerate > 0 ? fmt::format(" <span class='deg'>({} degenerate)</span>", r.degenerate)
                         : "",
        r.samples, pct(r.rate(r.compiled)), pct(r.rate(r.correct)), pct(r.rate(r.fast_1)),
        pct(r.rate(r.fast_2)), r.timed > 0 ? fmt::format("{:.3f}x", r.geomean_speedup) : "-",
        r.truncated);
  h += "</table>";
  if (!report.ks.empty()) {
    h += "<h2>pass@k and fast_p@k</h2><p>Unbiased estimator (Chen et al. 2021), " +
         std::to_string(report.samples_per_problem) +
         " samples per problem, averaged over problems.</p><table><tr><th>level</th>";
    for (const int k : report.ks)
      h += fmt::format("<th>pass@{0}</th><th>fast_1@{0}</th><th>fast_2@{0}</th>", k);
    h += "</tr>";
    for (const auto& r : report.rows) {
      h += "<tr><td>" + html_escape(r.level) + "</td>";
      for (const int k : report.ks) {
        const auto get = [k](const std::map<int, double>& m) {
          const auto it = m.find(k);
          return it == m.end() ? std::string("-") : pct(it->second);
        };
        h += fmt::format("<td>{}</td><td>{}</td><td>{}</td>", get(r.pass_at), get(r.fast_1_at),
                         get(r.fast_2_at));
      }
      h += "</tr>";
    }
    h += "</table>";
  }
  if (!report.stages.empty()) {
    h += "<h2>Wall time per stage</h2><table><tr><th>stage</th><th>seconds</th></tr>";
    for (const auto& [stage, s] : report.stages)
      h += fmt::format("<tr><td>{}</td><td>{:.1f}</td></tr>", html_escape(stage), s);
    h += "</table>";
  }
  h += "<h2>Speedup distribution (correct samples)</h2>" + speedup_svg(report.speedups);
  h += "<h2>fast_p as a function of p</h2>" + fast_p_svg(samples, report.speedups);
  if (!report.degenerate.empty()) {
    h += "<h2>Degenerate problems</h2><ul>";
    for (const auto& [id, why] : report.degenerate)
      h += "<li>" + html_escape(id) + ": " + html_escape(why) + "</li>";
    h += "</ul>";
  }
  h += "<h2>Samples</h2>";
  for (const auto& s : samples) {
    const std::string v =
        s.evaluated() ? s.verdict() : (s.status == "failed" ? "failed" : "pending");
    const auto sp = s.speedup();
    const auto deg = degenerate_reason(s.problem_id);
    h += fmt::format(
        "<details><summary>{} {} #{} <span class='{}'>{}</span>{}{} <small>({}, {} tokens, "
        "{:.1f} s)</small></summary>",
        html_escape(s.problem_id), html_escape(s.problem_name), s.sample, verdict_class(v),
        html_escape(v), sp ? fmt::format(" {:.3f}x", *sp) : "",
        deg ? " <span class='deg'>degenerate</span>" : "", html_escape(s.status), s.output_tokens,
        s.gen_seconds);
    if (!s.error.empty()) h += "<p class='v-other'>" + html_escape(s.error) + "</p>";
    if (s.record) {
      std::string reasons;
      for (const auto& r : s.record->value("reasons", json::array()))
        if (r.is_string()) reasons += r.get<std::string>() + "\n";
      const std::string log = s.record->value("compile", json::object()).value("log_tail", "");
      if (!reasons.empty()) h += "<pre>" + html_escape(reasons) + "</pre>";
      if (!log.empty())
        h += "<details><summary>compiler output</summary><pre>" + html_escape(log) +
             "</pre></details>";
    }
    h += "<p>Code given to the evaluator:</p><pre>" + html_escape(s.candidate) + "</pre>";
    h += "<details><summary>model output</summary><pre>" + html_escape(s.output) +
         "</pre></details></details>";
  }
  h += "<h2>Options</h2><pre>" +
       html_escape(options.dump(2, ' ', false, json::error_handler_t::replace)) + "</pre>";
  return h + "</body></html>\n";
}

}  // namespace dice::generation
