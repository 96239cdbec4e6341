// CudaBackend against its twin, the CPU reference backend, on the same weights: logits, greedy and
// sampled decoding through generate(), CUDA graphs, the paged cache's admission and preemption,
// chunked prefill and bad input. Skipped without a GPU.

#include "dice/engine/cuda_backend.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device_memory.h"
#include "device_query.h"
#include "dice/core/error.h"
#include "dice/engine/block_decoder.h"
#include "dice/engine/cpu_backend.h"
#include "dice/engine/scoring.h"
#include "dice/model/dtype.h"
#include "ops.h"
#include "wgmma_gemm.h"

namespace dice::engine {
namespace {

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

model::ModelConfig small_config(std::int64_t vocab, std::int64_t hidden, std::int64_t layers,
                                std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim,
                                std::int64_t inter, bool tied = false) {
  model::ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.intermediate_size = inter;
  c.rope_theta = 10000;
  c.tie_word_embeddings = tied;
  c.max_position_embeddings = 2048;
  c.mask_token_id = static_cast<std::int32_t>(vocab - 1);  // SDAR's 151669 is outside the vocab
  return c;
}

/// Every backend of these tests gets this explicit memory limit: the default sizing takes the
/// card's free memory minus 5%, which leaves nothing for a second backend in the same test.
/// Enough for the largest shape in fp32 (weights ~0.55 GiB, work buffers ~0.55 GiB) and a cache.
constexpr std::int64_t kTestMemory = 2ll << 30;

CudaBackendOptions limited(CudaBackendOptions options = {}) {
  if (options.memory_limit_bytes == 0) options.memory_limit_bytes = kTestMemory;
  return options;
}

/// Random weights; with `bf16` every value is rounded to bf16 so that the CPU reference and the
/// bf16 GPU backend compute with the very same weights.
CpuWeights random_weights(const model::ModelConfig& c, float std, bool bf16,
                          std::uint32_t seed = 1) {
  CpuWeights w;
  w.config = c;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto round = [&](float x) { return bf16 ? model::bf16_to_f32(model::f32_to_bf16(x)) : x; };
  const auto random = [&](std::int64_t n, float s) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = round(s * normal(rng));
    return v;
  };
  const auto norm = [&](std::int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = round(1.0f + 0.1f * normal(rng));
    return v;
  };
  const std::int64_t h = c.hidden_size, q = c.num_heads * c.head_dim,
                     kv = c.num_kv_heads * c.head_dim, in = c.intermediate_size;
  w.embed_tokens = random(c.vocab_size * h, 1.0f);
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    CpuLayerWeights l;
    l.input_layernorm = norm(h);
    l.q_proj = random(q * h, std);
    l.k_proj = random(kv * h, std);
    l.v_proj = random(kv * h, std);
    l.o_proj = random(h * q, std);
    l.q_norm = norm(c.head_dim);
    l.k_norm = norm(c.head_dim);
    l.post_attention_layernorm = norm(h);
    l.gate_proj = random(in * h, std);
    l.up_proj = random(in * h, std);
    l.down_proj = random(h * in, std);
    w.layers.push_back(std::move(l));
  }
  w.norm = norm(h);
  if (!c.tie_word_embeddings) w.lm_head = random(c.vocab_size * h, std);
  return w;
}

std::vector<std::int32_t> random_ids(std::int64_t n, std::int64_t vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(vocab - 1));
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = pick(rng);
  return v;
}

double rel_l2(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

/// Largest per-row relative L2 between two scorings of the same sequence.
double max_row_rel_l2(const ScoredLogits& a, const ScoredLogits& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.vocab_rows, b.vocab_rows);
  double worst = 0;
  const auto v = static_cast<std::size_t>(a.vocab_rows);
  for (std::int64_t r = 0; r < std::min(a.rows, b.rows); ++r) {
    const std::span<const float> ra(a.logits.data() + r * v, v), rb(b.logits.data() + r * v, v);
    worst = std::max(worst, rel_l2(ra, rb));
  }
  return worst;
}

struct Shape {
  std::string name;
  model::ModelConfig config;
  float std;
};

/// The matrices' std gives every projection the gain of SDAR-1.7B's initialisation (0.02 at
/// width 2048: std x sqrt(width) ~ 0.9), as in the 2-layer SDAR-shaped checks of
/// bench/device_engine_check.sh. The earlier 0.3 at width 128 and 0.15 at width 256 (gains 3.4 and
/// 2.4) made the layers' outputs dwarf the embeddings, so that the residual stream consisted of
/// bf16-rounded activations only; with the per-row spread of a 128-wide hidden state that put
/// the worst row at rel. L2 1.3e-2 against the fp32 reference (1.15e-2 at width 256), which an
/// emulation of the bf16 roundings in fp32 reproduces without any GPU: the inherent bf16 error,
/// not a kernel's. With these gains the embeddings and the layers weigh alike in the residual
/// and the emulated worst row is ~5e-3; a wrong kernel still moves the logits by far more.
std::vector<Shape> shapes() {
  return {{"group 2, head_dim 32", small_config(1000, 128, 2, 4, 2, 32, 256), 0.08f},
          {"group 4, head_dim 64, tied", small_config(2048, 256, 3, 8, 2, 64, 512, true), 0.056f},
          {"SDAR-1.7B widths, 2 layers", small_config(8192, 2048, 2, 16, 8, 128, 6144), 0.02f}};
}

/// `options` without programmatic dependent launch in any pass: neither in few-row passes nor
/// after cuBLASLt's GEMMs (so no early weight reads either).
CudaBackendOptions without_pdl(CudaBackendOptions options) {
  options.programmatic_launch_few_rows = false;
  options.early_start_after_cublas = false;
  return options;
}

/// SDAR-4B's widths with one layer and an 8,192-token vocabulary: its o and down projections
/// (160 tiles on 132 SMs) are where the split walk and the o staging run.
Shape sdar_4b_widths_one_layer() {
  return {"SDAR-4B widths, 1 layer", small_config(8192, 2560, 1, 32, 8, 128, 9728), 0.018f};
}

/// Scores blocks of 4 after a 40-token prompt (60 random ids from `ids_seed`), with the store pass
/// fused and unfused, on a CudaBackend with `options` and on the CPU backend over the same
/// weights: every row's rel. L2 below 1e-2 (bf16). Returns the GPU backend's work counters.
CudaForwardStats expect_logits_like_the_cpu(const Shape& shape, const CudaBackendOptions& options,
                                            std::uint32_t ids_seed, std::int32_t block_length = 4) {
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  CpuBackend cpu(weights);
  CudaBackend gpu(weights, options);
  const auto ids = random_ids(60, shape.config.vocab_size, ids_seed);
  for (const bool fused : {true, false}) {
    const auto want = score_blocks(cpu, ids, 40, block_length, fused);
    const auto got = score_blocks(gpu, ids, 40, block_length, fused);
    EXPECT_LT(max_row_rel_l2(got, want), 1e-2) << shape.name << (fused ? ", fused" : ", unfused");
  }
  return gpu.stats();
}

/// Whether two runs' logits are the same bits (NaN included).
bool same_bits(const ScoredLogits& a, const ScoredLogits& b) {
  return a.rows == b.rows && a.logits.size() == b.logits.size() &&
         std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) == 0;
}

TEST_F(CudaBackendTest, LogitsMatchTheCpuReference) {
  for (const auto& shape : shapes())
    for (const auto dtype : {CudaDType::kBF16, CudaDType::kF32}) {
      const bool bf16 = dtype == CudaDType::kBF16;
      const CpuWeights weights = random_weights(shape.config, shape.std, bf16);
      CpuBackend cpu(weights);
      CudaBackend gpu(weights, limited({.dtype = dtype}));
      const auto ids = random_ids(41, shape.config.vocab_size, 3);
      for (const std::int64_t prompt : {13, 12})
        for (const bool fused : {true, false}) {
          const auto want = score_blocks(cpu, ids, prompt, 4, fused);
          const auto got = score_blocks(gpu, ids, prompt, 4, fused);
          EXPECT_LT(max_row_rel_l2(got, want), bf16 ? 1e-2 : 1e-4)
              << shape.name << (bf16 ? ", bf16" : ", fp32") << ", prompt " << prompt
              << (fused ? ", fused" : ", unfused");
          EXPECT_EQ(got.forwards, want.forwards);
        }
    }
}

TEST_F(CudaBackendTest, WgmmaGemmLogitsMatchTheCpuReference) {
  // With wgmma_gemm and no limit, passes of 17-64 rows (a 40-token prompt's prefill) run their
  // GEMMs, the gate/up projection with the SwiGLU epilogue, on the wgmma kernel where the shape
  // fits (the 1,000-token vocabulary's lm_head does not: cuBLASLt): bf16 logits against the CPU
  // reference.
  // Also with 128 k a stage (wgmma_stage_k; the test model's 128-wide inputs).
  if (!cuda::wgmma_gemm_supported()) GTEST_SKIP() << "the wgmma kernel is built for sm_90a only";
  for (const int stage_k : {64, 128})
    for (const auto& shape : shapes()) {
      CudaBackendOptions options = limited({.dtype = CudaDType::kBF16});
      options.wgmma_gemm = true;
      options.wgmma_min_block_k = 0;  // every shape (the test model's blocks are short)
      options.wgmma_stage_k = stage_k;
      const CudaForwardStats stats = expect_logits_like_the_cpu(shape, options, 5);
      // At least the first prefill's four layer GEMMs per layer ran on the wgmma kernel (launches
      // into a graph count once).
      EXPECT_GE(stats.wgmma_gemms, 4 * shape.config.num_layers) << shape.name;
    }
}

TEST_F(CudaBackendTest, FoldedNormsMatchTheCpuReference) {
  // fold_qkv_norm and fold_mlp_norm (the defaults) on the SDAR-1.7B-wide shape (head_dim 128) with
  // blocks of 16: the prefill (48 rows) and the fused store passes (32 rows) run the o, gate/up
  // and down projections on the wgmma kernel with the norms folded (counted; whatever
  // wgmma_min_block_k says), the unfused block passes of 16 rows the skinny kernel and the norm
  // kernel: bf16 logits against the CPU reference, also with each fold alone, and the same bits
  // from two backends. Without either nothing is folded. Shapes of other head widths never fold.
  if (!cuda::wgmma_gemm_supported()) GTEST_SKIP() << "the wgmma kernel is built for sm_90a only";
  const Shape shape = shapes()[2];
  const std::int64_t layers = shape.config.num_layers;
  for (const auto& [qkv, mlp] :
       {std::pair{true, true}, {true, false}, {false, true}, {false, false}}) {
    CudaBackendOptions options = limited({.dtype = CudaDType::kBF16});
    options.fold_qkv_norm = qkv;
    options.fold_mlp_norm = mlp;
    const CudaForwardStats stats = expect_logits_like_the_cpu(shape, options, 7, 16);
    // Per folding pass: layers - 1 norms before qkv, `layers` before gate/up.
    const std::int64_t per_pass = (qkv ? layers - 1 : 0) + (mlp ? layers : 0);
    if (per_pass > 0) {
      EXPECT_EQ(stats.folded_norms % per_pass, 0)
          << "qkv " << qkv << ", MLP " << mlp << ": " << stats.folded_norms;
    }
    EXPECT_EQ(stats.folded_norms > 0, per_pass > 0) << "qkv " << qkv << ", MLP " << mlp;
  }
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  CudaBackend a(weights, limited()), b(weights, limited());
  const auto ids = random_ids(60, shape.config.vocab_size, 8);
  EXPECT_TRUE(same_bits(score_blocks(a, ids, 40, 16, true), score_blocks(b, ids, 40, 16, true)));
  EXPECT_GT(a.stats().folded_norms, 0);
  const Shape narrow = shapes()[1];
  CudaBackend other(random_weights(narrow.config, narrow.std, true), limited());
  score_blocks(other, random_ids(60, narrow.config.vocab_size, 8), 40, 16, true);
  EXPECT_EQ(other.stats().folded_norms, 0) << narrow.name;
}

TEST_F(CudaBackendTest, QkRopeEpilogueMatchesTheCpuReference) {
  // fused_qk_norm_rope on the SDAR-1.7B-wide shape with blocks of 16: the prefill
  // (48 rows) and the fused store passes (32 rows) run the qkv projection on the wgmma kernel
  // with the q/k norm + RoPE in its epilogue (counted), at both column tiles (64 and 128), with
  // the input norm folded after layer 0 and not: bf16 logits against the CPU reference, and the
  // same bits from two backends. Off, or on a shape of another head width, nothing runs it.
  if (!cuda::wgmma_gemm_supported()) GTEST_SKIP() << "the wgmma kernel is built for sm_90a only";
  const Shape shape = shapes()[2];
  struct Case {
    bool qk, fold;
    int tile_n;
  };
  for (const Case& c : {Case{true, true, 64}, Case{true, false, 64}, Case{true, true, 128},
                        Case{true, false, 128}, Case{false, true, 64}}) {
    CudaBackendOptions options = limited({.dtype = CudaDType::kBF16});
    options.fused_qk_norm_rope = c.qk;
    options.fold_qkv_norm = c.fold;
    options.fused_qk_norm_rope_tile_n = c.tile_n;
    const CudaForwardStats stats = expect_logits_like_the_cpu(shape, options, 9, 16);
    const std::string what = "qk " + std::to_string(c.qk) + ", fold " + std::to_string(c.fold) +
                             ", tile " + std::to_string(c.tile_n);
    EXPECT_EQ(stats.fused_qk_norm_rope_gemms > 0, c.qk) << what;
    if (c.qk) {
      EXPECT_EQ(stats.fused_qk_norm_rope_gemms % shape.config.num_layers, 0) << what;
    }
  }
  CudaBackendOptions on = limited();
  on.fused_qk_norm_rope = true;
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  const auto ids = random_ids(60, shape.config.vocab_size, 10);
  for (const int tile_n : {64, 128}) {
    on.fused_qk_norm_rope_tile_n = tile_n;
    CudaBackend a(weights, on), b(weights, on);
    EXPECT_TRUE(same_bits(score_blocks(a, ids, 40, 16, true), score_blocks(b, ids, 40, 16, true)))
        << "tile " << tile_n;
    EXPECT_GT(a.stats().fused_qk_norm_rope_gemms, 0) << "tile " << tile_n;
  }
  on.fused_qk_norm_rope_tile_n = CudaBackendOptions{}.fused_qk_norm_rope_tile_n;
  const Shape narrow = shapes()[1];
  CudaBackend other(random_weights(narrow.config, narrow.std, true), on);
  score_blocks(other, random_ids(60, narrow.config.vocab_size, 8), 40, 16, true);
  EXPECT_EQ(other.stats().fused_qk_norm_rope_gemms, 0) << narrow.name;
}

TEST_F(CudaBackendTest, StreamGemmLogitsMatchTheCpuReference) {
  // With stream_gemm and no fill rule, the few-row passes (decoding blocks of 4 rows, the fused
  // store pass's 8) run their layer GEMMs, the gate/up projection with the SwiGLU epilogue, on the
  // streaming kernel: bf16 logits against the CPU reference, and the launches counted.
  for (const auto& shape : shapes()) {
    CudaBackendOptions options = limited({.dtype = CudaDType::kBF16});
    options.stream_gemm = true;
    options.stream_gemm_min_fill = 0.0;  // every shape (the test model's GEMMs are narrow)
    const CudaForwardStats stats = expect_logits_like_the_cpu(shape, options, 6);
    EXPECT_GE(stats.stream_gemms, 4 * shape.config.num_layers) << shape.name;
  }
}

TEST_F(CudaBackendTest, StreamGemmSplitMatchesTheCpuReference) {
  // SDAR-4B's widths (one layer): at 1 sequence its down projection (9,728 -> 2,560, 160 tiles)
  // streams on the split walk by default. bf16 logits against the CPU reference, fused and
  // unfused store; one streamed GEMM a layer more than with the split off (where down runs on
  // the skinny kernel); the same bits run to run.
  const Shape shape = sdar_4b_widths_one_layer();
  CudaBackendOptions options = limited({.dtype = CudaDType::kBF16});
  options.stream_gemm = true;
  options.stream_gemm_split = true;
  const CudaForwardStats split = expect_logits_like_the_cpu(shape, options, 8);
  options.stream_gemm_split = false;
  const CudaForwardStats whole = expect_logits_like_the_cpu(shape, options, 8);
  EXPECT_GT(split.stream_gemms, whole.stream_gemms);
  options.stream_gemm_split = true;
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  const auto ids = random_ids(60, shape.config.vocab_size, 9);
  CudaBackend a(weights, options), b(weights, options);
  EXPECT_TRUE(same_bits(score_blocks(a, ids, 40, 4, true), score_blocks(b, ids, 40, 4, true)));
}

TEST_F(CudaBackendTest, CudaCoreAndTensorCoreAttentionAgree) {
  // The tensor-core kernels against the CUDA-core one: the pipelined kernel (default), with
  // short splits that it merges itself (tiles of 128+ positions split), and the first one.
  const auto shape = shapes()[1];
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  CudaBackend simple(weights, limited({.attention = CudaAttention::kCudaCores}));
  const auto ids = random_ids(300, shape.config.vocab_size, 4);
  const auto want = score_blocks(simple, ids, 250, 4, true);
  CudaBackendOptions split = limited({.attention = CudaAttention::kTensorCores});
  split.attention_min_split_keys = 64;
  CudaBackendOptions first = limited({.attention = CudaAttention::kTensorCores});
  first.pipelined_attention = false;
  for (const auto& [name, options] : std::vector<std::pair<std::string, CudaBackendOptions>>{
           {"pipelined", limited({.attention = CudaAttention::kTensorCores})},
           {"pipelined, short splits", split},
           {"first mma", first}}) {
    CudaBackend mma(weights, options);
    EXPECT_LT(max_row_rel_l2(score_blocks(mma, ids, 250, 4, true), want), 1e-2) << name;
  }
}

TEST_F(CudaBackendTest, DeepAndPairedAttentionMatchTheCudaCoreKernel) {
  // The backend's own choice of attention kernel per pass, against the CUDA-core attention on the
  // same weights. Group 4, head_dim 64 (tiles of 4 positions, 2 KV heads): a prompt of ~1.75 x
  // SMs positions is a prefill whose tiles fill 3/4 to all of the SMs (the deep kernel), one of
  // ~13 x SMs pairs its tiles (the paired kernel). A prefill whose tiles outnumber the deep
  // kernel's blocks but whose paired tiles number 7/8 of the deep paired kernel's blocks runs
  // that kernel: with 4 warps a block at head_dim 64, with 4 and 8 at head_dim 128 (group 2:
  // tiles of 8 positions, 8 KV heads; at head_dim 64 the 8-warp kernel has half the deep
  // kernel's blocks, so no pass fits it). The blocks after the prefills run the pipelined
  // kernel. The deep pairs with no lower limit on the pass's positions; with a limit above the
  // pass's positions, or without paired tiles, that pass runs the pipelined kernel.
  const int sms = cuda::device_attribute(cudaDevAttrMultiProcessorCount);
  enum Expect { kDeep, kDeepPaired, kPaired };
  struct Case {
    std::int64_t prompt;
    Expect expect;
    std::int32_t warps;  ///< attention_deep_pairs_warps
  };
  for (const std::size_t s : std::initializer_list<std::size_t>{1, 2}) {
    const Shape shape = shapes()[s];  // (a copy: shapes() returns a temporary)
    const auto& c = shape.config;
    const auto head_dim = static_cast<std::int32_t>(c.head_dim);
    const CpuWeights weights = random_weights(c, shape.std, true);
    CudaBackend simple(weights, limited({.attention = CudaAttention::kCudaCores}));
    std::vector<Case> cases;
    if (s == 1) cases = {{7 * sms / 16 * 4, kDeep, 4}, {13 * sms / 4 * 4, kPaired, 4}};
    const std::int64_t tile_positions = cuda::kTileQueries / (c.num_heads / c.num_kv_heads);
    const std::int32_t deep_blocks =
        cuda::attention_grid(CudaDType::kBF16, cuda::AttentionKernel::kTensorCoresDeep, head_dim);
    for (const auto& [warps, kernel] :
         {std::pair{4, cuda::AttentionKernel::kTensorCoresDeepPaired},
          std::pair{8, cuda::AttentionKernel::kTensorCoresDeepPaired8}}) {
      const std::int64_t blocks = cuda::attention_grid(CudaDType::kBF16, kernel, head_dim);
      // Tiles a KV head: an even count whose pairs over the KV heads are 7/8 of the blocks.
      const std::int64_t tiles = 2 * (7 * blocks / (8 * c.num_kv_heads));
      if (tiles * c.num_kv_heads <= deep_blocks) {
        ASSERT_TRUE(warps == 8 && s == 1) << shape.name << ", " << warps << " warps";
        continue;
      }
      // (the prefill pass: the prompt and the first block of 4)
      cases.push_back({tiles * tile_positions - 4, kDeepPaired, warps});
    }
    for (const auto& [prompt, expect, warps] : cases) {
      const std::string what = shape.name + ", prompt " + std::to_string(prompt) + ", " +
                               std::to_string(warps) + " warps";
      if (prompt + 12 > c.max_position_embeddings) {
        ADD_FAILURE() << what << " does not fit " << sms << " SMs' test";
        continue;
      }
      CudaBackendOptions options = limited();
      options.attention_deep_pairs_min_keys = 0;
      options.attention_deep_pairs_warps = warps;
      CudaBackend chosen(weights, options);
      const auto ids = random_ids(prompt + 12, c.vocab_size, 5);
      const auto want = score_blocks(simple, ids, prompt, 4, true);
      const auto got = score_blocks(chosen, ids, prompt, 4, true);
      EXPECT_LT(max_row_rel_l2(got, want), 1e-2) << what;
      const auto& stats = chosen.stats();
      EXPECT_EQ(stats.deep_attention_passes > 0, expect == kDeep) << what;
      EXPECT_EQ(stats.deep_paired_attention_passes > 0, expect == kDeepPaired) << what;
      EXPECT_EQ(stats.paired_attention_passes > 0, expect == kPaired) << what;
      if (expect == kDeepPaired) {
        // A limit one position above the prefill's longest sequence keeps the deep pairs off,
        // and so does attention_paired_tiles off (one tile per work item on every kernel).
        options.attention_deep_pairs_min_keys = static_cast<std::int32_t>(prompt + 5);
        CudaBackend limited_pairs(weights, options);
        score_blocks(limited_pairs, ids, prompt, 4, true);
        EXPECT_EQ(limited_pairs.stats().deep_paired_attention_passes, 0) << what;
        options.attention_deep_pairs_min_keys = 0;
        options.attention_paired_tiles = false;
        CudaBackend unpaired(weights, options);
        EXPECT_LT(max_row_rel_l2(score_blocks(unpaired, ids, prompt, 4, true), want), 1e-2)
            << what << ", unpaired";
        EXPECT_EQ(unpaired.stats().deep_paired_attention_passes, 0) << what << ", unpaired";
        EXPECT_EQ(unpaired.stats().paired_attention_passes, 0) << what << ", unpaired";
      }
    }
  }
}

/// Five requests for the model `c`: its mask id, every vocabulary row allowed, one stop id inside
/// the vocabulary (SDAR's defaults lie outside these small vocabularies), prompts without the mask.
std::vector<GenerationRequest> requests_for(const model::ModelConfig& c, double temperature,
                                            std::int32_t top_k = 0, double top_p = 1) {
  std::vector<GenerationRequest> requests;
  const std::vector<std::int64_t> prompts{5, 12, 1, 30, 9};
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    GenerationOptions o;
    o.max_new_tokens = 24 + 7 * static_cast<std::int64_t>(i);
    o.sampling.temperature = temperature;
    o.sampling.top_k = top_k;
    o.sampling.top_p = top_p;
    o.sampling.seed = 100 + i;
    o.sampling.mask_id = c.mask_token_id;
    o.sampling.vocab_limit = static_cast<std::int32_t>(c.vocab_size);
    o.stop_ids = {7};
    o.fused_store = i % 2 == 0;
    o.remasking.strategy =
        i == 1 ? RemaskingStrategy::kSequential : RemaskingStrategy::kLowConfidenceDynamic;
    o.remasking.threshold = 0.5;
    // Ids below the mask id (the last row).
    requests.push_back(
        {random_ids(prompts[i], c.mask_token_id, static_cast<std::uint32_t>(10 + i)), o});
  }
  return requests;
}

void expect_same(const std::vector<GenerationResult>& got,
                 const std::vector<GenerationResult>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].output_ids, want[i].output_ids) << what << ", request " << i;
    ASSERT_EQ(got[i].trace.size(), want[i].trace.size()) << what << ", request " << i;
    for (std::size_t t = 0; t < got[i].trace.size(); ++t) {
      EXPECT_EQ(got[i].trace[t].step, want[i].trace[t].step) << what << ", request " << i;
      EXPECT_EQ(got[i].trace[t].forward, want[i].trace[t].forward) << what << ", request " << i;
    }
    EXPECT_EQ(got[i].counts.forwards, want[i].counts.forwards) << what << ", request " << i;
  }
}

TEST_F(CudaBackendTest, Fp32DecodingGivesTheCpuReferenceTokens) {
  const auto shape = shapes()[0];
  const CpuWeights weights = random_weights(shape.config, shape.std, false);
  CpuBackend cpu(weights);
  // The default kernels (masked_rows_only among them: decided block rows get no lm_head row),
  // every block row given logits, and the first layouts (--cuda-baseline-kernels) alike.
  CudaBackend gpu(weights, limited({.dtype = CudaDType::kF32}));
  CudaBackendOptions every_row = limited({.dtype = CudaDType::kF32});
  every_row.masked_rows_only = false;
  CudaBackend all_rows(weights, every_row);
  CudaBackendOptions first = every_row;
  first.chunked_vocab_pass = false;
  first.attention_min_split_keys = 0;
  first.fast_norms = false;
  CudaBackend baseline(weights, first);
  for (const double temperature : {0.0, 1.0}) {
    const auto requests = requests_for(shape.config, temperature);
    const auto want = generate(cpu, requests);
    const std::string what = temperature == 0 ? "greedy" : "sampled";
    expect_same(generate(gpu, requests), want, what);
    expect_same(generate(all_rows, requests), want, what + ", every block row");
    expect_same(generate(baseline, requests), want, what + ", baseline kernels");
  }
  EXPECT_GT(gpu.stats().graph_replays, 0);
  EXPECT_EQ(all_rows.stats().forwards, gpu.stats().forwards);
  EXPECT_LT(gpu.stats().block_rows, all_rows.stats().block_rows);
  EXPECT_GT(gpu.stats().block_rows, 0);
}

TEST_F(CudaBackendTest, FloorsAreSummedOverPassesWithTheCeilings) {
  // The floor and the serial bound of issue 6's benchmark: zero until set_ceilings(), then summed
  // per pass, floor <= serial <= 2 x floor, and the bytes count every layer weight once a pass.
  const auto shape = shapes()[2];
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  CudaBackend gpu(weights, limited());
  const auto requests = requests_for(shape.config, 0.0);
  (void)generate(gpu, requests);
  EXPECT_EQ(gpu.stats().floor_seconds, 0);
  EXPECT_EQ(gpu.stats().serial_bound_seconds, 0);
  gpu.reset_stats();
  gpu.set_ceilings(3.0e12, 750e12, 600e12);
  (void)generate(gpu, requests);
  const CudaForwardStats& st = gpu.stats();
  ASSERT_GT(st.passes, 0);
  EXPECT_GT(st.floor_seconds, 0);
  EXPECT_GE(st.serial_bound_seconds, st.floor_seconds);
  EXPECT_LE(st.serial_bound_seconds, 2 * st.floor_seconds);
  const auto& c = shape.config;
  const double layer_weights = static_cast<double>(
      gpu.weight_bytes_per_pass() - c.vocab_size * c.hidden_size * 2);  // lm_head not tied
  EXPECT_GE(st.bytes, static_cast<double>(st.passes) * layer_weights);
  // Every row through every layer matrix, every block row through lm_head, and the attention:
  // the FLOPs exactly (they are additive over passes).
  const double hd = static_cast<double>(c.hidden_size),
               qd = static_cast<double>(c.num_heads * c.head_dim),
               kvd = static_cast<double>(c.num_kv_heads * c.head_dim),
               in = static_cast<double>(c.intermediate_size);
  const double layer_params = (qd + 2 * kvd) * hd + hd * qd + 3 * in * hd;
  const double flops =
      2.0 * static_cast<double>(st.rows * c.num_layers) * layer_params +
      2.0 * static_cast<double>(st.block_rows * c.vocab_size) * hd +
      4.0 * static_cast<double>(st.attention_scores) * qd * static_cast<double>(c.num_layers);
  EXPECT_NEAR(st.flops, flops, 1e-9 * flops);
  EXPECT_GE(st.floor_seconds, st.bytes / 3.0e12 * (1 - 1e-9));  // each pass: >= bytes / copy
  EXPECT_GE(st.floor_seconds, st.flops / 750e12 * (1 - 1e-9));  // each pass: >= FLOPs / rate
  // The floor at the sustained rate (600 of 750): at least the floor, at most 750 / 600 of it, and
  // at least the FLOPs at that rate.
  EXPECT_GE(st.sustained_floor_seconds, st.floor_seconds);
  EXPECT_LE(st.sustained_floor_seconds, st.floor_seconds * 750.0 / 600.0 * (1 + 1e-9));
  EXPECT_GE(st.sustained_floor_seconds, st.flops / 600e12 * (1 - 1e-9));
  gpu.reset_stats();
  gpu.set_ceilings(3.0e12, 750e12);  // no sustained rate: no sustained floor
  (void)generate(gpu, requests);
  EXPECT_GT(gpu.stats().floor_seconds, 0);
  EXPECT_EQ(gpu.stats().sustained_floor_seconds, 0);
}

TEST_F(CudaBackendTest, HostTimesAreThePartsOfTheWallTime) {
  // The host's four parts of the forwards (prepare, enqueue, wait, finish) are each taken on
  // every pass, so each is positive after a generation; together they are at most its wall time,
  // and the GPU's own time is within the wait and the enqueue.
  const auto shape = shapes()[2];
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  CudaBackend gpu(weights, limited());
  const auto requests = requests_for(shape.config, 0.0);
  (void)generate(gpu, requests);  // warm-up: graphs captured, GEMMs tuned
  gpu.reset_stats();
  const auto start = std::chrono::steady_clock::now();
  (void)generate(gpu, requests);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const CudaForwardStats& st = gpu.stats();
  ASSERT_GT(st.passes, 0);
  EXPECT_GT(st.host_prepare_seconds, 0);
  EXPECT_GT(st.host_enqueue_seconds, 0);
  EXPECT_GT(st.host_wait_seconds, 0);
  EXPECT_GT(st.host_finish_seconds, 0);
  const double host = st.host_prepare_seconds + st.host_enqueue_seconds + st.host_wait_seconds +
                      st.host_finish_seconds;
  EXPECT_LE(host, wall);
  EXPECT_LE(st.device_seconds, st.host_enqueue_seconds + st.host_wait_seconds);
}

TEST_F(CudaBackendTest, ColdGemmTuningIsCountedInTheWorkspace) {
  // gemm_tune_cold's flush target (twice the L2) is allocated with a bf16 backend that tunes, and
  // the memory report's workspace counts it, so the KV cache is sized without it; an fp32
  // backend (no autotune) holds none.
  const int l2 = cuda::device_attribute(cudaDevAttrL2CacheSize);
  const auto shape = shapes()[0];
  for (const auto dtype : {CudaDType::kBF16, CudaDType::kF32}) {
    const CpuWeights weights = random_weights(shape.config, shape.std, dtype == CudaDType::kBF16);
    CudaBackendOptions warm = limited({.dtype = dtype});
    warm.gemm_tune_cold = false;
    CudaBackendOptions cold = warm;
    cold.gemm_tune_cold = true;
    CudaBackend a(weights, warm), b(weights, cold);
    EXPECT_EQ(b.memory().workspace - a.memory().workspace,
              dtype == CudaDType::kBF16 ? 2 * static_cast<std::int64_t>(l2) : 0)
        << (dtype == CudaDType::kBF16 ? "bf16" : "fp32");
  }
}

TEST_F(CudaBackendTest, WgmmaLimitIsTheDeviceRuleUnlessGiven) {
  // Unset, wgmma_min_block_k becomes the device's rule (reported by options()); given, it stays.
  const double peak = cuda::device_peak_bandwidth();
  const int sms = cuda::device_attribute(cudaDevAttrMultiProcessorCount);
  std::printf("peak bandwidth %.3g bytes/s, %d SMs: wgmma_min_block_k %lld\n", peak, sms,
              static_cast<long long>(cuda::wgmma_auto_min_block_k(peak, sms)));
  EXPECT_GT(peak, 1e11);  // every CUDA device of this decade
  const auto shape = shapes()[0];
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  CudaBackend automatic(weights, limited({.dtype = CudaDType::kBF16}));
  ASSERT_TRUE(automatic.options().wgmma_min_block_k.has_value());
  EXPECT_EQ(*automatic.options().wgmma_min_block_k, cuda::wgmma_auto_min_block_k(peak, sms));
  CudaBackendOptions given = limited({.dtype = CudaDType::kBF16});
  given.wgmma_min_block_k = 64;
  EXPECT_EQ(CudaBackend(weights, given).options().wgmma_min_block_k, 64);
}

TEST_F(CudaBackendTest, BaselineAndDefaultKernelsGiveTheSameBf16Logits) {
  const auto shape = shapes()[1];
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  CudaBackend current(weights, limited());
  CudaBackendOptions first = limited();
  first.chunked_vocab_pass = false;
  first.attention_min_split_keys = 0;
  first.pipelined_attention = false;
  first.fast_norms = false;
  first.gemm_autotune = false;
  CudaBackend baseline(weights, first);
  const auto ids = random_ids(300, shape.config.vocab_size, 4);
  const auto a = score_blocks(current, ids, 250, 4, true);
  const auto b = score_blocks(baseline, ids, 250, 4, true);
  EXPECT_LT(max_row_rel_l2(a, b), 1e-2);
  EXPECT_FALSE(current.gemm_choices().empty());  // the autotune ran
  EXPECT_TRUE(baseline.gemm_choices().empty());
}

TEST_F(CudaBackendTest, SeededSamplingReproducesRunToRun) {
  const auto shape = shapes()[1];
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  for (const auto& [k, p] : std::vector<std::pair<std::int32_t, double>>{{0, 1}, {20, 0.9}}) {
    const auto requests = requests_for(shape.config, 1.0, k, p);
    CudaBackend first(weights, limited()), second(weights, limited());
    const auto a = generate(first, requests);
    const auto b = generate(second, requests);
    const auto c = generate(first, requests);  // the same backend again: graphs replayed
    expect_same(a, b, "two backends");
    expect_same(a, c, "one backend twice");
    auto reseeded = requests;
    for (auto& r : reseeded) r.options.sampling.seed += 1000;
    const auto d = generate(first, reseeded);
    int differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i) differ += a[i].output_ids != d[i].output_ids;
    EXPECT_GT(differ, 0) << "other seeds should draw other tokens";
  }
}

TEST_F(CudaBackendTest, GraphsAndChunkedPrefillDoNotChangeLogits) {
  const auto shape = shapes()[0];
  const CpuWeights weights = random_weights(shape.config, shape.std, false);
  CudaBackend eager(weights, limited({.dtype = CudaDType::kF32, .cuda_graphs = false}));
  CudaBackend graphs(weights, limited({.dtype = CudaDType::kF32}));
  CudaBackend chunked(weights,
                      limited({.dtype = CudaDType::kF32, .max_rows = 16, .max_block_rows = 8}));
  const auto ids = random_ids(90, shape.config.vocab_size, 5);
  const auto a = score_blocks(eager, ids, 61, 4, true);
  const auto b = score_blocks(graphs, ids, 61, 4, true);
  const auto c = score_blocks(chunked, ids, 61, 4, true);
  EXPECT_LT(max_row_rel_l2(b, a), 1e-5);
  EXPECT_LT(max_row_rel_l2(c, a), 1e-5);
  EXPECT_GT(graphs.stats().graph_captures, 0);
  EXPECT_EQ(eager.stats().graph_replays, 0);
  EXPECT_GT(chunked.stats().passes, chunked.stats().forwards);  // the prefill took several passes
}

/// Expects two backends on the same weights to give the same bits: block logits after a 250-token
/// prompt with the fused store pass and without, and the tokens of sampled and greedy decoding.
void expect_same_bits(CudaBackend& a, CudaBackend& b, const model::ModelConfig& config,
                      const std::string& what) {
  const auto ids = random_ids(300, config.vocab_size, 6);
  for (const bool fused : {true, false}) {
    const auto x = score_blocks(a, ids, 250, 4, fused);
    const auto y = score_blocks(b, ids, 250, 4, fused);
    EXPECT_TRUE(same_bits(x, y)) << what << (fused ? ", fused" : ", unfused") << ": "
                                 << max_row_rel_l2(x, y);
  }
  const auto requests = requests_for(config, 1.0, 20, 0.9);
  expect_same(generate(a, requests), generate(b, requests), what + ", sampled");
  const auto greedy = requests_for(config, 0.0);
  expect_same(generate(a, greedy), generate(b, greedy), what + ", greedy");
}

TEST_F(CudaBackendTest, ProgrammaticLaunchChangesNoBits) {
  // PDL only lets a kernel be scheduled before its predecessor drains; every kernel waits for it
  // first, so logits and tokens are bit for bit those of plain launches, with PDL in every pass
  // and in the few-row passes only (the default: the 250-row prompt pass plain, the block passes
  // with PDL), with the RMSNorms letting the next kernel start before their wait, after it (the
  // default's post norm) or after their row (input_norm_trigger, post_norm_trigger). The two
  // trigger variants also set stage_o_batch_rounds 0 and 1, which these widths pass through
  // without staging anything (their o projections are streamed, or their shares fit the
  // registers; staged_o_gemms says so); CudaOps.SkinnyGemmStagedWeightsGiveTheSameBits compares
  // the batches bit for bit on the SDAR o shapes, StagedOWeightsChangeNoBits the forward at
  // SDAR-4B's widths. Each variant covers other kernels: bf16 with graphs (skinny GEMM at few
  // rows, pipelined tensor-core attention, chunked vocabulary pass), and with short splits (the
  // pipelined kernel's own merge and its counters, replayed); bf16 eager with the first layouts
  // (the first mma attention, split, and its combine, the scalar norms, the whole-row vocabulary
  // pass); fp32 with graphs (CUDA-core attention, split). The PDL variants read the residual
  // before the o and down projections' wait (early_residual_reads, the default; not down's where
  // the post norm triggers before its wait). The GEMM autotune stays off: its choice
  // cannot differ in bits, but this test is about PDL.
  struct Variant {
    std::string name;
    std::size_t shape;
    CudaBackendOptions options;
  };
  CudaBackendOptions first{.cuda_graphs = false,
                           .chunked_vocab_pass = false,
                           .attention_min_split_keys = 0,
                           .pipelined_attention = false,
                           .fast_norms = false};
  const std::vector<Variant> variants{
      {"bf16, graphs", 2, {}},
      {"bf16, graphs, pipelined attention with short splits", 2, {.attention_min_split_keys = 64}},
      {"bf16, eager, first kernel layouts", 1, first},
      {"fp32, graphs, short splits", 0, {.dtype = CudaDType::kF32, .attention_min_split_keys = 0}}};
  for (const auto& v : variants) {
    const auto shape = shapes()[v.shape];
    const bool bf16 = v.options.dtype == CudaDType::kBF16;
    const CpuWeights weights = random_weights(shape.config, shape.std, bf16);
    CudaBackendOptions plain = limited(v.options);
    plain.gemm_autotune = false;
    plain = without_pdl(plain);  // (EarlyStartAfterCublasChangesNoBits)
    CudaBackendOptions pdl = plain;
    pdl.programmatic_launch = true;
    CudaBackendOptions few = plain;  // the default: PDL in passes of <= 16 rows only
    few.programmatic_launch_few_rows = true;
    CudaBackendOptions late = few;  // reads after the wait only (no early start reads)
    late.pdl_early_reads = false;
    // Both RMSNorms let the next kernel start before their wait, or both after their row read
    // (the default: the one before qkv before its wait, the one before gate/up after it).
    CudaBackendOptions both_norms = few, after_row = few;
    both_norms.post_norm_trigger = NormTrigger::kBeforeWait;
    after_row.input_norm_trigger = after_row.post_norm_trigger = NormTrigger::kAfterRead;
    both_norms.stage_o_batch_rounds = 0;
    after_row.stage_o_batch_rounds = 1;
    CudaBackend off(weights, plain), on(weights, pdl), some(weights, few), waiting(weights, late);
    expect_same_bits(on, off, shape.config, v.name);
    expect_same_bits(some, off, shape.config, v.name + ", PDL in few-row passes");
    expect_same_bits(waiting, off, shape.config, v.name + ", few-row PDL without early reads");
    {
      CudaBackend early(weights, both_norms), after(weights, after_row);
      expect_same_bits(early, off, shape.config, v.name + ", both norms trigger early");
      expect_same_bits(after, off, shape.config, v.name + ", both norms trigger after their row");
      // The early residual reads: o's and down's where the post norm triggers after its wait
      // (the default, after_row), o's alone where it triggers before (both_norms).
      if (bf16) {
        EXPECT_EQ(after.stats().early_residual_gemms, some.stats().early_residual_gemms) << v.name;
        EXPECT_LT(early.stats().early_residual_gemms, some.stats().early_residual_gemms)
            << v.name
            << ": down read the residual early after a norm that triggers before its wait";
        EXPECT_GT(early.stats().early_residual_gemms, 0) << v.name;
      }
    }
    EXPECT_EQ(some.stats().early_residual_gemms > 0, bf16) << v.name;
    EXPECT_EQ(waiting.stats().early_residual_gemms, 0) << v.name << ": without early reads";
    EXPECT_EQ(off.stats().early_residual_gemms, 0) << v.name << ": without PDL";
    EXPECT_EQ(some.stats().staged_o_gemms, 0) << v.name << ": these widths stage nothing";
    EXPECT_EQ(waiting.stats().programmatic_passes, some.stats().programmatic_passes) << v.name;
    EXPECT_GT(on.stats().programmatic_passes, 0) << v.name << ": PDL never ran";
    EXPECT_GT(some.stats().programmatic_passes, 0) << v.name << ": few-row PDL never ran";
    EXPECT_LT(some.stats().programmatic_passes, on.stats().programmatic_passes)
        << v.name << ": the prompt pass is not a few-row pass";
    EXPECT_EQ(off.stats().programmatic_passes, 0) << v.name;
    EXPECT_EQ(on.stats().graph_replays > 0, v.options.cuda_graphs) << v.name;
  }
}

TEST_F(CudaBackendTest, StagedOWeightsChangeNoBits) {
  // The o projection's weight staging (stage_o_weights: each skinny warp copies the rest of its
  // weight share into shared memory before its programmatic wait, stage_o_batch_rounds rounds at
  // a time) moves only copies before the wait, so the forward's bits are those without it. It
  // runs only where o is on the skinny kernel with a share beyond the registers: at SDAR-4B's
  // widths (2,560 <- 4,096; the streaming kernel's 160 tiles would fill 0.61 of 132 SMs), not at
  // the other tests' (ProgrammaticLaunchChangesNoBits). One layer keeps the test short.
  const Shape shape = sdar_4b_widths_one_layer();
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  CudaBackendOptions batches = limited();  // the default: staged, 2 rounds at a time
  batches.gemm_autotune = false;
  CudaBackendOptions all_at_once = batches, unstaged = batches;
  all_at_once.stage_o_batch_rounds = 0;
  unstaged.stage_o_weights = false;
  const CudaBackendOptions plain = without_pdl(batches);  // no early weights to stage
  CudaBackend staged(weights, batches), at_once(weights, all_at_once), off(weights, unstaged),
      no_pdl(weights, plain);
  expect_same_bits(staged, off, shape.config, "staged 2 rounds at a time against unstaged");
  expect_same_bits(at_once, off, shape.config, "staged all at once against unstaged");
  expect_same_bits(no_pdl, off, shape.config, "without PDL against unstaged");
  EXPECT_GT(staged.stats().staged_o_gemms, 0) << "the o projection never staged its weights";
  EXPECT_EQ(at_once.stats().staged_o_gemms, staged.stats().staged_o_gemms);
  EXPECT_EQ(off.stats().staged_o_gemms, 0);
  EXPECT_EQ(no_pdl.stats().staged_o_gemms, 0);
}

TEST_F(CudaBackendTest, DynamicTailChangesNoBits) {
  // The streaming kernel's dynamic tail (stream_dynamic_share: blocks claim the last tiles of a
  // launch at run time) moves only which block computes a tile, so the forward's bits are those
  // without it. At SDAR-4B's widths with one layer and an 8,192-token vocabulary, the default
  // rule (blocks averaging 32 tiles: the SDAR lm_heads) takes no launch; at 1 tile qkv, gate/up
  // and lm_head take it.
  const Shape shape = sdar_4b_widths_one_layer();
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  CudaBackendOptions rule = limited();  // the default rule: no launch at these widths
  rule.gemm_autotune = false;
  CudaBackendOptions every = rule, off = rule;
  every.stream_dynamic_min_tiles = 1.0;
  off.stream_dynamic_share = 0.0;
  const CudaBackendOptions no_pdl = without_pdl(every);
  CudaBackend by_rule(weights, rule), all(weights, every), plain(weights, off),
      all_no_pdl(weights, no_pdl);
  expect_same_bits(all, plain, shape.config, "dynamic tail on every launch against off");
  expect_same_bits(all_no_pdl, plain, shape.config, "the same without PDL against off");
  expect_same_bits(by_rule, plain, shape.config, "the default rule against off");
  EXPECT_GT(all.stats().dynamic_tail_gemms, 0) << "no launch took the dynamic tail";
  EXPECT_EQ(all_no_pdl.stats().dynamic_tail_gemms, all.stats().dynamic_tail_gemms);
  EXPECT_EQ(by_rule.stats().dynamic_tail_gemms, 0) << "blocks average fewer than 32 tiles here";
  EXPECT_EQ(plain.stats().dynamic_tail_gemms, 0);
}

TEST_F(CudaBackendTest, EarlyStartAfterCublasChangesNoBits) {
  // With early_start_after_cublas (the default), our kernels are PDL launches in every pass and
  // each after a cuBLASLt GEMM in a captured pass is scheduled once the GEMM's blocks have all
  // begun, waiting for its results (griddepcontrol.wait) before it reads them: the same bits as
  // full dependencies and PDL in few-row passes only. skinny_gemm_rows 0 puts every GEMM, the
  // block passes' too, on cuBLASLt, so the captured passes have such edges (counted).
  for (const std::size_t s : {std::size_t{1}, std::size_t{2}}) {
    const auto shape = shapes()[s];
    const CpuWeights weights = random_weights(shape.config, shape.std, true);
    CudaBackendOptions plain = limited();
    plain.skinny_gemm_rows = 0;
    plain.early_start_after_cublas = false;
    CudaBackendOptions early = plain;  // the default: with PDL in every pass
    early.early_start_after_cublas = true;
    CudaBackend off(weights, plain), on(weights, early);
    expect_same_bits(on, off, shape.config, shape.name + ", early start after cuBLASLt");
    EXPECT_GT(on.stats().early_start_edges, 0) << shape.name;
    EXPECT_GT(on.stats().programmatic_passes, off.stats().programmatic_passes) << shape.name;
    EXPECT_EQ(off.stats().early_start_edges, 0) << shape.name;
  }
}

TEST_F(CudaBackendTest, FusedNormAndSwigluChangeNoBits) {
  // The skinny GEMM's fused RMSNorm computes x with the norm kernel's arithmetic, and its SwiGLU
  // epilogue silu(gate) * up with the SwiGLU kernel's from the same sums, so logits and tokens
  // are bit for bit those of the separate kernels, each fusion alone and both together. The
  // fused paths run (block passes of 4-8 rows at widths 128, 256 and SDAR-1.7B's 2,048; the norm
  // where the autotune's n-tile choice makes the launch one wave); the prompt's 250-row pass
  // keeps the norm kernel, cuBLASLt and the SwiGLU kernel either way. The autotune keeps only
  // choices with the same bits, so it stays on. Then the same with the streaming kernel on every
  // few-row shape (no fill rule), whose own norm prologue and SwiGLU epilogue give its unfused
  // bits (other bits than the skinny kernel's, so compared with the streaming kernel unfused).
  for (const auto& shape : shapes()) {
    const CpuWeights weights = random_weights(shape.config, shape.std, true);
    for (const bool stream : {false, true}) {
      CudaBackendOptions separate = limited();
      separate.stream_gemm = stream;
      separate.stream_gemm_min_fill = 0.0;
      separate.fused_norm_gemm = false;
      separate.fused_swiglu = false;
      // (the wgmma norm folds need fused_swiglu and change the bits of 17-64-row passes:
      // FoldedNormsMatchTheCpuReference)
      separate.fold_qkv_norm = false;
      separate.fold_mlp_norm = false;
      CudaBackend off(weights, separate);
      for (const auto& [norm, swiglu] : {std::pair{true, false}, {false, true}, {true, true}}) {
        CudaBackendOptions fused = separate;
        fused.fused_norm_gemm = norm;
        fused.fused_swiglu = swiglu;
        CudaBackend on(weights, fused);
        const std::string what = shape.name + (stream ? ", streaming" : "") +
                                 (norm ? ", norm fused" : "") + (swiglu ? ", SwiGLU fused" : "");
        expect_same_bits(on, off, shape.config, what);
        EXPECT_EQ(on.stats().fused_norm_gemms > 0, norm) << what << ": fused norm launches";
        EXPECT_EQ(on.stats().fused_swiglu_gemms > 0, swiglu) << what << ": SwiGLU epilogues";
        EXPECT_EQ(on.stats().stream_gemms > 0, stream) << what << ": streaming launches";
      }
      EXPECT_EQ(off.stats().fused_norm_gemms + off.stats().fused_swiglu_gemms, 0) << shape.name;
    }
  }
}

/// KV pages a request's whole cache takes on `backend` (its own page arithmetic, asked for a
/// sequence id it never opened).
std::int64_t cache_pages(const CudaBackend& backend, const GenerationRequest& request) {
  constexpr SequenceId kNeverOpened = 1'000'000;
  return backend.cache_pages_to_hold(kNeverOpened, cache_tokens_needed(request));
}

/// A memory budget (bytes) that leaves `pages` KV pages for sequences, plus the scratch page,
/// beside the weights and work buffers that `m` reports.
std::int64_t budget_for_pages(const CudaMemoryReport& m, std::int64_t pages) {
  return m.weights + m.workspace + (pages + 1) * m.page_tokens * m.bytes_per_token;
}

TEST_F(CudaBackendTest, PagedCacheAdmitsRequestsAsRoomFreesUp) {
  const auto shape = shapes()[0];
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  const auto requests = requests_for(shape.config, 0.0);
  // The two backends batch the requests differently, so their passes have different row counts:
  // the GEMMs of a pass over more rows than the skinny kernel takes run cuBLASLt, whose sums
  // differ from the skinny kernel's in fp32 rounding only once the gate/up output stays fp32
  // (bf16_gate_up off). With its bf16 rounding, greedy tokens of this random model can differ
  // between the two batchings; the test is about admission, not that rounding.
  CudaBackend roomy(weights, limited({.bf16_gate_up = false}));
  // Read before decoding: a tight backend starts with these work buffers too.
  const CudaMemoryReport m = roomy.memory();
  const auto want = generate(roomy, requests);
  // A budget with room for the two largest requests' caches only.
  std::int64_t need = 0;
  for (std::size_t i = requests.size() - 2; i < requests.size(); ++i)
    need += cache_pages(roomy, requests[i]);
  CudaBackend tight(weights,
                    {.memory_limit_bytes = budget_for_pages(m, need), .bf16_gate_up = false});
  EXPECT_EQ(tight.memory().pages, need);
  const auto got = generate(tight, requests, {}, {.admission = CacheAdmission::kReserveWhole});
  expect_same(got, want, "tight cache");
  // A request larger than the whole cache is refused with an input error.
  auto huge = requests;
  huge[2].options.max_new_tokens = need * m.page_tokens + 100;
  EXPECT_THROW(generate(tight, huge), InputError);
  // Without reservations a forward that overflows the pool throws and commits nothing.
  tight.open(1, 4);
  const auto ids = random_ids(need * m.page_tokens + 4, shape.config.vocab_size, 6);
  const ForwardItem item{.sequence = 1, .commit = ids};
  ForwardOutput out;
  EXPECT_THROW(tight.forward(std::span(&item, 1), {}, out), Error);
  EXPECT_EQ(tight.cached_tokens(1), 0);
  tight.close(1);
}

TEST_F(CudaBackendTest, FullCacheIsMadeRoomForByPreemptionWithTheCpuTokens) {
  // fp32, where decoding gives the CPU reference's tokens: a preempted sequence's cache,
  // recomputed by a prefill, must give them too.
  const auto shape = shapes()[0];
  const CpuWeights weights = random_weights(shape.config, shape.std, false);
  CpuBackend cpu(weights);
  auto requests = requests_for(shape.config, 0.0);
  for (auto& r : requests) {  // every sequence runs its whole length: 97-126 positions
    r.options.stop_ids.clear();
    r.options.max_new_tokens = 96;
  }
  const auto want = generate(cpu, requests);
  CudaBackend roomy(weights, limited({.dtype = CudaDType::kF32}));
  const CudaMemoryReport m = roomy.memory();
  // Room for the largest cache and a half: several start, the pool fills as they grow.
  std::int64_t largest = 0;
  for (const auto& r : requests) largest = std::max(largest, cache_pages(roomy, r));
  const std::int64_t pages = largest * 3 / 2;
  CudaBackend tight(weights,
                    {.dtype = CudaDType::kF32, .memory_limit_bytes = budget_for_pages(m, pages)});
  ASSERT_EQ(tight.memory().pages, pages);
  ScheduleStats stats;
  const auto got = generate(tight, requests, {}, {}, &stats);
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_GT(stats.recomputed_tokens, 0);
  EXPECT_GE(stats.peak_active, 2u);
  // Tokens, traces and forward counts as without preemption (the recompute rides with a
  // denoising step, with the fused store and without it alike).
  expect_same(got, want, "preempted");
  for (std::size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(got[i].counts.committed_tokens, want[i].counts.committed_tokens) << "request " << i;
  EXPECT_EQ(tight.free_cache_pages(), pages);  // every page back in the pool
  // The backend's page arithmetic: a sequence that is not open holds nothing.
  EXPECT_EQ(tight.cache_pages_to_hold(99, m.page_tokens + 1), 2);
  tight.open(99, 4);
  const auto ids = random_ids(m.page_tokens, shape.config.vocab_size, 3);
  const ForwardItem item{.sequence = 99, .commit = ids};
  ForwardOutput out;
  tight.forward(std::span(&item, 1), {.proposals = false}, out);
  EXPECT_EQ(tight.cache_pages_to_hold(99, m.page_tokens), 0);
  EXPECT_EQ(tight.cache_pages_to_hold(99, m.page_tokens + 1), 1);
  EXPECT_EQ(tight.free_cache_pages(), pages - 1);
  tight.close(99);
}

TEST_F(CudaBackendTest, BadInputIsRejectedAndNothingCommitted) {
  const auto shape = shapes()[0];
  const CpuWeights weights = random_weights(shape.config, shape.std, true);
  CudaBackend gpu(weights, limited());
  gpu.open(7, 4);
  const std::vector<std::int32_t> good{1, 2, 3, 4}, bad{1, 2, 3, 5000};
  ForwardOutput out;
  ForwardItem item{.sequence = 7, .commit = good, .block = bad};
  EXPECT_THROW(gpu.forward(std::span(&item, 1), {}, out), InputError);
  EXPECT_EQ(gpu.cached_tokens(7), 0);
  item.block = good;
  gpu.forward(std::span(&item, 1), {}, out);
  EXPECT_EQ(gpu.cached_tokens(7), 4);
  EXPECT_EQ(out.proposals.size(), 4u);
  const std::vector<std::int32_t> three{1, 2, 3};
  item.commit = three;  // not a whole block
  EXPECT_THROW(gpu.forward(std::span(&item, 1), {}, out), Error);
  item.sequence = 8;  // not open
  EXPECT_THROW(gpu.forward(std::span(&item, 1), {}, out), Error);
  EXPECT_THROW(gpu.open(7, 4), Error);
  gpu.close(7);
  EXPECT_THROW(gpu.cached_tokens(7), Error);
  // Options out of range are refused at construction.
  for (const std::int32_t warps : {0, 6, 16}) {
    CudaBackendOptions options = limited();
    options.attention_deep_pairs_warps = warps;
    EXPECT_THROW(CudaBackend(weights, options), Error) << warps << " warps";
  }
  for (const std::int32_t rounds : {-1, 65}) {
    CudaBackendOptions options = limited();
    options.stage_o_batch_rounds = rounds;
    EXPECT_THROW(CudaBackend(weights, options), Error) << rounds << " staging rounds";
  }
}

}  // namespace
}  // namespace dice::engine
