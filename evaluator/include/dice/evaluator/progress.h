#pragma once
// Progress of a run: a bar with rate and ETA when stderr is a terminal, one plain line per
// finished candidate otherwise.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <ostream>
#include <stop_token>
#include <string>
#include <thread>

#include "dice/evaluator/record.h"

namespace dice::eval {

enum class ProgressMode {
  kLines,  ///< "[12/100] L1/19 path -> correct 1.020x (3.1 s)" per record
  kBar,    ///< one line redrawn in place (\r), every second and per record
  kNone,
};

/// Parses "lines", "bar", "none". Throws dice::InputError otherwise.
ProgressMode parse_progress_mode(const std::string& name);

/// Counts finished records of a run and shows them. Thread-safe.
class ProgressView {
 public:
  /// `total` records in the run, `done_before` of them finished before this session.
  ProgressView(std::ostream& out, ProgressMode mode, std::size_t total, std::size_t done_before);
  ~ProgressView();
  ProgressView(const ProgressView&) = delete;
  ProgressView& operator=(const ProgressView&) = delete;

  void add(const EvalRecord& record);
  /// Draws the final state and ends the bar's line.
  void finish();

  /// The bar's text for a given state (no \r): progress bar of `width` cells, count, percent,
  /// rate per minute and ETA from this session's records (`done_now` in `elapsed_s`), and
  /// verdict counts ("correct 30, compile_error 2").
  static std::string bar_line(std::size_t total, std::size_t done, std::size_t done_now,
                              double elapsed_s, const std::map<std::string, int>& verdicts,
                              int width = 24);
  /// "1h02m", "4m05s", "12s".
  static std::string duration(double seconds);

 private:
  void draw_locked();

  std::ostream& out_;
  ProgressMode mode_;
  std::size_t total_, done_, done_now_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::map<std::string, int> verdicts_;
  std::mutex mutex_;
  std::condition_variable_any tick_;
  bool finished_ = false;
  std::jthread ticker_;  // last: stopped first
};

}  // namespace dice::eval
