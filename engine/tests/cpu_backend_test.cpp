#include "dice/engine/cpu_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "dice/core/error.h"
#include "dice/engine/block_decoder.h"
#include "dice/engine/scoring.h"

namespace dice::engine {
namespace {

/// A tiny random model held in memory (no checkpoint needed).
CpuWeights tiny_weights(bool tied = false, std::uint32_t seed = 1) {
  CpuWeights w;
  auto& c = w.config;
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.intermediate_size = 48;
  c.rope_theta = 10000;
  c.tie_word_embeddings = tied;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  const auto random = [&](std::int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = normal(rng);
    return v;
  };
  const auto norm = [&](std::int64_t n) {
    auto v = random(n);
    for (auto& x : v) x = 1.0f + 0.2f * x;
    return v;
  };
  const std::int64_t h = c.hidden_size, q = c.num_heads * c.head_dim,
                     kv = c.num_kv_heads * c.head_dim, in = c.intermediate_size;
  w.embed_tokens = random(c.vocab_size * h);
  for (int i = 0; i < c.num_layers; ++i) {
    CpuLayerWeights l;
    l.input_layernorm = norm(h);
    l.q_proj = random(q * h);
    l.k_proj = random(kv * h);
    l.v_proj = random(kv * h);
    l.o_proj = random(h * q);
    l.q_norm = norm(c.head_dim);
    l.k_norm = norm(c.head_dim);
    l.post_attention_layernorm = norm(h);
    l.gate_proj = random(in * h);
    l.up_proj = random(in * h);
    l.down_proj = random(h * in);
    w.layers.push_back(std::move(l));
  }
  w.norm = norm(h);
  if (!tied) w.lm_head = random(c.vocab_size * h);
  return w;
}

std::vector<std::int32_t> concat(std::vector<std::int32_t> a, const std::vector<std::int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// Logits of `block` after committing `chunks` one forward each.
std::vector<float> block_logits(CpuBackend& backend,
                                const std::vector<std::vector<std::int32_t>>& chunks,
                                const std::vector<std::int32_t>& block, std::int32_t b = 4) {
  backend.open(42, b);
  ForwardOutput out;
  for (const auto& chunk : chunks) {
    ForwardItem item{.sequence = 42, .commit = chunk};
    backend.forward(std::span(&item, 1), {.proposals = false, .logits = false}, out);
  }
  ForwardItem item{.sequence = 42, .block = block};
  backend.forward(std::span(&item, 1), {.proposals = true, .logits = true}, out);
  backend.close(42);
  return out.logits;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, static_cast<double>(std::abs(a[i] - b[i])));
  return m;
}

const std::vector<std::int32_t> kBlock0{5, 17, 3, 60}, kBlock1{8, 8, 41, 2}, kBlock1b{90, 1, 7, 33},
    kBlock2{11, 12, 13, 14}, kBlock3{20, 21, 22, 23};

TEST(CpuBackend, EarlierBlocksDoNotSeeLaterBlocksInOneCommit) {
  CpuBackend backend(tiny_weights(), {.threads = 2});
  // Committing two blocks in one forward must equal committing them one forward each: block 0's
  // K/V may not depend on block 1 (block-causal mask among commit rows).
  const auto joint = block_logits(backend, {concat(kBlock0, kBlock1)}, kBlock2);
  const auto split = block_logits(backend, {kBlock0, kBlock1}, kBlock2);
  EXPECT_LT(max_abs_diff(joint, split), 1e-4);
  // Positive control: the later block does reach the block being denoised.
  const auto other = block_logits(backend, {concat(kBlock0, kBlock1b)}, kBlock2);
  EXPECT_GT(max_abs_diff(joint, other), 1e-2);
}

TEST(CpuBackend, LogitsDoNotChangeWhenALaterBlockChanges) {
  CpuBackend backend(tiny_weights(), {.threads = 2});
  const auto a = concat(concat(kBlock0, kBlock1), concat(kBlock2, kBlock3));
  const auto b = concat(concat(kBlock0, kBlock1), concat(kBlock2, kBlock1b));
  const auto la = score_blocks(backend, a, 5, 4, true);
  const auto lb = score_blocks(backend, b, 5, 4, true);
  ASSERT_EQ(la.first_position, 4);
  ASSERT_EQ(la.rows, 12);
  const auto v = static_cast<std::size_t>(la.vocab_rows);
  const std::vector<float> a_early(la.logits.begin(), la.logits.begin() + 8 * v);
  const std::vector<float> b_early(lb.logits.begin(), lb.logits.begin() + 8 * v);
  EXPECT_EQ(max_abs_diff(a_early, b_early), 0.0);  // blocks 1 and 2: bit for bit
  const std::vector<float> a_late(la.logits.begin() + 8 * v, la.logits.end());
  const std::vector<float> b_late(lb.logits.begin() + 8 * v, lb.logits.end());
  EXPECT_GT(max_abs_diff(a_late, b_late), 1e-2);
}

TEST(CpuBackend, BlockRowsSeeTheWholeBlock) {
  CpuBackend backend(tiny_weights(), {.threads = 1});
  auto changed = kBlock2;
  changed[3] = 70;
  const auto a = block_logits(backend, {kBlock0}, kBlock2);
  const auto b = block_logits(backend, {kBlock0}, changed);
  const std::vector<float> a_first(a.begin(), a.begin() + 97), b_first(b.begin(), b.begin() + 97);
  EXPECT_GT(max_abs_diff(a_first, b_first), 1e-3);  // row 0 sees row 3
}

TEST(CpuBackend, PrefillChunksFusionAndThreadsDoNotChangeLogits) {
  CpuBackend one_thread(tiny_weights(), {.threads = 1});
  CpuBackend two_threads(tiny_weights(), {.threads = 2});
  const auto whole = block_logits(one_thread, {concat(concat(kBlock0, kBlock1), kBlock3)}, kBlock2);
  const auto chunked = block_logits(two_threads, {kBlock0, concat(kBlock1, kBlock3)}, kBlock2);
  EXPECT_LT(max_abs_diff(whole, chunked), 1e-4);
  const auto seq = concat(concat(kBlock0, kBlock1), concat(kBlock2, {4, 5}));
  for (const std::int64_t prompt : {0, 3, 4, 9}) {
    const auto fused = score_blocks(one_thread, seq, prompt, 4, true);
    const auto unfused = score_blocks(one_thread, seq, prompt, 4, false);
    EXPECT_EQ(fused.rows, std::ssize(seq) - prompt / 4 * 4);
    EXPECT_LT(max_abs_diff(fused.logits, unfused.logits), 1e-4);
    EXPECT_GT(unfused.forwards, fused.forwards);
  }
}

TEST(CpuBackend, BatchedForwardEqualsOneSequenceAtATime) {
  CpuBackend backend(tiny_weights(true), {.threads = 2});
  const auto alone_a = block_logits(backend, {kBlock0}, kBlock2);
  const auto alone_b = block_logits(backend, {concat(kBlock1, kBlock3)}, kBlock1b);
  backend.open(1, 4);
  backend.open(2, 4);
  ForwardOutput out;
  const auto ab = concat(kBlock1, kBlock3);
  const std::vector<ForwardItem> items{{.sequence = 1, .commit = kBlock0, .block = kBlock2},
                                       {.sequence = 2, .commit = ab, .block = kBlock1b}};
  backend.forward(items, {.proposals = true, .logits = true}, out);
  ASSERT_EQ(out.row_offsets, (std::vector<std::size_t>{0, 4, 8}));
  EXPECT_EQ(backend.cached_tokens(1), 4);
  EXPECT_EQ(backend.cached_tokens(2), 8);
  const std::vector<float> a(out.logits.begin(), out.logits.begin() + 4 * 97);
  const std::vector<float> b(out.logits.begin() + 4 * 97, out.logits.end());
  EXPECT_LT(max_abs_diff(a, alone_a), 1e-4);
  EXPECT_LT(max_abs_diff(b, alone_b), 1e-4);
  // Proposals are the shared sampling code applied to these logits at the row's position.
  for (std::size_t r = 0; r < 8; ++r) {
    const std::span<const float> row(out.logits.data() + r * 97, 97);
    const auto p =
        propose(row, items[r / 4].sampling, (r < 4 ? 4 : 8) + static_cast<std::int64_t>(r % 4), 0);
    EXPECT_EQ(out.proposals[r].token, p.token);
    EXPECT_FLOAT_EQ(out.proposals[r].confidence, p.confidence);
  }
}

TEST(CpuBackend, MaskedRowsOnlyProposesWhereTheMaskIs) {
  // Blocks with decided positions and mask tokens (mask id 96 here): masked_rows_only gives the
  // full forward's proposals at mask tokens, {token, 1, 0} at the others, and commits the same.
  SamplingParams sampling;
  sampling.mask_id = 96;
  sampling.vocab_limit = 96;
  const std::vector<std::int32_t> block_a{96, 7, 96, 96}, block_b{3, 96, 11, 12};
  const auto run = [&](const ForwardRequest& request) {
    CpuBackend backend(tiny_weights(), {.threads = 2});
    backend.open(1, 4);
    backend.open(2, 4);
    const std::vector<ForwardItem> items{
        {.sequence = 1, .commit = kBlock0, .block = block_a, .step = 1, .sampling = sampling},
        {.sequence = 2, .commit = kBlock1, .block = block_b, .step = 2, .sampling = sampling}};
    ForwardOutput out;
    backend.forward(items, request, out);
    EXPECT_EQ(backend.cached_tokens(1), 4);
    EXPECT_EQ(backend.cached_tokens(2), 4);
    return out;
  };
  const ForwardOutput full = run({});
  const ForwardOutput masked = run({.masked_rows_only = true});
  ASSERT_EQ(masked.row_offsets, full.row_offsets);
  ASSERT_EQ(masked.proposals.size(), 8u);
  const auto tokens = concat(block_a, block_b);
  int proposed = 0;
  for (std::size_t r = 0; r < 8; ++r) {
    const Proposal& got = masked.proposals[r];
    if (tokens[r] == 96) {
      ++proposed;
      EXPECT_EQ(got.token, full.proposals[r].token) << "row " << r;
      EXPECT_NEAR(got.confidence, full.proposals[r].confidence, 1e-5) << "row " << r;
      EXPECT_NEAR(got.entropy, full.proposals[r].entropy, 1e-4) << "row " << r;
    } else {
      EXPECT_EQ(got.token, tokens[r]) << "row " << r;
      EXPECT_EQ(got.confidence, 1.0f) << "row " << r;
      EXPECT_EQ(got.entropy, 0.0f) << "row " << r;
    }
  }
  EXPECT_EQ(proposed, 4);
  // Logits asked for: every row is computed, the flag is ignored.
  const ForwardOutput with_logits = run({.logits = true, .masked_rows_only = true});
  EXPECT_EQ(with_logits.logits.size(), 8u * 97u);
  for (std::size_t r = 0; r < 8; ++r)
    EXPECT_EQ(with_logits.proposals[r].token, full.proposals[r].token) << "row " << r;
  // The shared fill names a mismatch of proposals and block rows.
  const std::vector<ForwardItem> two{{.sequence = 1, .block = block_a},
                                     {.sequence = 2, .block = block_b}};
  std::vector<Proposal> seven(7);
  EXPECT_THROW(propose_decided_rows(two, seven), Error);
}

TEST(CpuBackend, BadForwardsThrowAndCommitNothing) {
  CpuBackend backend(tiny_weights(), {.threads = 1});
  backend.open(7, 4);
  ForwardOutput out;
  const auto three = std::vector<std::int32_t>{1, 2, 3};
  const auto five = std::vector<std::int32_t>{1, 2, 3, 4, 5};
  const auto bad_id = std::vector<std::int32_t>{1, 2, 97, 3};
  ForwardItem partial{.sequence = 7, .commit = three};
  EXPECT_THROW(backend.forward(std::span(&partial, 1), {}, out), Error);
  ForwardItem long_block{.sequence = 7, .block = five};
  EXPECT_THROW(backend.forward(std::span(&long_block, 1), {}, out), Error);
  ForwardItem unknown{.sequence = 8, .block = three};
  EXPECT_THROW(backend.forward(std::span(&unknown, 1), {}, out), Error);
  ForwardItem out_of_vocab{.sequence = 7, .commit = kBlock0, .block = bad_id};
  try {
    backend.forward(std::span(&out_of_vocab, 1), {}, out);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("position 6"), std::string::npos) << e.what();
  }
  const std::vector<ForwardItem> twice{{.sequence = 7, .commit = kBlock0},
                                       {.sequence = 7, .commit = kBlock1}};
  EXPECT_THROW(backend.forward(twice, {}, out), Error);
  EXPECT_EQ(backend.cached_tokens(7), 0);
  EXPECT_THROW(backend.open(7, 4), Error);
  backend.close(7);
  EXPECT_THROW(backend.cached_tokens(7), Error);
}

TEST(CpuBackend, GenerateRejectsAMaskOrStopIdOutsideTheVocabulary) {
  CpuBackend backend(tiny_weights());
  GenerationOptions valid;  // this model's ids: mask 96 (the last row), no stop id
  valid.sampling.mask_id = 96;
  valid.stop_ids = {};
  valid.max_new_tokens = 5;
  // What generate() says about a second request with options `o` (after a valid first one).
  const auto message = [&](const GenerationOptions& o) -> std::string {
    try {
      generate(backend, std::vector<GenerationRequest>{{{1, 2, 3}, valid}, {{4, 5}, o}});
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  GenerationOptions o = valid;
  o.sampling.mask_id = GenerationOptions{}.sampling.mask_id;  // SDAR's 151669
  EXPECT_NE(
      message(o).find("request 1: option mask_id 151669 is outside the model's vocabulary [0, 97)"),
      std::string::npos)
      << message(o);
  o = valid;
  o.stop_ids = {3, 97};
  EXPECT_NE(message(o).find("request 1: option stop_ids holds 97"), std::string::npos)
      << message(o);
  o.stop_ids = GenerationOptions{}.stop_ids;  // SDAR's <|im_end|>, <|endoftext|>
  EXPECT_NE(message(o).find("option stop_ids holds 151645"), std::string::npos) << message(o);
  o.stop_ids = {3};
  EXPECT_EQ(message(o), "no error");
  const auto results =
      generate(backend, std::vector<GenerationRequest>{{{1, 2, 3}, valid}, {{4, 5}, o}});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].output_ids.size(), 5u);
  EXPECT_LE(results[1].output_ids.size(), 5u);
}

TEST(CpuWeights, ValidateNamesTheTensor) {
  auto w = tiny_weights();
  w.layers[1].k_norm.pop_back();
  try {
    CpuBackend backend(std::move(w));
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.self_attn.k_norm.weight"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dice::engine
