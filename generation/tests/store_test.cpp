#include "dice/generation/bench_store.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_support.h"

namespace dice::generation {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::temp_dir;

std::vector<SampleRow> rows() {
  std::vector<SampleRow> out;
  for (const char* id : {"L1/1", "L1/2"})
    for (int j = 0; j < 2; ++j) {
      SampleRow r;
      r.problem_id = id;
      r.problem_name = id;
      r.level = "L1";
      r.sample = j;
      r.seed = 7u + static_cast<unsigned>(j);
      out.push_back(r);
    }
  return out;
}

TEST(BenchStore, SamplesSurviveReopeningAndAreNotDuplicated) {
  const fs::path dir = temp_dir("store");
  {
    BenchStore store(dir / "bench.db");
    EXPECT_TRUE(store.options().is_null());
    store.set_options(json{{"mode", "e2e"}});
    store.add_samples(rows());
    auto samples = store.samples();
    ASSERT_EQ(samples.size(), 4u);
    SampleRow s = samples[1];
    s.status = "truncated";
    s.output = "```python\nx = 1";
    s.code = "";
    s.candidate = s.output;
    s.output_tokens = 12;
    store.set_generated(s);
    store.set_eval_run(s.id, 5);
    store.set_record(s.id, json{{"verdict", "truncated"}});
    store.set_record(samples[2].id, json{{"verdict", "correct"}, {"speedup", 1.25}});
    store.add_stage_seconds("generation", 1.5);
    store.add_stage_seconds("generation", 2.0);
  }
  BenchStore store(dir / "bench.db");
  store.add_samples(rows());  // again: nothing changes
  const auto samples = store.samples();
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(store.options().at("mode"), "e2e");
  EXPECT_EQ(samples[0].status, "pending");
  EXPECT_FALSE(samples[0].generated());
  EXPECT_EQ(samples[1].status, "truncated");
  EXPECT_TRUE(samples[1].generated());
  EXPECT_EQ(samples[1].output, "```python\nx = 1");
  EXPECT_EQ(samples[1].output_tokens, 12);
  EXPECT_EQ(samples[1].eval_run, 5);
  EXPECT_EQ(samples[1].verdict(), "truncated");
  EXPECT_EQ(samples[1].seed, 8u);
  EXPECT_EQ(samples[2].speedup(), 1.25);
  EXPECT_FALSE(samples[3].evaluated());
  EXPECT_DOUBLE_EQ(store.stage_seconds().at("generation"), 3.5);
  fs::remove_all(dir);
}

TEST(BenchStore, RegeneratingClearsTheEvaluation) {
  const fs::path dir = temp_dir("regen");
  BenchStore store(dir / "bench.db");
  store.add_samples(rows());
  SampleRow s = store.samples()[0];
  store.set_record(s.id, json{{"verdict", "compiled"}});
  s.status = "generated";
  store.set_generated(s);
  EXPECT_FALSE(store.samples()[0].evaluated());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dice::generation
