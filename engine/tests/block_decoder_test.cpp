#include "dice/engine/block_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dice/core/error.h"
#include "dice/engine/batch.h"

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
  std::int64_t fail_at_forward = -1;  // >= 0: that forward (0-based) throws dice::Error
  std::int64_t capacity = -1;         // cache positions for all sequences together; -1: unbounded
  // > 0: the cache is instead a pool of `pool_pages` pages of this many positions, taken page by
  // page as forwards need them (CacheAdmission::kGrowAndPreempt) or by reserve().
  std::int64_t page_tokens = 0;
  std::int64_t pool_pages = 0;
  std::size_t most_open = 0;  // the most sequences open at once
  struct Event {
    bool open;  // false: close
    SequenceId sequence;
    std::int64_t forward;  // forwards run before it
  };
  std::vector<Event> events;
  /// The closes of sequences that are opened again later (preemptions, as the backend sees
  /// them), in order: the forwards run before each.
  std::vector<std::int64_t> preemption_forwards() const {
    std::vector<std::int64_t> at;
    for (std::size_t k = 0; k < events.size(); ++k) {
      if (events[k].open) continue;
      for (std::size_t l = k + 1; l < events.size(); ++l)
        if (events[l].open && events[l].sequence == events[k].sequence) {
          at.push_back(events[k].forward);
          break;
        }
    }
    return at;
  }

  std::int64_t vocab_rows() const override { return 151936; }
  void open(SequenceId sequence, std::int32_t block_length) override {
    ASSERT_FALSE(seqs_.contains(sequence));
    seqs_[sequence] = {block_length, {}};
    events.push_back({true, sequence, forwards});
    most_open = std::max(most_open, seqs_.size());
  }
  void close(SequenceId sequence) override {
    closed[sequence] = seqs_.at(sequence).cache;
    events.push_back({false, sequence, forwards});
    reserved_ -= seqs_.at(sequence).reserved;
    used_pages_ -= seqs_.at(sequence).pages;
    seqs_.erase(sequence);
  }
  bool can_reserve(std::int64_t tokens) const override {
    if (page_tokens > 0) return pages_of(tokens) <= pool_pages - used_pages_;
    return capacity < 0 || reserved_ + tokens <= capacity;
  }
  std::optional<std::int64_t> cache_limit_tokens() const override {
    if (page_tokens > 0) return pool_pages * page_tokens;
    if (capacity < 0) return std::nullopt;
    return capacity;
  }
  void reserve(SequenceId sequence, std::int64_t tokens) override {
    ASSERT_TRUE(can_reserve(tokens));
    if (page_tokens > 0) return take_pages(seqs_.at(sequence), tokens);
    seqs_.at(sequence).reserved += tokens;
    reserved_ += tokens;
  }
  std::optional<std::int64_t> free_cache_pages() const override {
    if (page_tokens <= 0) return std::nullopt;
    return pool_pages - used_pages_;
  }
  std::int64_t cache_pages_to_hold(SequenceId sequence, std::int64_t tokens) const override {
    if (page_tokens <= 0) return 0;
    const auto it = seqs_.find(sequence);
    return std::max<std::int64_t>(0, pages_of(tokens) - (it == seqs_.end() ? 0 : it->second.pages));
  }
  std::int64_t cached_tokens(SequenceId sequence) const override {
    return std::ssize(seqs_.at(sequence).cache);
  }
  void forward(std::span<const ForwardItem> items, const ForwardRequest&,
               ForwardOutput& out) override {
    if (forwards == fail_at_forward) throw Error("injected backend failure");
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
      if (page_tokens > 0)  // the scheduler must have made room: the pool never runs out
        take_pages(s, std::ssize(s.cache) + std::ssize(item.commit) + std::ssize(item.block));
      s.cache.insert(s.cache.end(), item.commit.begin(), item.commit.end());
      if (capacity >= 0 && page_tokens <= 0) {
        EXPECT_LE(std::ssize(s.cache) + std::ssize(item.block), s.reserved);
      }
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
    std::int64_t reserved = 0;
    std::int64_t pages = 0;
  };
  std::int64_t pages_of(std::int64_t tokens) const {
    return (tokens + page_tokens - 1) / page_tokens;
  }
  void take_pages(Seq& s, std::int64_t tokens) {
    const std::int64_t more = std::max<std::int64_t>(0, pages_of(tokens) - s.pages);
    if (more > pool_pages - used_pages_) {
      ADD_FAILURE() << "the page pool ran out: " << more << " more pages wanted, "
                    << pool_pages - used_pages_ << " free";
      return;
    }
    s.pages += more;
    used_pages_ += more;
  }
  std::map<SequenceId, Seq> seqs_;
  std::int64_t reserved_ = 0;
  std::int64_t used_pages_ = 0;
};

/// A FakeBackend whose cache is a pool of `pages` pages of 8 positions.
FakeBackend paged_backend(std::int64_t pages) {
  FakeBackend backend;
  backend.page_tokens = 8;
  backend.pool_pages = pages;
  return backend;
}

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

TEST(BlockDecoder, RequestsWaitForCacheRoomAndJoinWithoutDrainingTheBatch) {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 6; ++i) {
    auto o = options_with(RemaskingStrategy::kLowConfidenceDynamic);
    o.max_new_tokens = 9 + 4 * i;
    requests.push_back({prompt_of(5 + i), o});
  }
  FakeBackend unbounded;
  const auto expected = generate(unbounded, requests);
  EXPECT_EQ(unbounded.most_open, 6u);
  // Room for the two largest needs at once: requests are admitted in order as others finish.
  FakeBackend bounded;
  bounded.capacity = cache_tokens_needed(requests[5]) + cache_tokens_needed(requests[4]);
  const auto results = generate(bounded, requests);
  EXPECT_LT(bounded.most_open, 6u);
  EXPECT_GE(bounded.most_open, 2u);
  // Fewer forwards than running the requests one after another: later ones joined a running batch.
  std::int64_t sum = 0;
  for (const auto& r : expected) sum += r.counts.forwards;
  EXPECT_LT(bounded.forwards, sum);
  for (std::size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(results[i].output_ids, expected[i].output_ids) << "request " << i;
  // max_active bounds the batch the same way.
  FakeBackend limited;
  const auto two = generate(limited, requests, {}, {.max_active = 2});
  EXPECT_EQ(limited.most_open, 2u);
  for (std::size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(two[i].output_ids, expected[i].output_ids);
  // A request that cannot fit even alone is an input error naming it.
  FakeBackend tiny;
  tiny.capacity = cache_tokens_needed(requests[0]) - 1;
  try {
    generate(tiny, requests);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("request 0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache_tokens_needed(requests[0]), 16);  // 5 + 9 = 14 positions, in blocks of 4
}

TEST(BlockDecoder, FullCacheIsMadeRoomForByPreemptingAndRecomputing) {
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused store" : "store pass");
    // Six sequences decoding in lockstep; each needs ceil((5 + 40) / 4) * 4 = 48 positions in the
    // end: 6 pages of 8. The pool holds 26 pages: all six fit at the start, four at the end.
    std::vector<GenerationRequest> requests;
    for (int i = 0; i < 6; ++i) {
      auto o = options_with(RemaskingStrategy::kLowConfidenceDynamic, fused);
      o.max_new_tokens = 40;
      requests.push_back({prompt_of(5), o});
      requests.back().prompt_ids[0] += i;  // different prompts, different outputs
    }
    FakeBackend unbounded;
    const auto expected = generate(unbounded, requests);

    FakeBackend grow = paged_backend(26);
    ScheduleStats stats;
    const auto grown = generate(grow, requests, {}, {}, &stats);
    EXPECT_EQ(stats.peak_active, 6u);
    EXPECT_GT(stats.preemptions, 0);
    EXPECT_GT(stats.recomputed_tokens, 0);
    std::int64_t preemptions = 0, recomputed = 0;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      // Recomputing a dropped cache changes no token, no forward and no trace entry (it rides
      // with a denoising step, also without a fused store), and each token counts once as
      // committed.
      EXPECT_EQ(grown[i].output_ids, expected[i].output_ids) << "request " << i;
      EXPECT_EQ(grown[i].counts.committed_tokens, expected[i].counts.committed_tokens);
      EXPECT_EQ(grown[i].counts.forwards, expected[i].counts.forwards) << "request " << i;
      EXPECT_EQ(grown[i].counts.store_passes, expected[i].counts.store_passes);
      ASSERT_EQ(grown[i].trace.size(), expected[i].trace.size());
      for (std::size_t t = 0; t < grown[i].trace.size(); ++t)
        EXPECT_EQ(grown[i].trace[t].forward, expected[i].trace[t].forward) << i << ", " << t;
      EXPECT_EQ(grow.closed.at(static_cast<SequenceId>(i)),
                unbounded.closed.at(static_cast<SequenceId>(i)));
      preemptions += grown[i].counts.preemptions;
      recomputed += grown[i].counts.recomputed_tokens;
    }
    EXPECT_EQ(preemptions, stats.preemptions);
    EXPECT_EQ(std::ssize(grow.preemption_forwards()), stats.preemptions);  // as the backend saw
    EXPECT_EQ(recomputed, stats.recomputed_tokens);
    // The first-admitted sequences were never preempted (the latest go first).
    EXPECT_EQ(grown[0].counts.preemptions, 0);
    EXPECT_GT(grown[5].counts.preemptions, 0);

    // Reserving whole caches runs four at a time and never preempts, in more forwards.
    FakeBackend whole = paged_backend(26);
    ScheduleStats whole_stats;
    const auto reserved =
        generate(whole, requests, {}, {.admission = CacheAdmission::kReserveWhole}, &whole_stats);
    EXPECT_EQ(whole_stats.peak_active, 4u);
    EXPECT_EQ(whole_stats.preemptions, 0);
    for (std::size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(reserved[i].output_ids, expected[i].output_ids) << "request " << i;
    EXPECT_LT(stats.forwards, whole_stats.forwards);
    EXPECT_EQ(stats.forwards, grow.forwards);
    // After a preemption nothing is opened until a finished sequence has been closed (a close
    // of an id that is not opened again).
    std::map<SequenceId, int> opens;
    for (const auto& e : grow.events) opens[e.sequence] += e.open;
    std::map<SequenceId, int> seen;
    bool waiting_for_finish = false;
    for (const auto& e : grow.events) {
      if (e.open) {
        EXPECT_FALSE(waiting_for_finish)
            << "sequence " << e.sequence << " opened after a preemption";
        ++seen[e.sequence];
      } else {
        // A close of a sequence opened again later is a preemption; otherwise a finish.
        waiting_for_finish = seen[e.sequence] < opens[e.sequence];
      }
    }
    // max_active bounds the growing batch as well.
    FakeBackend capped = paged_backend(26);
    ScheduleStats capped_stats;
    const auto three = generate(capped, requests, {}, {.max_active = 3}, &capped_stats);
    EXPECT_EQ(capped_stats.peak_active, 3u);
    for (std::size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(three[i].output_ids, expected[i].output_ids) << "request " << i;
  }
}

TEST(BlockDecoder, BlocksLongerThanAPageGrowWithoutOverflowingThePool) {
  // Block 16 over pages of 8: a forward takes up to 3 pages per sequence.
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 5; ++i) {
    auto o = options_with(RemaskingStrategy::kLowConfidenceDynamic, i % 2 == 0);
    o.block_length = 16;
    o.steps = 4;
    o.max_new_tokens = 60;
    requests.push_back({prompt_of(7 + i), o});
  }
  FakeBackend unbounded;
  const auto expected = generate(unbounded, requests);
  // The FakeBackend fails the test if a forward overflows the pool.
  FakeBackend pool = paged_backend(24);
  ScheduleStats stats;
  const auto results = generate(pool, requests, {}, {}, &stats);
  EXPECT_GT(stats.preemptions, 0);
  for (std::size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(results[i].output_ids, expected[i].output_ids) << "request " << i;
}

TEST(BlockDecoder, AFailingForwardAfterPreemptionsClosesEverySequence) {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 6; ++i) {
    auto o = options_with(RemaskingStrategy::kLowConfidenceDynamic);
    o.max_new_tokens = 40;
    requests.push_back({prompt_of(5 + i), o});
  }
  FakeBackend reference = paged_backend(26);
  generate(reference, requests);
  // Preemptions happen, and forwards run after the first: failures after it are tried below.
  const auto preempted_at = reference.preemption_forwards();
  ASSERT_FALSE(preempted_at.empty());
  ASSERT_LT(preempted_at.front(), reference.forwards);
  // A backend failure at any forward, before and after preemptions: generate() rethrows, every
  // sequence it opened is closed, and every page is back in the pool.
  for (std::int64_t f = 0; f < reference.forwards; ++f) {
    FakeBackend failing = paged_backend(26);
    failing.fail_at_forward = f;
    EXPECT_THROW(generate(failing, requests), Error);
    std::map<SequenceId, int> open;
    for (const auto& e : failing.events) open[e.sequence] += e.open ? 1 : -1;
    for (const auto& [id, n] : open) EXPECT_EQ(n, 0) << "sequence " << id << ", failure at " << f;
    EXPECT_EQ(failing.free_cache_pages(), 26) << "failure at forward " << f;
  }
}

TEST(BlockDecoder, GrowingCachesStillRejectARequestThatCannotFitAlone) {
  auto o = options_with(RemaskingStrategy::kSequential);
  o.max_new_tokens = 40;  // 48 positions: 6 pages of 8
  const std::vector<GenerationRequest> requests{{prompt_of(5), o}, {prompt_of(5), o}};
  FakeBackend small = paged_backend(5);
  try {
    generate(small, requests);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("request 0"), std::string::npos) << e.what();
  }
  // Room for one whole cache: both start, the second is preempted once the pool fills, and it
  // rejoins (recomputed) after the first has finished.
  small.pool_pages = 6;
  ScheduleStats stats;
  const auto results = generate(small, requests, {}, {}, &stats);
  EXPECT_EQ(results[0].output_ids, results[1].output_ids);
  EXPECT_EQ(stats.peak_active, 2u);
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_EQ(results[0].counts.preemptions, 0);
}

TEST(BlockDecoder, PreemptedDecoderCommitsEverythingAgain) {
  SequenceDecoder d(prompt_of(6), options_with(RemaskingStrategy::kSequential));
  const std::vector<Proposal> proposals(4, Proposal{7, 0.5f, 0.1f});
  // The prefill of 4 prompt tokens, fused with the first block (2 prompt tokens + 2 masks).
  EXPECT_EQ(d.next_item(1).commit.size(), 4u);
  EXPECT_EQ(d.next_cache_end(), 8);
  d.advance(proposals);
  while (d.next_item(1).commit.empty()) d.advance(proposals);  // until the first block is done
  d.advance(proposals);  // commits it, fused with the second block's first step: 8 cached
  ASSERT_TRUE(d.next_item(1).commit.empty());
  EXPECT_EQ(d.next_cache_end(), 12);
  d.preempt();
  const auto again = d.next_item(1);
  EXPECT_EQ(again.commit.size(), 8u);  // prompt prefill and the first block, recomputed
  EXPECT_EQ(again.block.size(), 4u);
  d.advance(proposals);
  const auto r = d.result();
  EXPECT_EQ(r.counts.preemptions, 1);
  EXPECT_EQ(r.counts.recomputed_tokens, 8);
  EXPECT_EQ(r.counts.committed_tokens, 8);
}

TEST(BlockDecoder, BatchDrawsSamplesPerPromptWithConsecutiveSeeds) {
  std::vector<BatchPrompt> prompts(2);
  prompts[0] = {prompt_of(5), options_with(RemaskingStrategy::kSequential), 3};
  prompts[1] = {prompt_of(9), options_with(RemaskingStrategy::kLowConfidenceStatic), 2};
  prompts[0].options.sampling.seed = 40;
  prompts[1].options.max_new_tokens = 6;
  FakeBackend backend;
  BatchOptions options;
  options.schedule.first_id = 100;
  options.decode = [](std::span<const std::int32_t> ids) { return std::to_string(ids.size()); };
  const auto samples = generate_batch(backend, prompts, options);
  ASSERT_EQ(samples.size(), 5u);
  const std::vector<std::pair<std::size_t, std::int32_t>> order{
      {0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}};
  for (std::size_t k = 0; k < samples.size(); ++k) {
    EXPECT_EQ(samples[k].prompt, order[k].first);
    EXPECT_EQ(samples[k].sample, order[k].second);
    EXPECT_EQ(samples[k].seed, prompts[order[k].first].options.sampling.seed +
                                   static_cast<std::uint64_t>(order[k].second));
    EXPECT_EQ(samples[k].result.prompt_ids, prompts[order[k].first].prompt_ids);
    EXPECT_EQ(samples[k].text, std::to_string(samples[k].result.output_ids.size()));
  }
  EXPECT_EQ(samples[3].result.output_ids.size(), 6u);
  EXPECT_TRUE(backend.closed.contains(100));
  EXPECT_TRUE(backend.closed.contains(104));
  prompts[1].samples = -1;
  EXPECT_THROW(generate_batch(backend, prompts), InputError);
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
