#include "dice/engine/block_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "dice/core/error.h"

namespace dice::engine {
namespace {

constexpr std::int32_t kMask = 151669;

/// A deterministic test double: proposals are a hash of everything the block row may see (the
/// cached tokens, the block) and the position, like a real model's; it checks the Backend
/// contract and records every forward.
class FakeBackend final : public Backend {
 public:
  struct Call {
    SequenceId sequence;
    std::int64_t start;  // cached tokens before the forward
    std::vector<std::int32_t> commit, block;
    std::int32_t step;
  };
  std::vector<Call> calls;
  std::map<SequenceId, std::vector<std::int32_t>> closed;  // final cache contents
  std::int64_t stop_at = -1;  // absolute position where the stop id is proposed
  std::int32_t stop_token = kImEndId;
  std::int64_t forwards = 0;

  std::int64_t vocab_rows() const override { return 151936; }
  void open(SequenceId sequence, std::int32_t block_length) override {
    ASSERT_FALSE(seqs_.contains(sequence));
    seqs_[sequence] = {block_length, {}};
  }
  void close(SequenceId sequence) override {
    closed[sequence] = seqs_.at(sequence).cache;
    seqs_.erase(sequence);
  }
  std::int64_t cached_tokens(SequenceId sequence) const override {
    return std::ssize(seqs_.at(sequence).cache);
  }
  void forward(std::span<const ForwardItem> items, const ForwardRequest&,
               ForwardOutput& out) override {
    ++forwards;
    out.row_offsets.assign(1, 0);
    out.proposals.clear();
    for (const auto& item : items) {
      auto& s = seqs_.at(item.sequence);
      EXPECT_EQ(std::ssize(item.commit) % s.block_length, 0);
      EXPECT_LE(std::ssize(item.block), s.block_length);
      calls.push_back({item.sequence,
                       std::ssize(s.cache),
                       {item.commit.begin(), item.commit.end()},
                       {item.block.begin(), item.block.end()},
                       item.step});
      s.cache.insert(s.cache.end(), item.commit.begin(), item.commit.end());
      std::uint64_t h = 1469598103934665603ull;
      const auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
      for (const auto t : s.cache) mix(static_cast<std::uint64_t>(t));
      for (const auto t : item.block) mix(static_cast<std::uint64_t>(t));
      for (std::size_t r = 0; r < item.block.size(); ++r) {
        const std::int64_t position = std::ssize(s.cache) + static_cast<std::int64_t>(r);
        std::uint64_t g = h;
        g = (g ^ static_cast<std::uint64_t>(position)) * 1099511628211ull;
        g ^= g >> 29;
        g *= 0xbf58476d1ce4e5b9ull;
        g ^= g >> 32;
        Proposal p;
        p.token = static_cast<std::int32_t>(100 + g % 50);
        p.confidence = static_cast<float>(g % 1000) / 1000.0f;
        p.entropy = static_cast<float>((g >> 20) % 1000) / 1000.0f;
        if (position == stop_at) {
          p.token = stop_token;
          p.confidence = 0.999f;
          p.entropy = 0.001f;
        }
        out.proposals.push_back(p);
      }
      out.row_offsets.push_back(out.proposals.size());
    }
  }

 private:
  struct Seq {
    std::int32_t block_length;
    std::vector<std::int32_t> cache;
  };
  std::map<SequenceId, Seq> seqs_;
};

std::vector<std::int32_t> prompt_of(int n) {
  std::vector<std::int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(1000 + i);
  return p;
}

GenerationOptions options_with(RemaskingStrategy strategy, bool fused = true) {
  GenerationOptions o;
  o.remasking.strategy = strategy;
  o.remasking.threshold = 0.7;
  o.remasking.entropy_bound = 0.8;
  o.max_new_tokens = 23;
  o.fused_store = fused;
  return o;
}

GenerationResult run_one(FakeBackend& backend, std::vector<std::int32_t> prompt,
                         const GenerationOptions& options) {
  const std::vector<GenerationRequest> requests{{std::move(prompt), options}};
  return generate(backend, requests).at(0);
}

constexpr std::array kStrategies{
    RemaskingStrategy::kSequential, RemaskingStrategy::kLowConfidenceStatic,
    RemaskingStrategy::kLowConfidenceDynamic, RemaskingStrategy::kEntropyBounded};

TEST(BlockDecoder, PromptSplitPrefillThenRemainderAndMasks) {
  FakeBackend backend;
  const auto r = run_one(backend, prompt_of(6), options_with(RemaskingStrategy::kSequential));
  ASSERT_FALSE(backend.calls.empty());
  const auto& first = backend.calls.front();
  EXPECT_EQ(first.commit, (std::vector<std::int32_t>{1000, 1001, 1002, 1003}));
  EXPECT_EQ(first.block, (std::vector<std::int32_t>{1004, 1005, kMask, kMask}));
  EXPECT_EQ(r.prompt_ids, prompt_of(6));
  EXPECT_EQ(r.counts.prefill_tokens, 4);
  // First block: 2 masks over 4 steps (schedule 1,1,0,0): sequential finishes it in 2 steps.
  EXPECT_EQ(backend.calls[1].block[2], r.output_ids[0]);
  EXPECT_EQ(backend.calls[1].block[3], kMask);
  EXPECT_EQ(r.trace[0].step, 0);
  EXPECT_EQ(r.trace[1].step, 1);
}

TEST(BlockDecoder, OnlyMaskPositionsChangeAndCacheHoldsPromptThenOutput) {
  for (const auto strategy : kStrategies) {
    for (const bool fused : {true, false}) {
      FakeBackend backend;
      const auto r = run_one(backend, prompt_of(7), options_with(strategy, fused));
      ASSERT_EQ(r.output_ids.size(), 23u);
      EXPECT_EQ(r.stop_reason, StopReason::kLength);
      // Consecutive denoising steps of one block: a non-mask token never changes.
      const FakeBackend::Call* previous = nullptr;
      for (const auto& call : backend.calls) {
        if (call.block.empty()) continue;
        const std::int64_t block_start = call.start + std::ssize(call.commit);
        if (previous != nullptr && previous->start + std::ssize(previous->commit) == block_start) {
          for (std::size_t i = 0; i < call.block.size(); ++i) {
            if (previous->block[i] != kMask) {
              EXPECT_EQ(call.block[i], previous->block[i]);
            }
          }
          EXPECT_EQ(call.step, previous->step + 1);
        } else {
          EXPECT_EQ(call.step, 0);
        }
        for (std::size_t i = 0; i < call.block.size(); ++i) {
          const std::int64_t position = block_start + static_cast<std::int64_t>(i);
          if (position < 7) {
            EXPECT_EQ(call.block[i], 1000 + position);  // prompt kept
          }
        }
        previous = &call;
      }
      // The cache holds the prompt's whole blocks, then whole finished blocks of the output.
      const auto& cache = backend.closed.at(0);
      EXPECT_EQ(std::ssize(cache), r.counts.committed_tokens);
      EXPECT_EQ(cache.size() % 4, 0u);
      std::vector<std::int32_t> expected = prompt_of(7);
      expected.insert(expected.end(), r.output_ids.begin(), r.output_ids.end());
      ASSERT_LE(cache.size(), expected.size());
      EXPECT_TRUE(std::equal(cache.begin(), cache.end(), expected.begin()));
      EXPECT_EQ(std::count(r.output_ids.begin(), r.output_ids.end(), kMask), 0);
    }
  }
}

TEST(BlockDecoder, TraceIsInRange) {
  for (const auto strategy : kStrategies) {
    FakeBackend backend;
    auto options = options_with(strategy);
    const auto r = run_one(backend, prompt_of(5), options);
    ASSERT_EQ(r.trace.size(), r.output_ids.size());
    for (std::size_t i = 0; i < r.trace.size(); ++i) {
      const auto& t = r.trace[i];
      EXPECT_EQ(t.block, static_cast<std::int64_t>(5 + i) / 4);
      EXPECT_GE(t.step, 0);
      EXPECT_LT(t.step, options.steps);
      EXPECT_GE(t.forward, 0);
      EXPECT_LT(t.forward, r.counts.forwards);
      // The token was proposed by that forward: it appears in that call's block from then on.
      const auto& call = backend.calls[static_cast<std::size_t>(t.forward)];
      EXPECT_EQ(call.step, t.step);
    }
    EXPECT_EQ(r.counts.forwards, std::ssize(backend.calls));
  }
}

TEST(BlockDecoder, SequentialUnmasksOnePositionPerStepLeftToRight) {
  FakeBackend backend;
  const auto r = run_one(backend, prompt_of(8), options_with(RemaskingStrategy::kSequential));
  for (std::size_t i = 0; i < r.trace.size(); ++i)
    EXPECT_EQ(r.trace[i].step, static_cast<std::int32_t>(i % 4));
  // Fused: every forward denoises; 23 tokens = 6 blocks, the last cut short after 3 steps.
  EXPECT_EQ(r.counts.forwards, 5 * 4 + 3);
  EXPECT_EQ(r.counts.store_passes, 0);
}

TEST(BlockDecoder, OneStepPerBlockUnmasksEverything) {
  FakeBackend backend;
  auto options = options_with(RemaskingStrategy::kEntropyBounded);
  options.steps = 1;
  options.remasking.entropy_bound = 1e-6;
  const auto r = run_one(backend, prompt_of(4), options);
  EXPECT_EQ(r.output_ids.size(), 23u);
  EXPECT_EQ(r.counts.forwards, 6);  // ceil(23 / 4) blocks, one step each
  for (const auto& t : r.trace) EXPECT_EQ(t.step, 0);
}

TEST(BlockDecoder, StopsAtTheFirstStopId) {
  FakeBackend backend;
  backend.stop_at = 5 + 9;  // output position 9
  const auto r = run_one(backend, prompt_of(5), options_with(RemaskingStrategy::kSequential));
  ASSERT_EQ(r.output_ids.size(), 10u);
  EXPECT_EQ(r.output_ids.back(), kImEndId);
  EXPECT_EQ(r.stop_reason, StopReason::kStopId);
  EXPECT_EQ(r.trace.size(), 10u);
  // Sequential stops the moment the stop id is unmasked: positions 12..15 form block 3, the stop
  // is its 3rd position, unmasked at step 2; no store pass of that block.
  EXPECT_EQ(r.trace.back().step, 2);
  EXPECT_EQ(r.counts.forwards, r.trace.back().forward + 1);
}

TEST(BlockDecoder, StopIdsAreConfigurable) {
  FakeBackend backend;
  backend.stop_at = 5 + 2;
  backend.stop_token = 77;
  auto options = options_with(RemaskingStrategy::kLowConfidenceStatic);
  const auto not_stopped = run_one(backend, prompt_of(5), options);
  EXPECT_EQ(not_stopped.stop_reason, StopReason::kLength);
  options.stop_ids = {77};
  FakeBackend again;
  again.stop_at = 5 + 2;
  again.stop_token = 77;
  const auto stopped = run_one(again, prompt_of(5), options);
  EXPECT_EQ(stopped.stop_reason, StopReason::kStopId);
  EXPECT_EQ(stopped.output_ids.size(), 3u);
}

TEST(BlockDecoder, TokenLimit) {
  for (const std::int64_t limit : {0, 1, 4, 7}) {
    FakeBackend backend;
    auto options = options_with(RemaskingStrategy::kLowConfidenceDynamic);
    options.max_new_tokens = limit;
    const auto r = run_one(backend, prompt_of(3), options);
    EXPECT_EQ(std::ssize(r.output_ids), limit);
    EXPECT_EQ(r.stop_reason, StopReason::kLength);
    if (limit == 0) {
      EXPECT_TRUE(backend.calls.empty());
    }
  }
}

TEST(BlockDecoder, FusedAndUnfusedStorePassGiveTheSameTokens) {
  for (const auto strategy : kStrategies) {
    FakeBackend fused_backend, unfused_backend;
    const auto fused = run_one(fused_backend, prompt_of(9), options_with(strategy, true));
    const auto unfused = run_one(unfused_backend, prompt_of(9), options_with(strategy, false));
    EXPECT_EQ(fused.output_ids, unfused.output_ids);
    ASSERT_EQ(fused.trace.size(), unfused.trace.size());
    for (std::size_t i = 0; i < fused.trace.size(); ++i)
      EXPECT_EQ(fused.trace[i].step, unfused.trace[i].step);
    EXPECT_EQ(fused.counts.store_passes, 0);
    // Unfused: one commit-only forward for the prefill and one per finished block.
    EXPECT_EQ(unfused.counts.store_passes, 1 + fused.counts.blocks - 1);
    EXPECT_EQ(unfused.counts.forwards, fused.counts.forwards + unfused.counts.store_passes);
    EXPECT_EQ(fused.counts.denoising_steps, unfused.counts.denoising_steps);
  }
}

TEST(BlockDecoder, ResultsDoNotDependOnTheBatch) {
  auto a = options_with(RemaskingStrategy::kLowConfidenceDynamic);
  auto b = options_with(RemaskingStrategy::kSequential, false);
  b.max_new_tokens = 9;
  const std::vector<GenerationRequest> both{{prompt_of(6), a}, {prompt_of(11), b}};
  FakeBackend batch_backend;
  std::map<std::size_t, std::vector<std::int32_t>> streamed;
  const auto together = generate(batch_backend, both, [&](std::size_t i, auto tokens) {
    streamed[i].insert(streamed[i].end(), tokens.begin(), tokens.end());
  });
  FakeBackend one, two;
  const auto alone_a = run_one(one, prompt_of(6), a);
  const auto alone_b = run_one(two, prompt_of(11), b);
  EXPECT_EQ(together[0].output_ids, alone_a.output_ids);
  EXPECT_EQ(together[1].output_ids, alone_b.output_ids);
  EXPECT_EQ(together[0].counts.forwards, alone_a.counts.forwards);
  EXPECT_EQ(streamed[0], together[0].output_ids);
  EXPECT_EQ(streamed[1], together[1].output_ids);
  // The batch ran max(forwards) forwards; sequences left it when done.
  EXPECT_EQ(batch_backend.forwards, std::max(alone_a.counts.forwards, alone_b.counts.forwards));
}

TEST(BlockDecoder, BadInputIsRejected) {
  FakeBackend backend;
  auto prompt = prompt_of(3);
  prompt[1] = kMask;
  EXPECT_THROW(run_one(backend, prompt, options_with(RemaskingStrategy::kSequential)), InputError);
  auto options = options_with(RemaskingStrategy::kSequential);
  options.steps = 0;
  EXPECT_THROW(run_one(backend, prompt_of(3), options), InputError);
  options = options_with(RemaskingStrategy::kSequential);
  options.sampling.top_p = 0;
  EXPECT_THROW(run_one(backend, prompt_of(3), options), InputError);
}

}  // namespace
}  // namespace dice::engine
