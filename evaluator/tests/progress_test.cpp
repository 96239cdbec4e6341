#include "dice/evaluator/progress.h"

#include <gtest/gtest.h>

#include <sstream>

#include "dice/core/error.h"

namespace dice::eval {
namespace {

TEST(Progress, BarShowsCountRateAndEta) {
  // 30 of 100 done, 20 of them in this session's 60 s: 20/min, 70 left -> 3m30s.
  const std::string line =
      ProgressView::bar_line(100, 30, 20, 60.0, {{"correct", 25}, {"mismatch", 5}}, 10);
  EXPECT_EQ(line, "[###.......] 30/100 30% 20.0/min ETA 3m30s 1m00s | correct 25, mismatch 5");
  EXPECT_NE(ProgressView::bar_line(10, 0, 0, 5.0, {}, 4).find("ETA --"), std::string::npos);
  EXPECT_EQ(ProgressView::duration(3725), "1h02m");
  EXPECT_EQ(ProgressView::duration(12.4), "12s");
}

EvalRecord record(Verdict v, const char* reason) {
  EvalRecord r;
  r.problem_id = "L1/19";
  r.candidate = "c.py";
  r.verdict = v;
  r.seconds = 2.5;
  if (*reason != '\0') r.reasons.push_back(reason);
  return r;
}

TEST(Progress, LinesCountFromResumedRecords) {
  std::ostringstream out;
  {
    ProgressView view(out, ProgressMode::kLines, 5, 2);
    view.add(record(Verdict::kMismatch, "trial 1: values differ"));
  }
  EXPECT_EQ(out.str(), "[3/5] L1/19 c.py -> mismatch: trial 1: values differ (2.5 s)\n");
}

TEST(Progress, BarRedrawsInPlaceAndEndsTheLine) {
  std::ostringstream out;
  {
    ProgressView view(out, ProgressMode::kBar, 2, 0);
    view.add(record(Verdict::kCorrect, ""));
    view.add(record(Verdict::kCorrect, ""));
    view.finish();
  }
  const std::string text = out.str();
  EXPECT_NE(text.find("\r\033[K["), std::string::npos);
  EXPECT_NE(text.find("2/2 100%"), std::string::npos);
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(text.find('\n'), text.size() - 1);  // one line, redrawn
}

TEST(Progress, ModesByName) {
  EXPECT_EQ(parse_progress_mode("bar"), ProgressMode::kBar);
  EXPECT_THROW(parse_progress_mode("fancy"), InputError);
}

}  // namespace
}  // namespace dice::eval
