#include "dice/evaluator/progress.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cmath>

#include "dice/core/error.h"

namespace dice::eval {

ProgressMode parse_progress_mode(const std::string& name) {
  if (name == "lines") return ProgressMode::kLines;
  if (name == "bar") return ProgressMode::kBar;
  if (name == "none") return ProgressMode::kNone;
  throw InputError("--progress " + name + ": expected auto, bar, lines or none");
}

ProgressView::ProgressView(std::ostream& out, ProgressMode mode, std::size_t total,
                           std::size_t done_before)
    : out_(out),
      mode_(mode),
      total_(total),
      done_(done_before),
      start_(std::chrono::steady_clock::now()) {
  if (mode_ != ProgressMode::kBar) return;
  ticker_ = std::jthread([this](std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested() && !finished_) {
      draw_locked();
      tick_.wait_for(lock, stop, std::chrono::seconds(1), [] { return false; });
    }
  });
}

ProgressView::~ProgressView() {
  finish();
}

std::string ProgressView::duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const auto s = static_cast<long>(std::lround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string ProgressView::bar_line(std::size_t total, std::size_t done, std::size_t done_now,
                                   double elapsed_s, const std::map<std::string, int>& verdicts,
                                   int width) {
  const double fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const auto filled = static_cast<int>(std::floor(fraction * width));
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(static_cast<std::size_t>(width), '.');
  std::string rate = "--/min", eta = "ETA --";
  if (done_now > 0 && elapsed_s > 0) {
    const double per_second = static_cast<double>(done_now) / elapsed_s;
    rate = fmt::format("{:.1f}/min", per_second * 60.0);
    eta = "ETA " + duration(static_cast<double>(total - std::min(done, total)) / per_second);
  }
  std::string counts;
  for (const auto& [verdict, n] : verdicts)
    counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", verdict, n);
  return fmt::format("[{}] {}/{} {:.0f}% {} {} {}{}{}", bar, done, total, 100.0 * fraction, rate,
                     eta, duration(elapsed_s), counts.empty() ? "" : " | ", counts);
}

void ProgressView::draw_locked() {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  fmt::print(out_, "\r\033[K{}", bar_line(total_, done_, done_now_, elapsed, verdicts_));
  out_.flush();
}

void ProgressView::add(const EvalRecord& record) {
  const std::lock_guard lock(mutex_);
  ++done_;
  ++done_now_;
  ++verdicts_[std::string(to_string(record.verdict))];
  if (mode_ == ProgressMode::kBar) {
    draw_locked();
  } else if (mode_ == ProgressMode::kLines) {
    std::string detail;
    if (record.speedup) detail = fmt::format(" {:.3f}x", record.speedup->value);
    if (!record.correct() && !record.reasons.empty()) detail = ": " + record.reasons.front();
    if (detail.size() > 160) detail = detail.substr(0, 157) + "...";
    fmt::print(out_, "[{}/{}] {} {} -> {}{} ({:.1f} s)\n", done_, total_, record.problem_id,
               record.candidate, to_string(record.verdict), detail, record.seconds);
    out_.flush();
  }
}

void ProgressView::finish() {
  {
    const std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
    if (mode_ == ProgressMode::kBar) {
      draw_locked();
      out_ << '\n';
      out_.flush();
    }
  }
  if (ticker_.joinable()) {
    ticker_.request_stop();
    ticker_.join();
  }
}

}  // namespace dice::eval
