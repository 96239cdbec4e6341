#include "dice/engine/remasking.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "dice/core/error.h"

namespace dice::engine {
namespace {

using Positions = std::vector<std::int32_t>;

std::vector<Proposal> with_confidence(std::vector<float> confidence) {
  std::vector<Proposal> p;
  for (const float c : confidence) p.push_back({.token = 1, .confidence = c, .entropy = 0});
  return p;
}

std::vector<Proposal> with_entropy(std::vector<float> entropy) {
  std::vector<Proposal> p;
  for (const float e : entropy) p.push_back({.token = 1, .confidence = 0, .entropy = e});
  return p;
}

RemaskingOptions strategy(RemaskingStrategy s) {
  RemaskingOptions o;
  o.strategy = s;
  return o;
}

TEST(TransferSchedule, SpreadsTheRemainderOverTheFirstSteps) {
  EXPECT_EQ(transfer_schedule(4, 4), (Positions{1, 1, 1, 1}));
  EXPECT_EQ(transfer_schedule(10, 4), (Positions{3, 3, 2, 2}));
  EXPECT_EQ(transfer_schedule(3, 4), (Positions{1, 1, 1, 0}));
  EXPECT_EQ(transfer_schedule(4, 1), (Positions{4}));
  EXPECT_EQ(transfer_schedule(0, 2), (Positions{0, 0}));
  EXPECT_THROW(transfer_schedule(4, 0), Error);
  EXPECT_THROW(transfer_schedule(-1, 4), Error);
}

TEST(SelectUnmask, SequentialTakesTheFirstKMasked) {
  const std::array<bool, 6> masked{false, true, false, true, true, true};
  const auto p = with_confidence({0, 0.1f, 0, 0.9f, 0.8f, 0.7f});
  const auto o = strategy(RemaskingStrategy::kSequential);
  EXPECT_EQ(select_unmask(o, masked, p, 2, false), (Positions{1, 3}));
  EXPECT_EQ(select_unmask(o, masked, p, 1, false), (Positions{1}));
  EXPECT_EQ(select_unmask(o, masked, p, 1, true), (Positions{1, 3, 4, 5}));
}

TEST(SelectUnmask, StaticTakesTheKMostConfidentMasked) {
  const std::array<bool, 5> masked{true, false, true, true, true};
  const auto p = with_confidence({0.2f, 0.99f, 0.5f, 0.7f, 0.5f});
  const auto o = strategy(RemaskingStrategy::kLowConfidenceStatic);
  EXPECT_EQ(select_unmask(o, masked, p, 1, false), (Positions{3}));
  EXPECT_EQ(select_unmask(o, masked, p, 2, false), (Positions{2, 3}));  // tie: lower position
  EXPECT_EQ(select_unmask(o, masked, p, 0, false), (Positions{3}));     // at least one
}

TEST(SelectUnmask, DynamicTakesAllAboveThresholdAndAtLeastK) {
  const std::array<bool, 5> masked{true, true, true, true, false};
  const auto p = with_confidence({0.95f, 0.5f, 0.91f, 0.2f, 1.0f});
  auto o = strategy(RemaskingStrategy::kLowConfidenceDynamic);
  o.threshold = 0.9;
  EXPECT_EQ(select_unmask(o, masked, p, 1, false), (Positions{0, 2}));
  EXPECT_EQ(select_unmask(o, masked, p, 3, false), (Positions{0, 1, 2}));  // fall back to top k
  o.threshold = 0.99;
  EXPECT_EQ(select_unmask(o, masked, p, 1, false), (Positions{0}));
  const auto q = with_confidence({0.5f, 0.5f, 0.5f, 0.5f, 0.5f});
  o.threshold = 0.5;
  EXPECT_EQ(select_unmask(o, masked, q, 1, false), (Positions{0}));  // none strictly above
}

TEST(SelectUnmask, EntropyBoundedTakesLowEntropyWhileTheSumStaysBelowTheBound) {
  const std::array<bool, 5> masked{true, true, true, false, true};
  const auto p = with_entropy({0.3f, 0.1f, 0.2f, 0.0f, 2.0f});
  auto o = strategy(RemaskingStrategy::kEntropyBounded);
  o.entropy_bound = 0.35;  // 0.1 + 0.2 = 0.3 < 0.35; + 0.3 = 0.6 >= 0.35
  EXPECT_EQ(select_unmask(o, masked, p, 1, false), (Positions{1, 2}));
  o.entropy_bound = 0.05;  // at least one, even above the bound
  EXPECT_EQ(select_unmask(o, masked, p, 1, false), (Positions{1}));
  o.entropy_bound = 100;
  EXPECT_EQ(select_unmask(o, masked, p, 1, false), (Positions{0, 1, 2, 4}));
  o.entropy_bound = 0.05;  // the last allowed step unmasks everything
  EXPECT_EQ(select_unmask(o, masked, p, 1, true), (Positions{0, 1, 2, 4}));
}

TEST(SelectUnmask, NothingMaskedNothingChosenAndSizesMustMatch) {
  const std::array<bool, 2> none{false, false};
  const auto p = with_confidence({0.5f, 0.5f});
  EXPECT_TRUE(select_unmask(strategy(RemaskingStrategy::kSequential), none, p, 1, true).empty());
  const std::array<bool, 3> three{true, true, true};
  EXPECT_THROW(select_unmask(strategy(RemaskingStrategy::kSequential), three, p, 1, false), Error);
}

TEST(SelectUnmask, TheReusingFormGivesTheSameChoicesWithStaleBuffers) {
  // The decoding loop's form keeps its two vectors between calls: whatever they hold (a longer
  // earlier choice, leftovers of the scratch order) must not leak into the next choice. Ties
  // (equal confidence or entropy) go to the lower position, as in the returning form.
  const std::array<bool, 8> masked{true, false, true, true, true, false, true, true};
  const auto conf = with_confidence({0.5f, 0.9f, 0.7f, 0.7f, 0.1f, 0.2f, 0.7f, 0.3f});
  const auto entropy = with_entropy({0.3f, 0.1f, 0.2f, 0.2f, 0.9f, 0.1f, 0.2f, 0.4f});
  std::vector<std::int32_t> chosen{5, 5, 5, 5, 5, 5, 5, 5, 5}, order{1, 1, 1};
  for (const auto s :
       {RemaskingStrategy::kSequential, RemaskingStrategy::kLowConfidenceStatic,
        RemaskingStrategy::kLowConfidenceDynamic, RemaskingStrategy::kEntropyBounded}) {
    RemaskingOptions o = strategy(s);
    o.threshold = 0.6;
    o.entropy_bound = 0.5;
    const auto& proposals = s == RemaskingStrategy::kEntropyBounded ? entropy : conf;
    for (const std::int32_t k : {1, 2, 3})
      for (const bool last : {false, true}) {
        const Positions expected = select_unmask(o, masked, proposals, k, last);
        select_unmask(o, masked, proposals, k, last, chosen, order);
        EXPECT_EQ(chosen, expected) << strategy_name(s) << " k " << k << " last " << last;
      }
  }
  // The ties: confidence 0.7 at positions 2, 3 and 6, two of them taken: the lower ones.
  EXPECT_EQ(
      select_unmask(strategy(RemaskingStrategy::kLowConfidenceStatic), masked, conf, 2, false),
      (Positions{2, 3}));
  EXPECT_THROW(select_unmask(strategy(RemaskingStrategy::kSequential), masked,
                             std::span(conf).first(4), 1, false, chosen, order),
               Error);
}

TEST(Strategy, NamesRoundTrip) {
  for (const auto s :
       {RemaskingStrategy::kSequential, RemaskingStrategy::kLowConfidenceStatic,
        RemaskingStrategy::kLowConfidenceDynamic, RemaskingStrategy::kEntropyBounded})
    EXPECT_EQ(parse_strategy(strategy_name(s)), s);
  EXPECT_FALSE(parse_strategy("random").has_value());
}

}  // namespace
}  // namespace dice::engine
