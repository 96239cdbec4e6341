#include "dice/engine/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "dice/core/error.h"

namespace dice::engine {
namespace {

TEST(Philox, Random123KnownAnswers) {
  using A4 = std::array<std::uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, UniformDependsOnEveryCounterPart) {
  const double u = philox_uniform(7, 100, 2);
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
  EXPECT_EQ(u, philox_uniform(7, 100, 2));
  EXPECT_NE(u, philox_uniform(8, 100, 2));
  EXPECT_NE(u, philox_uniform(7, 101, 2));
  EXPECT_NE(u, philox_uniform(7, 100, 3));
  EXPECT_NE(philox_uniform(7, 100, 2), philox_uniform(7, 100 + (std::int64_t{1} << 32), 2));
}

SamplingParams small_vocab(double temperature = 0) {
  SamplingParams p;
  p.temperature = temperature;
  p.mask_id = 5;
  p.vocab_limit = 8;  // rows 8, 9 of a 10-row logit vector are padding
  return p;
}

TEST(Propose, GreedyIsArgmaxWithLowestIdOnTies) {
  const std::vector<float> logits{0.1f, 2.0f, 0.3f, 2.0f, -1.0f, 0.0f, 1.0f, 0.5f, 0.0f, 0.0f};
  const auto p = propose(logits, small_vocab(), 0, 0);
  EXPECT_EQ(p.token, 1);
}

TEST(Propose, ForbiddenIdsAreNeverChosen) {
  // The mask id and the padding rows carry by far the largest logits.
  std::vector<float> logits{0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 50.0f, 0.6f, 0.7f, 60.0f, 70.0f};
  EXPECT_EQ(propose(logits, small_vocab(), 0, 0).token, 7);
  for (std::int64_t position = 0; position < 2000; ++position) {
    const auto p = propose(logits, small_vocab(1.0), position, 0);
    EXPECT_LT(p.token, 8);
    EXPECT_NE(p.token, 5);
  }
}

TEST(Propose, ConfidenceAndEntropyUseTheUnfilteredTemperatureOneSoftmax) {
  std::vector<float> logits(10, 0.0f);
  logits[2] = std::log(3.0f);  // allowed ids 0..7 except 5: weights 1,1,3,1,1,1,1 (sum 9)
  auto params = small_vocab(0.5);
  params.top_k = 1;
  const auto p = propose(logits, params, 3, 1);
  EXPECT_EQ(p.token, 2);  // top-k 1 is greedy
  EXPECT_NEAR(p.confidence, 3.0 / 9.0, 1e-6);
  const double expected_entropy =
      -(6 * (1.0 / 9) * std::log(1.0 / 9) + (3.0 / 9) * std::log(3.0 / 9));
  EXPECT_NEAR(p.entropy, expected_entropy, 1e-5);
}

TEST(Propose, UniformLogitsHaveEntropyLogN) {
  const std::vector<float> logits(10, 1.5f);
  const auto p = propose(logits, small_vocab(), 0, 0);
  EXPECT_NEAR(p.entropy, std::log(7.0), 1e-5);
  EXPECT_NEAR(p.confidence, 1.0 / 7, 1e-6);
}

TEST(Propose, TopKKeepsOnlyTheKMostLikely) {
  std::vector<float> logits{3.0f, 2.9f, 2.8f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  auto params = small_vocab(1.0);
  params.top_k = 2;
  std::map<int, int> seen;
  for (std::int64_t position = 0; position < 3000; ++position)
    ++seen[propose(logits, params, position, 0).token];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[0], 1200);
  EXPECT_GT(seen[1], 1200);
  // k at or beyond the allowed count is no filter.
  params.top_k = 100;
  seen.clear();
  for (std::int64_t position = 0; position < 3000; ++position)
    ++seen[propose(logits, params, position, 0).token];
  EXPECT_EQ(seen.size(), 7u);
}

TEST(Propose, TopPKeepsTheShortestPrefixReachingP) {
  // Weights at T=1: 0.5, 0.25, 0.125, ... (log-space steps of log 2).
  std::vector<float> logits(10, -100.0f);
  for (int i = 0; i < 5; ++i)
    logits[static_cast<std::size_t>(i)] = -static_cast<float>(i) * std::log(2.0f);
  auto params = small_vocab(1.0);
  params.top_p = 0.6;  // 0.5 / total < 0.6 <= 0.75 / total: ids 0 and 1
  std::map<int, int> seen;
  for (std::int64_t position = 0; position < 3000; ++position)
    ++seen[propose(logits, params, position, 0).token];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_NEAR(seen[0] / 3000.0, 2.0 / 3, 0.05);
  // A tiny p keeps exactly one id: the most likely.
  params.top_p = 1e-9;
  for (std::int64_t position = 0; position < 50; ++position)
    EXPECT_EQ(propose(logits, params, position, 0).token, 0);
}

TEST(Propose, SampledFrequenciesFollowTheTemperedSoftmax) {
  std::vector<float> logits(10, 0.0f);
  logits[0] = 1.0f;
  auto params = small_vocab(2.0);
  const int n = 20000;
  int zeros = 0;
  for (std::int64_t position = 0; position < n; ++position)
    zeros += propose(logits, params, position, 3).token == 0;
  const double w0 = std::exp(0.5);
  EXPECT_NEAR(zeros / static_cast<double>(n), w0 / (w0 + 6), 0.012);
}

TEST(Propose, SameCounterSameTokenDifferentSeedDifferentStream) {
  std::vector<float> logits(10, 0.0f);
  auto a = small_vocab(1.0), b = small_vocab(1.0);
  b.seed = 1;
  int same = 0;
  for (std::int64_t position = 0; position < 200; ++position) {
    EXPECT_EQ(propose(logits, a, position, 1).token, propose(logits, a, position, 1).token);
    same += propose(logits, a, position, 1).token == propose(logits, b, position, 1).token;
  }
  EXPECT_LT(same, 80);  // about 1/7 expected
}

TEST(Propose, NanLogitOrNoAllowedIdThrows) {
  std::vector<float> logits(10, 0.0f);
  logits[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(propose(logits, small_vocab(), 0, 0), Error);
  auto params = small_vocab();
  params.vocab_limit = 0;
  EXPECT_THROW(propose(std::vector<float>(10, 0.0f), params, 0, 0), Error);
}

}  // namespace
}  // namespace dice::engine
