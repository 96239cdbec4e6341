// Every CUDA op of the backend against a plain CPU reference on random inputs (like llama.cpp's
// test-backend-ops): each failure names the op and its configuration. Skipped without a GPU.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "boundary_probe.h"
#include "cuda_check.h"
#include "device_memory.h"
#include "device_query.h"
#include "dice/core/error.h"
#include "dice/engine/cuda_backend.h"
#include "dice/engine/sampling.h"
#include "dice/model/dtype.h"
#include "forward_plan.h"
#include "gemm.h"
#include "ops.h"
#include "persistent_probe.h"
#include "skinny_gemm.h"
#include "sm_partition.h"
#include "stream_gemm.h"
#include "wgmma_gemm.h"

namespace dice::engine::cuda {
namespace {

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    DICE_CUDA_CHECK(cudaSetDevice(0));
    stream_ = std::make_unique<Stream>();
  }
  cudaStream_t stream() const { return stream_->get(); }
  void synchronize() const { stream_->synchronize(); }

 private:
  std::unique_ptr<Stream> stream_;
};

std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

/// An RMSNorm weight as checkpoints hold them: 1 + normal(0, 0.1), `n` values from `seed`.
std::vector<float> rms_norm_weight(std::size_t n, std::uint32_t seed) {
  auto w = random_vector(n, seed, 0.1f);
  for (auto& v : w) v += 1.0f;
  return w;
}

/// Values as the device holds them: bf16-rounded (widened back) or unchanged.
std::vector<float> as_dtype(std::vector<float> v, CudaDType dtype) {
  if (dtype == CudaDType::kBF16)
    for (auto& x : v) x = model::bf16_to_f32(model::f32_to_bf16(x));
  return v;
}

DeviceBuffer upload(const std::vector<float>& v, CudaDType dtype) {
  DeviceBuffer b(v.size() * (dtype == CudaDType::kBF16 ? 2 : 4) + 256);
  if (dtype == CudaDType::kBF16) {
    std::vector<std::uint16_t> bits(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) bits[i] = model::f32_to_bf16(v[i]);
    DICE_CUDA_CHECK(cudaMemcpy(b.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  } else {
    DICE_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  }
  // A pageable cudaMemcpy may return before its DMA lands, and the tests' non-blocking stream
  // does not wait for it.
  DICE_CUDA_CHECK(cudaDeviceSynchronize());
  return b;
}

std::vector<float> download(const DeviceBuffer& b, std::size_t n, CudaDType dtype) {
  std::vector<float> v(n);
  if (dtype == CudaDType::kBF16) {
    std::vector<std::uint16_t> bits(n);
    DICE_CUDA_CHECK(cudaMemcpy(bits.data(), b.get(), n * 2, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n; ++i) v[i] = model::bf16_to_f32(bits[i]);
  } else {
    DICE_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), n * 4, cudaMemcpyDeviceToHost));
  }
  return v;
}

std::vector<std::byte> download_bytes(const DeviceBuffer& b, std::size_t n) {
  std::vector<std::byte> bytes(n);
  DICE_CUDA_CHECK(cudaMemcpy(bytes.data(), b.get(), n, cudaMemcpyDeviceToHost));
  return bytes;
}

DeviceBuffer upload_bytes(const std::vector<std::byte>& bytes) {
  DeviceBuffer b(bytes.size());
  DICE_CUDA_CHECK(cudaMemcpy(b.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  DICE_CUDA_CHECK(cudaDeviceSynchronize());  // (as upload)
  return b;
}

/// Success when `got` and `want` hold the same values (the same length, every pair ==: bit for
/// bit for finite values), else a failure naming the first index that differs and both values.
testing::AssertionResult same_values(const std::vector<float>& got,
                                     const std::vector<float>& want) {
  if (got.size() != want.size())
    return testing::AssertionFailure() << got.size() << " values, expected " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]))
      return testing::AssertionFailure()
             << "differs at " << i << ": " << got[i] << ", expected " << want[i];
  return testing::AssertionSuccess();
}

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

const char* name(CudaDType dtype) {
  return dtype == CudaDType::kBF16 ? "bf16" : "fp32";
}

/// A pass of one sequence committing `n` tokens from `start`, pages 1.. in order.
PassPlan commit_pass(const std::vector<std::int32_t>& tokens, std::int64_t start,
                     const std::vector<std::int32_t>& pages, std::int32_t heads = 4,
                     std::int32_t kv_heads = 2) {
  PassItem item;
  item.commit = tokens;
  item.start = start;
  item.block_length = 4;
  item.pages = pages;
  return plan_pass(std::span(&item, 1), {heads, kv_heads, 1, 0});
}

TEST_F(CudaOps, Embedding) {
  for (const auto dtype : {CudaDType::kF32, CudaDType::kBF16}) {
    const int vocab = 97, hidden = 48;
    const auto table = as_dtype(random_vector(vocab * hidden, 1), dtype);
    const std::vector<std::int32_t> tokens{5, 96, 0, 5, 17, 3, 60, 2};
    const PassPlan plan = commit_pass(tokens, 0, {1});
    const auto meta = upload_bytes(plan.bytes);
    const auto d_table = upload(table, dtype);
    DeviceBuffer x(16 * hidden * 4);
    std::vector<float> poison(16 * hidden, 7.0f);
    DICE_CUDA_CHECK(cudaMemcpy(x.get(), poison.data(), poison.size() * 4, cudaMemcpyHostToDevice));
    launch_embedding(dtype, meta.as<PassHeader>(), d_table.get(), hidden, x.as<float>(), 16,
                     stream());
    synchronize();
    const auto got = download(x, 16 * hidden, CudaDType::kF32);
    for (int r = 0; r < 16; ++r)
      for (int i = 0; i < hidden; ++i) {
        const float want = r < 8 ? table[tokens[r] * hidden + i] : 0.0f;
        ASSERT_EQ(got[r * hidden + i], want) << "embedding " << name(dtype) << " row " << r;
      }
  }
}

std::vector<float> cpu_rms_norm(const std::vector<float>& x, int rows, int dim,
                                const std::vector<float>& w, double eps) {
  std::vector<float> out(x.size());
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int i = 0; i < dim; ++i) sum += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
    const auto scale = static_cast<float>(1.0 / std::sqrt(sum / dim + eps));
    for (int i = 0; i < dim; ++i) out[r * dim + i] = w[i] * (x[r * dim + i] * scale);
  }
  return out;
}

TEST_F(CudaOps, RmsNormPlainAndGathered) {
  // Against the CPU, plain and gathered, both kernels; the vectorised one with its weight read
  // before its wait gives the same bits.
  for (const bool vectorised : {false, true})
    for (const auto dtype : {CudaDType::kF32, CudaDType::kBF16}) {
      // The vectorised kernel sums in float for bf16: its output may round to the neighbouring
      // bf16 value (2^-8 relative); fp32 output and the first kernel match to 2e-6.
      const double tol = vectorised && dtype == CudaDType::kBF16 ? 8e-3 : 2e-6;
      const std::string kernel = vectorised ? " vectorised" : " first kernel";
      const int rows = 9, hidden = 2560;
      const auto x = random_vector(rows * hidden, 2, 3.0f);
      const auto w = rms_norm_weight(hidden, 3);
      const auto want = as_dtype(cpu_rms_norm(x, rows, hidden, w, 1e-6), dtype);
      const auto d_x = upload(x, CudaDType::kF32), d_w = upload(w, CudaDType::kF32);
      DeviceBuffer out(rows * hidden * 4);
      launch_rms_norm(dtype, d_x.as<float>(), d_w.as<float>(), hidden, 1e-6, out.get(), rows,
                      nullptr, stream(), vectorised);
      synchronize();
      const auto got = download(out, rows * hidden, dtype);
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], tol * std::abs(want[i]) + 1e-30)
            << "rms_norm " << name(dtype) << kernel << " element " << i;
      // The weight read before the wait (PDL launch), at each trigger position: the same bits.
      if (vectorised) {
        for (const auto trigger : kNormTriggers) {
          DeviceBuffer early(out.bytes());
          launch_rms_norm(dtype, d_x.as<float>(), d_w.as<float>(), hidden, 1e-6, early.get(), rows,
                          nullptr, stream(), true, true, true, trigger);
          synchronize();
          const auto again = download(early, rows * hidden, dtype);
          ASSERT_TRUE(same_values(again, got))
              << "rms_norm " << name(dtype) << " early weight, trigger "
              << norm_trigger_name(trigger);
        }
      }

      // Gather: block rows of a pass (rows 4..7 of a fused-store pass), padded to 8 rows.
      PassItem item;
      const std::vector<std::int32_t> commit{1, 2, 3, 4}, block{5, 6, 7, 8};
      const std::vector<std::int32_t> pages{1};
      item.commit = commit;
      item.block = block;
      item.block_length = 4;
      item.pages = pages;
      const PassPlan plan = plan_pass(std::span(&item, 1), {4, 2, 1, 0});
      const auto meta = upload_bytes(plan.bytes);
      // Poisoned, so that the padding rows' zeros are checked.
      const auto d_gathered = upload(std::vector<float>(8 * hidden, 5.0f), dtype);
      launch_rms_norm(dtype, d_x.as<float>(), d_w.as<float>(), hidden, 1e-6, d_gathered.get(), 8,
                      meta.as<PassHeader>(), stream(), vectorised);
      synchronize();
      const auto g = download(d_gathered, 8 * hidden, dtype);
      for (int r = 0; r < 8; ++r)
        for (int i = 0; i < hidden; ++i) {
          const float expect = r < 4 ? want[(4 + r) * hidden + i] : 0.0f;
          ASSERT_NEAR(g[r * hidden + i], expect, tol * std::abs(expect) + 1e-30)
              << "rms_norm gather " << name(dtype) << kernel << " row " << r;
        }
    }
}

/// cos/sin table as the backend builds it.
std::vector<float2> rope_table(int positions, int d, double theta) {
  std::vector<float> inv_freq;
  for (int i = 0; i < d; i += 2)
    inv_freq.push_back(
        1.0f / static_cast<float>(std::pow(
                   theta, static_cast<double>(static_cast<float>(i) / static_cast<float>(d)))));
  std::vector<float2> t(static_cast<std::size_t>(positions * d / 2));
  for (int p = 0; p < positions; ++p)
    for (int i = 0; i < d / 2; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      t[p * d / 2 + i] = float2{static_cast<float>(std::cos(static_cast<double>(angle))),
                                static_cast<float>(std::sin(static_cast<double>(angle)))};
    }
  return t;
}

/// `table` on the device (float2 [positions, d / 2]), as the backend's `rope` buffer.
DeviceBuffer upload_rope(const std::vector<float2>& table) {
  DeviceBuffer d_rope(table.size() * sizeof(float2));
  DICE_CUDA_CHECK(cudaMemcpy(d_rope.get(), table.data(), table.size() * sizeof(float2),
                             cudaMemcpyHostToDevice));
  DICE_CUDA_CHECK(cudaDeviceSynchronize());  // (as upload)
  return d_rope;
}

TEST_F(CudaOps, QkNormRopeAndCacheWrite) {
  for (const bool warp_per_vector : {false, true})
    for (const auto dtype : {CudaDType::kF32, CudaDType::kBF16})
      for (const int d : {16, 128}) {
        const int heads = 4, kv_heads = 2, vectors = heads + 2 * kv_heads, pages = 4;
        const LayerShape shape{64, heads, kv_heads, d, 128, 1e-6};
        const std::vector<std::int32_t> tokens(8, 1);
        const std::vector<std::int32_t> page_ids{3, 1};  // positions 28..35 span two pages
        const PassPlan plan = commit_pass(tokens, 28, page_ids, heads, kv_heads);
        const auto meta = upload_bytes(plan.bytes);
        const auto qkv = random_vector(8 * vectors * d, 4, 2.0f);
        const auto qn = rms_norm_weight(d, 5), kn = rms_norm_weight(d, 6);
        const auto table = rope_table(64, d, 1e6);
        const auto d_qkv = upload(qkv, CudaDType::kF32), d_qn = upload(qn, CudaDType::kF32),
                   d_kn = upload(kn, CudaDType::kF32);
        const DeviceBuffer d_rope = upload_rope(table);
        const std::size_t cache_n = static_cast<std::size_t>(pages * kv_heads * kPageTokens * d);
        const std::vector<float> poison(cache_n, 3.0f);
        const auto k_cache = upload(poison, dtype), v_cache = upload(poison, dtype);
        DeviceBuffer q_out(8 * heads * d * 4);
        launch_qk_norm_rope(dtype, meta.as<PassHeader>(), d_qkv.as<float>(), d_qn.as<float>(),
                            d_kn.as<float>(), d_rope.as<float2>(), shape, q_out.get(),
                            CacheLayer{k_cache.get(), v_cache.get()}, 8, stream(), warp_per_vector);
        synchronize();
        const auto q_got = download(q_out, 8 * heads * d, dtype);
        const auto k_got = download(k_cache, cache_n, dtype);
        const auto v_got = download(v_cache, cache_n, dtype);
        std::vector<bool> written(cache_n, false);
        for (int r = 0; r < 8; ++r) {
          const int position = 28 + r;
          const int page = page_ids[position / kPageTokens], slot = position % kPageTokens;
          for (int v = 0; v < vectors; ++v) {
            const float* src = qkv.data() + (r * vectors + v) * d;
            std::vector<float> ref(src, src + d);
            const bool is_q = v < heads, is_k = !is_q && v < heads + kv_heads;
            if (is_q || is_k) {
              ref = cpu_rms_norm(ref, 1, d, is_q ? qn : kn, 1e-6);
              std::vector<float> rotated(d);
              for (int i = 0; i < d / 2; ++i) {
                const float2 cs = table[position * d / 2 + i];
                rotated[i] = ref[i] * cs.x - ref[i + d / 2] * cs.y;
                rotated[i + d / 2] = ref[i + d / 2] * cs.x + ref[i] * cs.y;
              }
              ref = rotated;
            }
            ref = as_dtype(ref, dtype);
            for (int i = 0; i < d; ++i) {
              float got;
              if (is_q) {
                got = q_got[(r * heads + v) * d + i];
              } else {
                const int h = is_k ? v - heads : v - heads - kv_heads;
                const std::size_t at =
                    static_cast<std::size_t>(((page * kv_heads + h) * kPageTokens + slot) * d + i);
                got = is_k ? k_got[at] : v_got[at];
                written[at] = true;
              }
              const float tol = dtype == CudaDType::kBF16 ? 8e-3f : 2e-6f;
              ASSERT_NEAR(got, ref[i], tol * std::abs(ref[i]) + 1e-6f)
                  << "qk_norm_rope " << name(dtype)
                  << (warp_per_vector ? " warp/vector" : " block/row") << " d " << d << " row " << r
                  << " vector " << v << " dim " << i;
            }
          }
        }
        for (std::size_t i = 0; i < cache_n; ++i)
          if (!written[i]) {
            ASSERT_EQ(k_got[i], 3.0f) << "qk_norm_rope wrote outside its slots at " << i;
            ASSERT_EQ(v_got[i], 3.0f) << "qk_norm_rope wrote outside its slots at " << i;
          }
      }
}

TEST_F(CudaOps, SwiGlu) {
  // inter % 4 == 0 runs the float4 kernel, 1002 the one-element one: the same values.
  for (const int inter : {1000, 1002})
    for (const auto dtype : {CudaDType::kF32, CudaDType::kBF16}) {
      const int rows = 5;
      const auto gu = random_vector(rows * 2 * inter, 7, 4.0f);
      const auto d_gu = upload(gu, CudaDType::kF32);
      DeviceBuffer out(rows * inter * 4);
      launch_swiglu(dtype, d_gu.as<float>(), inter, out.get(), rows, stream());
      synchronize();
      const auto got = download(out, rows * inter, dtype);
      for (int r = 0; r < rows; ++r)
        for (int i = 0; i < inter; ++i) {
          const float g = gu[r * 2 * inter + 2 * i], u = gu[r * 2 * inter + 2 * i + 1];
          const float want = as_dtype({g / (1.0f + std::exp(-g)) * u}, dtype)[0];
          ASSERT_NEAR(got[r * inter + i], want,
                      (dtype == CudaDType::kBF16 ? 8e-3f : 1e-6f) * std::abs(want) + 1e-7f)
              << "swiglu " << name(dtype) << " inter " << inter << " row " << r << " i " << i;
        }
    }
}

TEST_F(CudaOps, SwiGluOfABf16GateUpIsTheFp32KernelOnTheSameValues) {
  // The gate/up values rounded to bf16, given once as bf16 and once as the fp32 array of the
  // same values: the same output bits (the float4 kernel at inter 1000, the other at 1002).
  for (const int inter : {1000, 1002}) {
    const int rows = 5;
    const auto gu = as_dtype(random_vector(rows * 2 * inter, 17, 4.0f), CudaDType::kBF16);
    const auto d_fp32 = upload(gu, CudaDType::kF32), d_bf16 = upload(gu, CudaDType::kBF16);
    DeviceBuffer a(rows * inter * 2), b(rows * inter * 2);
    launch_swiglu(CudaDType::kBF16, d_fp32.as<float>(), inter, a.get(), rows, stream());
    launch_swiglu_bf16_input(d_bf16.as<__nv_bfloat16>(), inter, b.get(), rows, stream());
    synchronize();
    const auto want = download(a, rows * inter, CudaDType::kBF16);
    const auto got = download(b, rows * inter, CudaDType::kBF16);
    ASSERT_TRUE(same_values(got, want)) << "inter " << inter;
  }
}

/// x w^T (+ y0 with `accumulate`) in double: x [rows, in], w [out, in], y0 [rows, out].
std::vector<double> reference_gemm(const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>& y0, int rows, int in, int out,
                                   bool accumulate) {
  std::vector<double> y(static_cast<std::size_t>(rows) * out);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = accumulate ? y0[r * out + o] : 0.0;
      for (int i = 0; i < in; ++i) s += static_cast<double>(x[r * in + i]) * w[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

TEST_F(CudaOps, GemmThroughCublasLt) {
  // Heuristic plans, then (a second Gemm) the plans the autotune chose, on warm weights and with
  // the L2 flushed before each timed launch (set_cold_tune), on the same shapes: the tuned ones
  // must give the heuristic's results bit for bit.
  enum class Plans { kHeuristic, kTunedWarm, kTunedCold };
  const std::size_t l2 = static_cast<std::size_t>(device_attribute(cudaDevAttrL2CacheSize));
  Gemm plain;
  for (const Plans plans : {Plans::kHeuristic, Plans::kTunedWarm, Plans::kTunedCold}) {
    const bool tune = plans != Plans::kHeuristic, cold = plans == Plans::kTunedCold;
    Gemm gemm;
    gemm.set_cold_tune(cold);
    EXPECT_EQ(gemm.scratch_bytes(), cold ? 2 * l2 : 0u)
        << "the flush target is twice the L2, held only while cold tuning is on";
    EXPECT_EQ(gemm.cold_tune(), cold);
    for (const auto dtype : {CudaDType::kF32, CudaDType::kBF16})
      for (const int rows : {1, 7, 64})
        for (const bool accumulate : {false, true}) {
          const int in = 256, out = 384;
          const auto x = as_dtype(random_vector(rows * in, 8), dtype);
          const auto w = as_dtype(random_vector(out * in, 9, 0.05f), dtype);
          const auto y0 = random_vector(rows * out, 10);
          const auto d_x = upload(x, dtype), d_w = upload(w, dtype);
          const auto d_y = upload(y0, CudaDType::kF32);
          const std::string what = std::string("gemm ") + name(dtype) + " rows " +
                                   std::to_string(rows) + " accumulate " +
                                   std::to_string(accumulate) + " plans " +
                                   std::to_string(static_cast<int>(plans));
          if (tune) {
            DeviceBuffer x_scratch(rows * in * 4), y_scratch(rows * out * 4);
            EXPECT_GT(gemm.tune(dtype, x_scratch.get(), d_w.get(), y_scratch.as<float>(), rows, in,
                                out, accumulate, stream()),
                      0.0)
                << what;
            EXPECT_TRUE(gemm.tuned(dtype, rows, in, out, accumulate)) << what;
            EXPECT_EQ(gemm.tune(dtype, x_scratch.get(), d_w.get(), y_scratch.as<float>(), rows, in,
                                out, accumulate, stream()),
                      0.0)
                << what;  // once per shape
          }
          gemm.run(dtype, d_x.get(), d_w.get(), d_y.as<float>(), rows, in, out, accumulate,
                   stream());
          synchronize();
          const auto got = download(d_y, rows * out, CudaDType::kF32);
          EXPECT_LT(rel_l2(got, reference_gemm(x, w, y0, rows, in, out, accumulate)), 1e-5) << what;
          if (tune) {
            const auto d_y2 = upload(y0, CudaDType::kF32);
            plain.run(dtype, d_x.get(), d_w.get(), d_y2.as<float>(), rows, in, out, accumulate,
                      stream());
            synchronize();
            const auto heuristic = download(d_y2, rows * out, CudaDType::kF32);
            ASSERT_TRUE(same_values(got, heuristic)) << what << ": tuned and heuristic differ";
          }
        }
    if (tune) {
      const auto choices = gemm.choices();
      ASSERT_EQ(choices.size(), 12u);
      for (const auto& c : choices) {
        EXPECT_GE(c.candidates, 1);
        EXPECT_GE(c.same_bits, 1);  // the reference itself
        EXPECT_LE(c.same_bits, c.candidates);
        EXPECT_GE(c.chosen, 0);
        EXPECT_LT(c.chosen, c.candidates);
        EXPECT_GT(c.chosen_us, 0.0);
        EXPECT_LE(c.chosen_us, c.heuristic_us);
        EXPECT_LE(c.fastest_us, c.chosen_us);
      }
    }
    gemm.set_cold_tune(false);
    EXPECT_EQ(gemm.scratch_bytes(), 0u) << "turning cold tuning off frees the flush target";
    EXPECT_FALSE(gemm.cold_tune());
  }
}

TEST_F(CudaOps, GemmWithABf16Output) {
  // y = x w^T rounded once to bf16 (the gate/up projection before SwiGLU at many rows): each
  // element within bf16 rounding of the exact product; the autotuned plan gives the
  // heuristic's bits; accumulation and an odd out are refused.
  Gemm plain, tuned;
  const int in = 256, out = 384;
  for (const int rows : {24, 64, 640}) {
    const auto x = as_dtype(random_vector(rows * in, 18), CudaDType::kBF16);
    const auto w = as_dtype(random_vector(out * in, 19, 0.05f), CudaDType::kBF16);
    const auto d_x = upload(x, CudaDType::kBF16), d_w = upload(w, CudaDType::kBF16);
    DeviceBuffer y_plain(rows * out * 2), y_tuned(rows * out * 2);
    DeviceBuffer x_scratch(rows * in * 2), y_scratch(rows * out * 2);
    EXPECT_GT(tuned.tune(CudaDType::kBF16, x_scratch.get(), d_w.get(), y_scratch.as<float>(), rows,
                         in, out, false, stream(), 16, 3, true),
              0.0);
    EXPECT_TRUE(tuned.tuned(CudaDType::kBF16, rows, in, out, false, true));
    EXPECT_FALSE(tuned.tuned(CudaDType::kBF16, rows, in, out, false, false));
    plain.run_bf16_out(d_x.get(), d_w.get(), y_plain.get(), rows, in, out, stream());
    tuned.run_bf16_out(d_x.get(), d_w.get(), y_tuned.get(), rows, in, out, stream());
    synchronize();
    const auto got = download(y_plain, rows * out, CudaDType::kBF16);
    const auto again = download(y_tuned, rows * out, CudaDType::kBF16);
    const auto want = reference_gemm(x, w, {}, rows, in, out, false);
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], std::abs(want[i]) / 256.0 + 1e-6) << "rows " << rows << " " << i;
      ASSERT_EQ(got[i], again[i]) << "rows " << rows << ": tuned and heuristic differ at " << i;
    }
  }
  const auto choices = tuned.choices();
  ASSERT_EQ(choices.size(), 3u);
  for (const auto& c : choices) EXPECT_TRUE(c.bf16_out);
  DeviceBuffer x(64 * in * 2), w(out * in * 2), y(64 * out * 4);
  EXPECT_THROW(plain.tune(CudaDType::kBF16, x.get(), w.get(), y.as<float>(), 64, in, out, true,
                          stream(), 16, 3, true),
               Error);
  EXPECT_THROW(plain.run_bf16_out(x.get(), w.get(), y.get(), 64, in, out - 1, stream()), Error);
}

TEST_F(CudaOps, GemmWithAnSmCountTarget) {
  // cuBLASLt planned for half the SMs (for a kernel on another stream) still computes x w^T.
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  Gemm half(0, false, 64ull << 20, std::max(1, sms / 2));
  const int rows = 64, in = 256, out = 384;
  const auto x = as_dtype(random_vector(rows * in, 18), CudaDType::kBF16);
  const auto w = as_dtype(random_vector(out * in, 19, 0.05f), CudaDType::kBF16);
  const auto y0 = random_vector(rows * out, 20);
  const auto d_x = upload(x, CudaDType::kBF16), d_w = upload(w, CudaDType::kBF16);
  const auto d_y = upload(y0, CudaDType::kF32);
  half.run(CudaDType::kBF16, d_x.get(), d_w.get(), d_y.as<float>(), rows, in, out, true, stream());
  synchronize();
  const auto got = download(d_y, rows * out, CudaDType::kF32);
  EXPECT_LT(rel_l2(got, reference_gemm(x, w, y0, rows, in, out, true)), 1e-5);
  EXPECT_THROW(Gemm(0, false, 1 << 20, -1), Error);
  EXPECT_THROW(Gemm(0, false, 1 << 20, sms + 1), Error);
}

TEST_F(CudaOps, EarlyStartEdgesOnlyFromForeignKernelsIntoPdlLaunches) {
  // A captured pass in small: cuBLASLt GEMM -> SwiGLU (PDL) -> SwiGLU (PDL) -> cuBLASLt GEMM ->
  // RMSNorm (PDL or plain). start_early_after_foreign_kernels changes exactly the edges from a
  // cuBLASLt kernel into a PDL launch (to the launch-completion port), leaves the edge between
  // our two kernels on its programmatic port, the edges into cuBLASLt and into a plain launch full
  // dependencies, and a second call changes nothing. The graph then gives the eager plain
  // launches' bits.
  const int rows = 64, in = 256, inter = 256, hidden = 256;
  const auto bf16 = CudaDType::kBF16;
  const auto d_x = upload(random_vector(rows * in, 21), bf16);
  const auto d_w1 = upload(random_vector(2 * inter * in, 22, 0.05f), bf16);
  const auto d_w2 = upload(random_vector(hidden * inter, 23, 0.05f), bf16);
  const auto d_norm = upload(random_vector(hidden, 24), CudaDType::kF32);
  Gemm gemm;  // skinny rows 0: every GEMM is cuBLASLt's
  DeviceBuffer gate_up(rows * 2 * inter * 4), y(rows * hidden * 4);
  const auto pass = [&](bool pdl, bool norm_pdl, DeviceBuffer& act, DeviceBuffer& act2,
                        DeviceBuffer& normed) {
    gemm.run(bf16, d_x.get(), d_w1.get(), gate_up.as<float>(), rows, in, 2 * inter, false,
             stream());
    launch_swiglu(bf16, gate_up.as<float>(), inter, act.get(), rows, stream(), pdl);
    launch_swiglu(bf16, gate_up.as<float>(), inter, act2.get(), rows, stream(), pdl);
    gemm.run(bf16, act.get(), d_w2.get(), y.as<float>(), rows, inter, hidden, false, stream());
    launch_rms_norm(bf16, y.as<float>(), d_norm.as<float>(), hidden, 1e-6, normed.get(), rows,
                    nullptr, stream(), true, norm_pdl);
  };
  const auto bytes = [](const DeviceBuffer& b, std::size_t n) {
    std::vector<std::uint16_t> v(n);
    DICE_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), n * 2, cudaMemcpyDeviceToHost));
    return v;
  };
  DeviceBuffer act(rows * inter * 2), act2(rows * inter * 2), normed(rows * hidden * 2);
  pass(false, false, act, act2, normed);
  synchronize();
  const auto want_act2 = bytes(act2, rows * inter), want_normed = bytes(normed, rows * hidden);

  for (const bool norm_pdl : {false, true}) {
    const std::string what = norm_pdl ? "RMSNorm a PDL launch" : "RMSNorm a plain launch";
    int changed = -1, again = -1;
    std::size_t completion = 0, programmatic = 0, full = 0;
    const auto edit = [&](cudaGraph_t graph) {
      changed = start_early_after_foreign_kernels(graph, kOwnKernelNames);
      again = start_early_after_foreign_kernels(graph, kOwnKernelNames);
      std::size_t count = 0;
      DICE_CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count));
      std::vector<cudaGraphNode_t> from(count), to(count);
      std::vector<cudaGraphEdgeData> data(count);
      DICE_CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &count));
      for (const auto& e : data) {
        if (e.type == cudaGraphDependencyTypeProgrammatic &&
            e.from_port == cudaGraphKernelNodePortLaunchCompletion)
          ++completion;
        else if (e.type == cudaGraphDependencyTypeProgrammatic &&
                 e.from_port == cudaGraphKernelNodePortProgrammatic)
          ++programmatic;
        else if (e.type == cudaGraphDependencyTypeDefault)
          ++full;
      }
    };
    DeviceBuffer g_act(rows * inter * 2), g_act2(rows * inter * 2), g_normed(rows * hidden * 2);
    const GraphExec graph = capture_graph(
        stream(), [&] { pass(true, norm_pdl, g_act, g_act2, g_normed); }, edit);
    EXPECT_EQ(changed, norm_pdl ? 2 : 1) << what;
    EXPECT_EQ(again, 0) << what << ": a second call changed edges";
    EXPECT_EQ(completion, static_cast<std::size_t>(changed)) << what;
    EXPECT_EQ(programmatic, 1u) << what << ": the edge between our two PDL kernels";
    // SwiGLU -> GEMM, and GEMM -> RMSNorm when plain (cuBLASLt may add edges of its own).
    EXPECT_GE(full, norm_pdl ? 1u : 2u) << what;
    for (int replay = 0; replay < 2; ++replay) graph.launch(stream());
    synchronize();
    EXPECT_EQ(bytes(g_act2, rows * inter), want_act2) << what;
    EXPECT_EQ(bytes(g_normed, rows * hidden), want_normed) << what;
  }
}

/// y (fp32, rows x out) on the host.
std::vector<float> download_f32(const DeviceBuffer& b, std::int64_t count) {
  std::vector<float> v(static_cast<std::size_t>(count));
  DICE_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), v.size() * 4, cudaMemcpyDeviceToHost));
  return v;
}

/// Random GEMM operands made on the device: w [out, in] bf16 (std 0.05), x [rows, in] bf16 and
/// y0 [rows, out] fp32 (std 1), seeded from `seed` and the shape.
struct GemmCase {
  GemmCase(std::int64_t in, std::int64_t out, std::int64_t rows, std::uint64_t seed,
           cudaStream_t stream)
      : in_dim(in),
        out_dim(out),
        w(static_cast<std::size_t>(in * out) * 2),
        x(static_cast<std::size_t>(rows * in) * 2),
        y0(static_cast<std::size_t>(rows * out) * 4) {
    launch_fill_random(CudaDType::kBF16, w.get(), in * out, 0.05f,
                       seed + 1 + static_cast<std::uint64_t>(out), stream);
    launch_fill_random(CudaDType::kBF16, x.get(), rows * in, 1.0f,
                       seed + 2 + static_cast<std::uint64_t>(in), stream);
    launch_fill_random(CudaDType::kF32, y0.get(), rows * out, 1.0f, seed + 3, stream);
  }
  /// Copies y0's first `rows` rows of `out` into y (the starting output of a run, for the
  /// accumulating launches), on `stream`.
  void start(const DeviceBuffer& y, std::int64_t rows, std::int64_t out,
             cudaStream_t stream) const {
    DICE_CUDA_CHECK(cudaMemcpyAsync(y.get(), y0.get(), static_cast<std::size_t>(rows * out) * 4,
                                    cudaMemcpyDeviceToDevice, stream));
  }
  /// cuBLASLt's y = x w^T (+ y0 with `accumulate`) for the first `rows` rows, computed in `y` on
  /// `stream` and downloaded (rows x out fp32): the reference of the GEMM kernels' tests.
  std::vector<float> reference(Gemm& cublas, const DeviceBuffer& y, std::int64_t rows,
                               bool accumulate, cudaStream_t stream) const {
    start(y, rows, out_dim, stream);
    cublas.run(CudaDType::kBF16, x.get(), w.get(), y.as<float>(), rows, in_dim, out_dim, accumulate,
               stream);
    DICE_CUDA_CHECK(cudaStreamSynchronize(stream));  // cudaMemcpy does not wait for `stream`
    return download_f32(y, rows * out_dim);
  }
  /// "<kernel> gemm rows R in I out O accumulate A": what a failed assertion names.
  std::string label(const char* kernel, std::int64_t rows, bool accumulate) const {
    return fmt::format("{} gemm rows {} in {} out {} accumulate {}", kernel, rows, in_dim, out_dim,
                       accumulate ? 1 : 0);
  }
  std::int64_t in_dim, out_dim;  ///< the shape it was made for
  DeviceBuffer w, x, y0;
};

/// The largest per-row max |got - want| over the row's largest |want| of the first `rows` rows of
/// [rows, out] outputs; infinity for a row whose reference is all zeros (a broken fill).
double worst_row_error(const std::vector<float>& got, const std::vector<float>& want,
                       std::int64_t rows, std::int64_t out) {
  double worst = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    double magnitude = 0, diff = 0;
    for (std::int64_t o = 0; o < out; ++o) {
      const auto i = static_cast<std::size_t>(r * out + o);
      magnitude = std::max(magnitude, std::abs(static_cast<double>(want[i])));
      diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    }
    if (magnitude == 0.0) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, diff / magnitude);
  }
  return worst;
}

/// The operands of a GEMM with a fused RMSNorm, made on the device: residual [rows, in] fp32
/// (std 3), norm weight [in] fp32 (std 1), w [out, in] bf16 (std 0.05), y0 [rows, out] fp32 (std
/// 1), seeded `seed` to `seed` + 3; h [rows, in] bf16 takes the norm kernel's output.
struct NormGemmCase {
  static constexpr double kEps = 1e-6;
  NormGemmCase(std::int64_t in, std::int64_t out, std::int64_t rows, std::uint64_t seed,
               cudaStream_t stream)
      : in_dim(in),
        out_dim(out),
        residual(static_cast<std::size_t>(rows * in) * 4),
        norm_weight(static_cast<std::size_t>(in) * 4),
        w(static_cast<std::size_t>(in * out) * 2),
        y0(static_cast<std::size_t>(rows * out) * 4),
        h(static_cast<std::size_t>(rows * in) * 2),
        norm{residual.as<float>(), norm_weight.as<float>(), static_cast<float>(kEps)} {
    launch_fill_random(CudaDType::kF32, residual.get(), rows * in, 3.0f, seed, stream);
    launch_fill_random(CudaDType::kF32, norm_weight.get(), in, 1.0f, seed + 1, stream);
    launch_fill_random(CudaDType::kBF16, w.get(), in * out, 0.05f, seed + 2, stream);
    launch_fill_random(CudaDType::kF32, y0.get(), rows * out, 1.0f, seed + 3, stream);
  }
  /// h = RMSNorm(residual) of the first `rows` rows by the vectorised norm kernel, on `stream`:
  /// the separate norm the fused prologues are checked against.
  void normalise(std::int64_t rows, cudaStream_t stream) const {
    launch_rms_norm(CudaDType::kBF16, residual.as<float>(), norm_weight.as<float>(),
                    static_cast<std::int32_t>(in_dim), kEps, h.get(),
                    static_cast<std::int32_t>(rows), nullptr, stream, true);
  }
  /// Copies y0's first `rows` rows into y (the starting output of an accumulating run).
  void start(const DeviceBuffer& y, std::int64_t rows, cudaStream_t stream) const {
    DICE_CUDA_CHECK(cudaMemcpyAsync(y.get(), y0.get(), static_cast<std::size_t>(rows * out_dim) * 4,
                                    cudaMemcpyDeviceToDevice, stream));
  }
  std::int64_t in_dim, out_dim;
  DeviceBuffer residual, norm_weight, w, y0, h;
  GemmNorm norm;
};

TEST_F(CudaOps, SkinnyGemmMatchesCublasLtAndIsDeterministic) {
  // Every SDAR-1.7B and -4B layer shape and one lm_head (in, out), random bf16 data made on the
  // device: the skinny kernel against cuBLASLt (within fp32 rounding: 1e-4 of the row's largest
  // magnitude), bit for bit the same over two runs and over every n-tile choice.
  struct Shape {
    std::int64_t in, out;
  };
  const Shape shapes[] = {{2048, 4096}, {2048, 2048},  {2048, 12288}, {6144, 2048},  {2560, 6144},
                          {4096, 2560}, {2560, 19456}, {9728, 2560},  {2048, 151936}};
  constexpr std::int64_t kMaxRows = kSkinnyRowsLimit;
  Gemm cublas;  // skinny off
  for (const Shape& shape : shapes) {
    const std::int64_t in = shape.in, out = shape.out;
    const GemmCase data(in, out, kMaxRows, 0x50u, stream());
    const DeviceBuffer &w = data.w, &x = data.x, &y0 = data.y0;
    DeviceBuffer y_ref(y0.bytes()), y_a(y0.bytes()), y_b(y0.bytes());
    for (const std::int64_t rows : {1, 3, 4, 8, 13, 16, 17, 33, 64})
      for (const bool accumulate : {false, true}) {
        const std::string what = data.label("skinny", rows, accumulate);
        ASSERT_TRUE(
            skinny_gemm_fits(true, rows, in, out, kMaxRows, x.get(), w.get(), y_a.as<float>()))
            << what;
        const auto reset = [&](const DeviceBuffer& y) { data.start(y, rows, out, stream()); };
        const auto want = data.reference(cublas, y_ref, rows, accumulate, stream());
        const std::vector<int> options = skinny_n_tile_options(rows, out);
        ASSERT_FALSE(options.empty()) << what;
        reset(y_a);
        launch_skinny_gemm(x.get(), w.get(), y_a.as<float>(), rows, in, out, accumulate,
                           options.front(), stream());
        synchronize();
        const auto got = download_f32(y_a, rows * out);
        EXPECT_LE(worst_row_error(got, want, rows, out), 1e-4) << what;
        for (const int n : options) {
          reset(y_b);
          launch_skinny_gemm(x.get(), w.get(), y_b.as<float>(), rows, in, out, accumulate, n,
                             stream());
          synchronize();
          const auto again = download_f32(y_b, rows * out);
          ASSERT_TRUE(same_values(again, got)) << what << ": n tiles " << n;
        }
      }
  }
}

TEST_F(CudaOps, StreamGemmMatchesCublasLtAndIsDeterministic) {
  // The streaming skinny kernel on the SDAR-1.7B/-4B layer shapes, an lm_head, a k that is not a
  // multiple of the 2,048-wide stage and a shape with fewer tiles than blocks: against cuBLASLt
  // (1e-4 of the row's largest magnitude), and bit for bit the same for every grid size, launch
  // mode and ring; the SwiGLU epilogue bit for bit the fp32 output then the SwiGLU kernel. Shapes
  // and arguments it does not take throw.
  struct Shape {
    std::int64_t in, out;
  };
  const Shape shapes[] = {{2048, 4096}, {2048, 2048}, {2048, 12288},  {6144, 2048}, {2560, 6144},
                          {4096, 2560}, {9728, 2560}, {2048, 151936}, {2080, 1024}, {96, 64}};
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  constexpr std::int64_t kMaxRows = kStreamRowsLimit;
  Gemm cublas;  // skinny off
  for (const Shape& shape : shapes) {
    const std::int64_t in = shape.in, out = shape.out;
    const GemmCase data(in, out, kMaxRows, 0x57u, stream());
    const DeviceBuffer &w = data.w, &x = data.x, &y0 = data.y0;
    DeviceBuffer y_ref(y0.bytes()), y_a(y0.bytes()), y_b(y0.bytes()),
        act_a(static_cast<std::size_t>(kMaxRows * out)), act_b(act_a.bytes());
    for (const std::int64_t rows : {1, 4, 8, 13, 16})
      for (const bool accumulate : {false, true}) {
        const std::string what = data.label("stream", rows, accumulate);
        ASSERT_TRUE(stream_gemm_fits(rows, in, out, x.get(), w.get(), y_a.get())) << what;
        const auto reset = [&](const DeviceBuffer& y) { data.start(y, rows, out, stream()); };
        const auto want = data.reference(cublas, y_ref, rows, accumulate, stream());
        reset(y_a);
        launch_stream_gemm(x.get(), w.get(), y_a.as<float>(), rows, in, out, accumulate, nullptr,
                           sms, stream(), false, false);
        synchronize();
        const auto got = download_f32(y_a, rows * out);
        EXPECT_LE(worst_row_error(got, want, rows, out), 1e-4) << what;
        // (y_ready: the old y of a block's first tile read before the wait)
        struct Variant {
          int blocks;
          bool pdl, early, y_ready;
        };
        for (const Variant v : {Variant{sms, true, true, false}, Variant{7, false, true, false},
                                Variant{1, true, false, false}, Variant{sms, true, true, true},
                                Variant{7, true, true, true}}) {
          reset(y_b);
          launch_stream_gemm(x.get(), w.get(), y_b.as<float>(), rows, in, out, accumulate, nullptr,
                             v.blocks, stream(), v.pdl, v.early, nullptr, StreamRing::kByShape,
                             nullptr, v.y_ready);
          synchronize();
          ASSERT_TRUE(same_values(download_f32(y_b, rows * out), got))
              << what << ": " << v.blocks << " blocks" << (v.y_ready ? ", y ready" : "");
        }
        // Both rings, whichever the shape takes: the same bits.
        for (const StreamRing ring : {StreamRing::kTwoOf2048, StreamRing::kThreeOf1280}) {
          reset(y_b);
          launch_stream_gemm(x.get(), w.get(), y_b.as<float>(), rows, in, out, accumulate, nullptr,
                             sms, stream(), true, true, nullptr, ring);
          synchronize();
          ASSERT_TRUE(same_values(download_f32(y_b, rows * out), got))
              << what << ": ring " << static_cast<int>(ring);
        }
        if (accumulate) continue;
        // The SwiGLU epilogue: the same sums, then swiglu.cuh's arithmetic.
        launch_swiglu(CudaDType::kBF16, y_a.as<float>(), static_cast<std::int32_t>(out / 2),
                      act_a.get(), static_cast<std::int32_t>(rows), stream());
        launch_stream_gemm(x.get(), w.get(), nullptr, rows, in, out, false, act_b.get(), sms,
                           stream(), true, true);
        synchronize();
        const auto act_count = static_cast<std::size_t>(rows * out / 2);
        ASSERT_TRUE(same_values(download(act_b, act_count, CudaDType::kBF16),
                                download(act_a, act_count, CudaDType::kBF16)))
            << what << ": SwiGLU";
      }
  }
  // Through Gemm: with a fill rule, only shapes whose tiles fill the SMs stream, and count.
  const std::int64_t wide = kStreamTileColumns * sms;  // one tile per SM: fill 1
  const GemmCase data(256, wide, 32, 0x58u, stream());
  float* y = data.y0.as<float>();
  EXPECT_FALSE(stream_gemm_fits(17, 256, wide, data.x.get(), data.w.get(), y));
  EXPECT_FALSE(stream_gemm_fits(4, 256, 56, data.x.get(), data.w.get(), y));
  EXPECT_FALSE(stream_gemm_fits(4, 240, 64, data.x.get(), data.w.get(), y));
  EXPECT_THROW(launch_stream_gemm(data.x.get(), data.w.get(), y, 17, 256, wide, false, nullptr, sms,
                                  stream(), false, false),
               Error);
  EXPECT_THROW(launch_stream_gemm(data.x.get(), data.w.get(), y, 4, 256, wide, false, nullptr, 0,
                                  stream(), false, false),
               Error);
  EXPECT_THROW(launch_stream_gemm(data.x.get(), data.w.get(), nullptr, 4, 256, wide, true, y, sms,
                                  stream(), false, false),
               Error);
  Gemm gemm(kSkinnyRowsLimit);
  EXPECT_THROW(gemm.set_stream_gemm(true, 1.5), Error);
  gemm.set_stream_gemm(true, 0.9);
  DeviceBuffer y_stream(data.y0.bytes()), y_direct(data.y0.bytes());
  gemm.run(CudaDType::kBF16, data.x.get(), data.w.get(), y_stream.as<float>(), 8, 256, wide, false,
           stream());
  EXPECT_EQ(gemm.stream_launches(), 1);
  gemm.run(CudaDType::kBF16, data.x.get(), data.w.get(), y_direct.as<float>(), 32, 256, wide, false,
           stream());  // more rows than the streaming kernel takes: the skinny kernel
  gemm.run(CudaDType::kBF16, data.x.get(), data.w.get(), y_direct.as<float>(), 8, 256, 64, false,
           stream());  // 4 tiles on every SM's slot: below the fill rule, the skinny kernel
  EXPECT_EQ(gemm.stream_launches(), 1);
  launch_stream_gemm(data.x.get(), data.w.get(), y_direct.as<float>(), 8, 256, wide, false, nullptr,
                     sms, stream(), false, false);
  synchronize();
  EXPECT_EQ(download_f32(y_stream, 8 * wide), download_f32(y_direct, 8 * wide));
}

TEST_F(CudaOps, StreamGemmSplitMatchesCublasLtAndIsDeterministic) {
  // The split walk (stream_gemm.cu) on SDAR-4B's o and down projections and small shapes on few
  // blocks: against cuBLASLt (1e-4 of the row's largest magnitude); bit for bit the same over
  // two runs, with and without PDL and early weights, on both rings; the slots left zero; the
  // SwiGLU epilogue bit for bit the fp32 output then the SwiGLU kernel. Through Gemm with
  // `split`: SDAR-4B's down projection streams, split, and gives the direct launch's bits; its o
  // projection does not stream. Refusals throw.
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  struct Shape {
    std::int64_t in, out;
    int blocks;  // 0: the SMs
  };
  const Shape shapes[] = {
      {4096, 2560, 0}, {9728, 2560, 0}, {512, 160, 7}, {2560, 208, 12}, {768, 96, 5}};
  constexpr std::int64_t kMaxRows = kStreamRowsLimit;
  Gemm cublas;  // skinny off
  for (const Shape& shape : shapes) {
    const std::int64_t in = shape.in, out = shape.out;
    const int blocks = shape.blocks > 0 ? shape.blocks : sms;
    const GemmCase data(in, out, kMaxRows, 0x5Bu, stream());
    const DeviceBuffer &w = data.w, &x = data.x, &y0 = data.y0;
    DeviceBuffer y_ref(y0.bytes()), y_a(y0.bytes()), y_b(y0.bytes()),
        act_a(static_cast<std::size_t>(kMaxRows * out)), act_b(act_a.bytes()),
        slots(stream_split_slot_bytes(blocks));
    float* const split = slots.as<float>();
    ASSERT_TRUE(stream_split_fits(in, out, blocks)) << in << " x " << out << " on " << blocks;
    for (const std::int64_t rows : {1, 4, 13, 16})
      for (const bool accumulate : {false, true}) {
        const std::string what = data.label("stream split", rows, accumulate) + " on " +
                                 std::to_string(blocks) + " blocks";
        const auto reset = [&](const DeviceBuffer& y) { data.start(y, rows, out, stream()); };
        const auto want = data.reference(cublas, y_ref, rows, accumulate, stream());
        reset(y_a);
        launch_stream_gemm(x.get(), w.get(), y_a.as<float>(), rows, in, out, accumulate, nullptr,
                           blocks, stream(), false, false, nullptr, StreamRing::kByShape, split);
        synchronize();
        const auto got = download_f32(y_a, rows * out);
        EXPECT_LE(worst_row_error(got, want, rows, out), 1e-4) << what;
        for (const StreamRing ring : {StreamRing::kTwoOf2048, StreamRing::kThreeOf1280})
          for (const bool pdl : {false, true}) {
            reset(y_b);
            launch_stream_gemm(x.get(), w.get(), y_b.as<float>(), rows, in, out, accumulate,
                               nullptr, blocks, stream(), pdl, pdl, nullptr, ring, split);
            synchronize();
            ASSERT_TRUE(same_values(download_f32(y_b, rows * out), got))
                << what << ": ring " << static_cast<int>(ring) << ", pdl " << pdl;
          }
        const auto left = download_f32(slots, static_cast<std::int64_t>(slots.bytes() / 4));
        // The slots' flags follow the blocks' 16 x 16 sums (stream_split_slot_bytes).
        const auto flags_at =
            static_cast<std::size_t>(blocks * kStreamTileColumns * kStreamTileColumns);
        for (std::size_t f = flags_at; f < left.size(); ++f)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(left[f]), 0u) << what << ": flag " << f;
        if (accumulate) continue;
        launch_swiglu(CudaDType::kBF16, y_a.as<float>(), static_cast<std::int32_t>(out / 2),
                      act_a.get(), static_cast<std::int32_t>(rows), stream());
        launch_stream_gemm(x.get(), w.get(), nullptr, rows, in, out, false, act_b.get(), blocks,
                           stream(), true, true, nullptr, StreamRing::kByShape, split);
        synchronize();
        const auto act_count = static_cast<std::size_t>(rows * out / 2);
        ASSERT_TRUE(same_values(download(act_b, act_count, CudaDType::kBF16),
                                download(act_a, act_count, CudaDType::kBF16)))
            << what << ": SwiGLU";
      }
  }
  // Refusals: a shape the walk does not take, a fused norm.
  const GemmCase data(9728, 2560, 16, 0x5Cu, stream());
  DeviceBuffer slots(stream_split_slot_bytes(sms)), y(data.y0.bytes());
  EXPECT_THROW(launch_stream_gemm(data.x.get(), data.w.get(), y.as<float>(), 4, 9728, 2048, false,
                                  nullptr, sms, stream(), false, false, nullptr,
                                  StreamRing::kByShape, slots.as<float>()),
               Error);  // 128 tiles: not more than the blocks
  const GemmNorm norm{data.y0.as<float>(), data.y0.as<float>(), 1e-6f};
  EXPECT_THROW(
      launch_stream_gemm(nullptr, data.w.get(), y.as<float>(), 4, 9728, 2560, false, nullptr, sms,
                         stream(), false, false, &norm, StreamRing::kByShape, slots.as<float>()),
      Error);
  // Through Gemm: below the fill rule, the split walk streams SDAR-4B's down projection where
  // `split` is on, not its o projection (too little saved, kStreamSplitMinSavingK).
  Gemm gemm(kSkinnyRowsLimit);
  gemm.set_stream_gemm(true, 0.9, false);
  EXPECT_FALSE(
      gemm.streams(CudaDType::kBF16, 4, 9728, 2560, data.x.get(), data.w.get(), y.as<float>()));
  gemm.set_stream_gemm(true, 0.9, true);
  ASSERT_TRUE(
      gemm.streams(CudaDType::kBF16, 4, 9728, 2560, data.x.get(), data.w.get(), y.as<float>()));
  EXPECT_FALSE(
      gemm.streams(CudaDType::kBF16, 4, 4096, 2560, data.x.get(), data.w.get(), y.as<float>()));
  DeviceBuffer y_direct(data.y0.bytes());
  gemm.run(CudaDType::kBF16, data.x.get(), data.w.get(), y.as<float>(), 4, 9728, 2560, false,
           stream());
  EXPECT_EQ(gemm.stream_launches(), 1);
  launch_stream_gemm(data.x.get(), data.w.get(), y_direct.as<float>(), 4, 9728, 2560, false,
                     nullptr, sms, stream(), false, false, nullptr, StreamRing::kByShape,
                     slots.as<float>());
  synchronize();
  EXPECT_EQ(download_f32(y, 4 * 2560), download_f32(y_direct, 4 * 2560));
}

TEST_F(CudaOps, StreamGemmDynamicTailGivesTheSameBits) {
  // The dynamic tail (StreamDynamic) on the SDAR lm_heads, SDAR-4B's gate/up and small shapes on
  // few blocks: bit for bit the whole-tile launch's outputs (and its SwiGLU epilogue's) for
  // static runs from 1 tile a block to all but the remainder, both rings, with and without PDL
  // and early weights, three launches chained without a sync between them on one pair of
  // counters, which every launch leaves zero. Through Gemm only launches whose blocks average
  // min_tiles tiles take it, and count. Refusals throw.
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  struct Shape {
    std::int64_t in, out;
    int blocks;  // 0: the SMs
  };
  const Shape shapes[] = {
      {2560, 151936, 0}, {2048, 151936, 0}, {2560, 19456, 0}, {96, 640, 7}, {2080, 1024, 5}};
  constexpr std::int64_t kMaxRows = kStreamRowsLimit;
  DeviceBuffer counters(kStreamDynamicCounterBytes);
  DICE_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
  const auto counters_left = [&] {
    std::uint32_t left[2] = {1, 1};
    DICE_CUDA_CHECK(cudaMemcpy(left, counters.get(), sizeof left, cudaMemcpyDeviceToHost));
    return left[0] == 0 && left[1] == 0;
  };
  for (const Shape& shape : shapes) {
    const std::int64_t in = shape.in, out = shape.out, tiles = out / kStreamTileColumns;
    const int blocks = shape.blocks > 0 ? shape.blocks : sms;
    const GemmCase data(in, out, kMaxRows, 0x5Du, stream());
    const DeviceBuffer &w = data.w, &x = data.x;
    DeviceBuffer y_a(data.y0.bytes()), y_b(data.y0.bytes()),
        act_a(static_cast<std::size_t>(kMaxRows * out)), act_b(act_a.bytes());
    const std::int64_t most = tiles / std::min<std::int64_t>(blocks, tiles);
    for (const std::int64_t rows : {1, 4, 16}) {
      const std::string what =
          data.label("stream dynamic", rows, false) + " on " + std::to_string(blocks) + " blocks";
      launch_stream_gemm(x.get(), w.get(), y_a.as<float>(), rows, in, out, false, nullptr, blocks,
                         stream(), false, false);
      launch_stream_gemm(x.get(), w.get(), nullptr, rows, in, out, false, act_a.get(), blocks,
                         stream(), false, false);
      synchronize();
      const auto got = download_f32(y_a, rows * out);
      const auto act_count = static_cast<std::size_t>(rows * out / 2);
      const auto act_got = download(act_a, act_count, CudaDType::kBF16);
      for (const std::int64_t static_tiles : {std::int64_t{1}, (most + 1) / 2, most})
        for (const StreamRing ring : {StreamRing::kTwoOf2048, StreamRing::kThreeOf1280})
          for (const bool pdl : {false, true}) {
            const std::string variant = fmt::format("{}: {} static tiles, ring {}, pdl {}", what,
                                                    static_tiles, static_cast<int>(ring), pdl);
            const StreamDynamic dynamic{counters.as<unsigned>(), static_tiles};
            DICE_CUDA_CHECK(cudaMemsetAsync(y_b.get(), 0xFF, y_b.bytes(), stream()));
            for (int launch = 0; launch < 3; ++launch)
              launch_stream_gemm(x.get(), w.get(), y_b.as<float>(), rows, in, out, false, nullptr,
                                 blocks, stream(), pdl, pdl, nullptr, ring, nullptr, false,
                                 &dynamic);
            DICE_CUDA_CHECK(cudaMemsetAsync(act_b.get(), 0xFF, act_b.bytes(), stream()));
            launch_stream_gemm(x.get(), w.get(), nullptr, rows, in, out, false, act_b.get(), blocks,
                               stream(), pdl, pdl, nullptr, ring, nullptr, false, &dynamic);
            synchronize();
            ASSERT_TRUE(same_values(download_f32(y_b, rows * out), got)) << variant;
            ASSERT_TRUE(same_values(download(act_b, act_count, CudaDType::kBF16), act_got))
                << variant << ": SwiGLU";
            ASSERT_TRUE(counters_left()) << variant << ": counters left set";
          }
    }
  }
  // Refusals: accumulate, a fused norm, no static tile, more static tiles than there are, no
  // counters.
  const GemmCase data(2048, 151936, 16, 0x5Eu, stream());
  DeviceBuffer y(data.y0.bytes());
  const auto refused = [&](bool accumulate, const GemmNorm* norm, StreamDynamic dynamic) {
    try {
      launch_stream_gemm(norm != nullptr ? nullptr : data.x.get(), data.w.get(), y.as<float>(), 4,
                         2048, 151936, accumulate, nullptr, sms, stream(), false, false, norm,
                         StreamRing::kByShape, nullptr, false, &dynamic);
    } catch (const Error&) {
      return true;
    }
    return false;
  };
  const GemmNorm norm{data.y0.as<float>(), data.y0.as<float>(), 1e-6f};
  const std::int64_t all = 151936 / kStreamTileColumns / sms;
  EXPECT_TRUE(refused(true, nullptr, {counters.as<unsigned>(), 8}));
  EXPECT_TRUE(refused(false, &norm, {counters.as<unsigned>(), 8}));
  EXPECT_TRUE(refused(false, nullptr, {counters.as<unsigned>(), 0}));
  EXPECT_TRUE(refused(false, nullptr, {counters.as<unsigned>(), all + 1}));
  EXPECT_TRUE(refused(false, nullptr, {nullptr, 8}));
  synchronize();
  EXPECT_TRUE(counters_left());
  // Through Gemm: the lm_head (71.9 tiles a block on 132 SMs) takes the tail at min_tiles 32,
  // SDAR-4B's gate/up (9.2) does not; the same bits as the plain launch.
  Gemm gemm(kSkinnyRowsLimit);
  EXPECT_THROW(gemm.set_stream_dynamic(1.0, 32.0), Error);
  EXPECT_THROW(gemm.set_stream_dynamic(0.25, 0.5), Error);
  gemm.set_stream_gemm(true, 0.9);
  gemm.set_stream_dynamic(0.25, 32.0);
  const std::int64_t wide_out = sms * kStreamTileColumns * 40;  // 40 tiles a block
  const GemmCase wide(2048, wide_out, 16, 0x5Fu, stream());
  DeviceBuffer y_gemm(wide.y0.bytes()), y_direct(wide.y0.bytes());
  gemm.run(CudaDType::kBF16, wide.x.get(), wide.w.get(), y_gemm.as<float>(), 4, 2048, wide_out,
           false, stream());
  EXPECT_EQ(gemm.dynamic_launches(), 1);
  gemm.run(CudaDType::kBF16, wide.x.get(), wide.w.get(), y_gemm.as<float>(), 4, 2048, wide_out,
           true, stream());  // accumulate: whole tiles
  EXPECT_EQ(gemm.dynamic_launches(), 1);
  gemm.run(CudaDType::kBF16, wide.x.get(), wide.w.get(), y_gemm.as<float>(), 4, 2048,
           sms * kStreamTileColumns * 8, false, stream());  // 8 tiles a block: below min_tiles
  EXPECT_EQ(gemm.dynamic_launches(), 1);
  EXPECT_EQ(gemm.stream_launches(), 3);
  gemm.run(CudaDType::kBF16, wide.x.get(), wide.w.get(), y_gemm.as<float>(), 4, 2048, wide_out,
           false, stream());
  launch_stream_gemm(wide.x.get(), wide.w.get(), y_direct.as<float>(), 4, 2048, wide_out, false,
                     nullptr, sms, stream(), false, false);
  synchronize();
  EXPECT_EQ(gemm.dynamic_launches(), 2);
  EXPECT_EQ(download_f32(y_gemm, 4 * wide_out), download_f32(y_direct, 4 * wide_out));
}

TEST_F(CudaOps, WgmmaGemmMatchesCublasLtAndIsDeterministic) {
  // SDAR layer shapes and a small odd one, random bf16 data made on the device: the wgmma kernel
  // at every tile width and split count against cuBLASLt (within fp32 rounding: 1e-4 of the row's
  // largest magnitude), bit for bit the same over two runs, rows past `rows` left untouched.
  if (!wgmma_gemm_supported()) GTEST_SKIP() << "the wgmma kernel is built for sm_90a only";
  const WgmmaGemm wgmma;
  struct Shape {
    std::int64_t in, out;
  };
  const Shape shapes[] = {{640, 384}, {2048, 2048}, {2048, 4096}, {6144, 2048}};
  constexpr std::int64_t kMaxRows = kWgmmaRowsLimit;
  Gemm cublas;
  for (const Shape& shape : shapes) {
    const std::int64_t in = shape.in, out = shape.out;
    const GemmCase data(in, out, kMaxRows, 0x60u, stream());
    const DeviceBuffer &w = data.w, &x = data.x, &y0 = data.y0;
    DeviceBuffer y_ref(y0.bytes()), y_a(y0.bytes()), y_b(y0.bytes());
    const auto reset = [&](const DeviceBuffer& y) {
      DICE_CUDA_CHECK(
          cudaMemcpyAsync(y.get(), y0.get(), y0.bytes(), cudaMemcpyDeviceToDevice, stream()));
    };
    synchronize();  // the fills ran on stream(), which cudaMemcpy does not wait for
    const auto all = download_f32(y0, kMaxRows * out);
    for (const std::int64_t rows : {1, 16, 17, 40, 64})
      for (const bool accumulate : {false, true}) {
        const auto want = data.reference(cublas, y_ref, rows, accumulate, stream());
        for (const int stage_k : {64, 128})
          for (const int tile_n : {64, 128})
            for (const int splits : wgmma_split_options(in, stage_k)) {
              const std::string what =
                  data.label("wgmma", rows, accumulate) + " tile_n " + std::to_string(tile_n) +
                  " splits " + std::to_string(splits) + " stage_k " + std::to_string(stage_k);
              ASSERT_TRUE(wgmma_gemm_fits(rows, in, out, tile_n, x.get(), w.get(), y_a.get()))
                  << what;
              reset(y_a);
              wgmma.launch(x.get(), w.get(), y_a.as<float>(), rows, in, out, accumulate, tile_n,
                           splits, stream(), false, false, nullptr, stage_k);
              reset(y_b);
              wgmma.launch(x.get(), w.get(), y_b.as<float>(), rows, in, out, accumulate, tile_n,
                           splits, stream(), stage_k == 128, stage_k == 128, nullptr, stage_k);
              synchronize();
              const auto got = download_f32(y_a, kMaxRows * out);
              const auto again = download_f32(y_b, kMaxRows * out);
              EXPECT_LE(worst_row_error(got, want, rows, out), 1e-4) << what;
              for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_EQ(again[i], got[i]) << what << ": second run differs at " << i;
                if (static_cast<std::int64_t>(i) >= rows * out) {
                  ASSERT_EQ(got[i], all[i]) << what << ": wrote past its rows at " << i;
                }
              }
            }
      }
  }
  EXPECT_THROW(wgmma.launch(nullptr, nullptr, nullptr, 65, 640, 384, false, 128, 1, stream()),
               Error);
  EXPECT_THROW(wgmma.launch(nullptr, nullptr, nullptr, 16, 640, 384, false, 128, 1, stream(), false,
                            false, nullptr, 96),
               Error);
  EXPECT_THROW(wgmma.launch(nullptr, nullptr, nullptr, 16, 96, 384, false, 128, 1, stream()),
               Error);
}

TEST_F(CudaOps, WgmmaMinBlockKLeavesShortBlocksToCublasLt) {
  // set_wgmma's min_block_k: shapes whose blocks stream less k (wgmma_block_k) run cuBLASLt, bit
  // for bit as a Gemm without the wgmma kernel; the others still run it. A negative limit throws.
  if (!wgmma_gemm_supported()) GTEST_SKIP() << "the wgmma kernel is built for sm_90a only";
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  constexpr std::int64_t kRows = 64, kOut = 512;
  const std::int64_t short_in = 1024, long_in = 4096;
  const std::int64_t limit = wgmma_block_k(long_in, kOut, kWgmmaTileN, sms, kWgmmaStageK);
  ASSERT_LT(wgmma_block_k(short_in, kOut, kWgmmaTileN, sms, kWgmmaStageK), limit);
  Gemm off, on;
  on.set_wgmma(true, limit);
  EXPECT_THROW(off.set_wgmma(true, -1), Error);
  for (const std::int64_t in : {short_in, long_in}) {
    const auto x =
        as_dtype(random_vector(static_cast<std::size_t>(kRows * in), 31), CudaDType::kBF16);
    const auto w =
        as_dtype(random_vector(static_cast<std::size_t>(kOut * in), 32, 0.05f), CudaDType::kBF16);
    const auto d_x = upload(x, CudaDType::kBF16), d_w = upload(w, CudaDType::kBF16);
    DeviceBuffer y_on(static_cast<std::size_t>(kRows * kOut) * 4), y_off(y_on.bytes());
    const bool taken =
        on.wgmma(CudaDType::kBF16, kRows, in, kOut, d_x.get(), d_w.get(), y_on.get());
    EXPECT_EQ(taken, in == long_in) << "in " << in;
    const std::int64_t before = on.wgmma_launches();
    on.run(CudaDType::kBF16, d_x.get(), d_w.get(), y_on.as<float>(), kRows, in, kOut, false,
           stream());
    off.run(CudaDType::kBF16, d_x.get(), d_w.get(), y_off.as<float>(), kRows, in, kOut, false,
            stream());
    synchronize();
    EXPECT_EQ(on.wgmma_launches() - before, taken ? 1 : 0) << "in " << in;
    const auto got = download_f32(y_on, kRows * kOut);
    const auto cublas = download_f32(y_off, kRows * kOut);
    if (!taken) {
      ASSERT_TRUE(same_values(got, cublas)) << "in " << in;
    } else {
      const auto want = reference_gemm(x, w, {}, static_cast<int>(kRows), static_cast<int>(in),
                                       static_cast<int>(kOut), false);
      EXPECT_LT(rel_l2(got, want), 1e-4) << "in " << in;
    }
  }
}

TEST_F(CudaOps, WgmmaGemmSwigluEpilogueIsTheGemmThenSwiglu) {
  // The wgmma kernel's SwiGLU epilogue against its fp32 output then the SwiGLU kernel: the same
  // sums and swiglu.cuh's arithmetic, so bit for bit, at every tile width and split count; with
  // PDL and early weights too (the same bits); accumulate with the epilogue throws.
  if (!wgmma_gemm_supported()) GTEST_SKIP() << "the wgmma kernel is built for sm_90a only";
  const WgmmaGemm wgmma;
  const std::int64_t in = 2048, out = 4096;
  constexpr std::int64_t kRows = kWgmmaRowsLimit;
  const GemmCase data(in, out, kRows, 0x81u, stream());
  const DeviceBuffer &x = data.x, &w = data.w;
  DeviceBuffer y(data.y0.bytes()), act_ref(static_cast<std::size_t>(kRows * out / 2) * 2),
      act(act_ref.bytes());
  for (const std::int64_t rows : {17, 40, 64})
    for (const int tile_n : {64, 128})
      for (const int splits : {1, 3, 8})
        for (const int stage_k : {64, 128})
          for (const bool pdl : {false, true}) {
            const std::string what = "rows " + std::to_string(rows) + " tile_n " +
                                     std::to_string(tile_n) + " splits " + std::to_string(splits) +
                                     " stage_k " + std::to_string(stage_k) + " pdl " +
                                     std::to_string(pdl);
            wgmma.launch(x.get(), w.get(), y.as<float>(), rows, in, out, false, tile_n, splits,
                         stream(), false, false, nullptr, stage_k);
            launch_swiglu(CudaDType::kBF16, y.as<float>(), static_cast<std::int32_t>(out / 2),
                          act_ref.get(), static_cast<std::int32_t>(rows), stream());
            DICE_CUDA_CHECK(cudaMemsetAsync(act.get(), 0xFF, act.bytes(), stream()));
            wgmma.launch(x.get(), w.get(), nullptr, rows, in, out, false, tile_n, splits, stream(),
                         pdl, pdl, act.get(), stage_k);
            synchronize();
            const auto want = download_bytes(act_ref, static_cast<std::size_t>(rows * out / 2) * 2);
            const auto got = download_bytes(act, static_cast<std::size_t>(rows * out / 2) * 2);
            ASSERT_EQ(got, want) << what;
          }
  EXPECT_THROW(wgmma.launch(x.get(), w.get(), nullptr, 40, in, out, true, 64, 1, stream(), false,
                            false, act.get()),
               Error);
}

TEST_F(CudaOps, WgmmaGemmNormFoldOutputSide) {
  // The wgmma kernel's norm-fold output side (WgmmaNormFold): y as without it (bit for bit), then
  // normed = bf16(y * norm_weight) bit for bit as the host rounds it, and the sums of squares of y
  // per 64 columns within fp32 rounding of the host's, the same bits over two runs (one with PDL
  // and early weights); at every tile width and a few split counts; rows past `rows` untouched.
  if (!wgmma_gemm_supported()) GTEST_SKIP() << "the wgmma kernel is built for sm_90a only";
  const WgmmaGemm wgmma;
  const std::int64_t in = 4096, out = 2560, parts = out / kFoldColumns;
  constexpr std::int64_t kRows = kWgmmaRowsLimit;
  DeviceBuffer x(static_cast<std::size_t>(kRows * in) * 2),
      w(static_cast<std::size_t>(in * out) * 2), y0(static_cast<std::size_t>(kRows * out) * 4),
      y_ref(y0.bytes()), y(y0.bytes()), normed(static_cast<std::size_t>(kRows * out) * 2),
      sums(static_cast<std::size_t>(kRows * parts) * 4), sums_again(sums.bytes());
  launch_fill_random(CudaDType::kBF16, x.get(), kRows * in, 1.0f, 91, stream());
  launch_fill_random(CudaDType::kBF16, w.get(), in * out, 0.02f, 92, stream());
  launch_fill_random(CudaDType::kF32, y0.get(), kRows * out, 1.0f, 93, stream());
  const auto weight = random_vector(static_cast<std::size_t>(out), 94, 0.2f);
  const DeviceBuffer d_weight = upload(weight, CudaDType::kF32);
  const auto copy = [&](const DeviceBuffer& to, const DeviceBuffer& from) {
    DICE_CUDA_CHECK(
        cudaMemcpyAsync(to.get(), from.get(), from.bytes(), cudaMemcpyDeviceToDevice, stream()));
  };
  for (const std::int64_t rows : {17, 40, 64})
    for (const int tile_n : {64, 128})
      for (const int splits : {1, 3, 4})
        for (const int stage_k : {64, 128}) {
          const std::string what = "rows " + std::to_string(rows) + " tile_n " +
                                   std::to_string(tile_n) + " splits " + std::to_string(splits) +
                                   " stage_k " + std::to_string(stage_k);
          copy(y_ref, y0);
          wgmma.launch(x.get(), w.get(), y_ref.as<float>(), rows, in, out, true, tile_n, splits,
                       stream(), false, false, nullptr, stage_k);
          WgmmaNormFold fold;
          fold.norm_weight = d_weight.as<float>();
          fold.normed = normed.get();
          fold.square_sums = sums.as<float>();
          DICE_CUDA_CHECK(cudaMemsetAsync(normed.get(), 0xFF, normed.bytes(), stream()));
          DICE_CUDA_CHECK(cudaMemsetAsync(sums.get(), 0xFF, sums.bytes(), stream()));
          copy(y, y0);
          wgmma.launch(x.get(), w.get(), y.as<float>(), rows, in, out, true, tile_n, splits,
                       stream(), false, false, nullptr, stage_k, fold);
          synchronize();
          const auto want_y = download_f32(y_ref, kRows * out);
          ASSERT_TRUE(same_values(download_f32(y, kRows * out), want_y)) << what << ": y";
          const auto got_normed =
              download(normed, static_cast<std::size_t>(kRows * out), CudaDType::kBF16);
          const auto got_sums = download_f32(sums, kRows * parts);
          for (std::int64_t r = 0; r < kRows; ++r)
            for (std::int64_t p = 0; p < parts; ++p) {
              double want_sum = 0;
              for (std::int64_t c = p * kFoldColumns; c < (p + 1) * kFoldColumns; ++c) {
                const auto i = static_cast<std::size_t>(r * out + c);
                const float v = want_y[i];
                want_sum += static_cast<double>(v) * v;
                const float want_normed =
                    model::bf16_to_f32(model::f32_to_bf16(v * weight[static_cast<std::size_t>(c)]));
                if (r < rows)
                  ASSERT_EQ(got_normed[i], want_normed) << what << " row " << r << " col " << c;
                else
                  ASSERT_TRUE(std::isnan(got_normed[i])) << what << ": normed past rows, row " << r;
              }
              const float got = got_sums[static_cast<std::size_t>(r * parts + p)];
              if (r < rows)
                ASSERT_NEAR(got, want_sum, 1e-5 * want_sum)
                    << what << " row " << r << " part " << p;
              else
                ASSERT_TRUE(std::isnan(got)) << what << ": sums past rows, row " << r;
            }
          fold.square_sums = sums_again.as<float>();
          copy(y, y0);
          wgmma.launch(x.get(), w.get(), y.as<float>(), rows, in, out, true, tile_n, splits,
                       stream(), true, true, nullptr, stage_k, fold);
          synchronize();
          ASSERT_EQ(download_bytes(sums_again, static_cast<std::size_t>(rows * parts) * 4),
                    download_bytes(sums, static_cast<std::size_t>(rows * parts) * 4))
              << what << ": second run";
        }
  WgmmaNormFold partial;  // no sums buffer
  partial.norm_weight = d_weight.as<float>();
  partial.normed = normed.get();
  EXPECT_THROW(wgmma.launch(x.get(), w.get(), y.as<float>(), 40, in, out, true, 64, 1, stream(),
                            false, false, nullptr, kWgmmaStageK, partial),
               Error);
}

TEST_F(CudaOps, WgmmaGemmNormFoldInputSide) {
  // The norm-fold input side: the SwiGLU epilogue with in_square_sums multiplies gate and up by
  // 1 / sqrt(mean square + eps) of the row's sums: bit for bit the fp32 output scaled on the host
  // with the same rounded operations, then the SwiGLU kernel; refused without SwiGLU and above
  // 4,096 inputs.
  if (!wgmma_gemm_supported()) GTEST_SKIP() << "the wgmma kernel is built for sm_90a only";
  const WgmmaGemm wgmma;
  const std::int64_t in = 2560, out = 4096, parts = in / kFoldColumns;
  const float eps = 1e-6f;
  constexpr std::int64_t kRows = kWgmmaRowsLimit;
  DeviceBuffer x(static_cast<std::size_t>(kRows * in) * 2),
      w(static_cast<std::size_t>(in * out) * 2), y(static_cast<std::size_t>(kRows * out) * 4),
      act_ref(static_cast<std::size_t>(kRows * out / 2) * 2), act(act_ref.bytes());
  launch_fill_random(CudaDType::kBF16, x.get(), kRows * in, 3.0f, 95, stream());
  launch_fill_random(CudaDType::kBF16, w.get(), in * out, 0.05f, 96, stream());
  std::vector<float> sums = random_vector(static_cast<std::size_t>(kRows * parts), 97, 30.0f);
  for (auto& s : sums) s = s * s;  // sums of squares: non-negative, up to ~1e4
  const DeviceBuffer d_sums = upload(sums, CudaDType::kF32);
  std::vector<float> scale(kRows);
  for (std::int64_t r = 0; r < kRows; ++r) {
    float even = 0.0f, odd = 0.0f;  // the kernel's order and roundings
    for (std::int64_t p = 0; p < parts; ++p)
      (p % 2 == 0 ? even : odd) += sums[static_cast<std::size_t>(r * parts + p)];
    const float mean_square = (even + odd) / static_cast<float>(in) + eps;
    scale[static_cast<std::size_t>(r)] = 1.0f / std::sqrt(mean_square);
  }
  for (const std::int64_t rows : {17, 64})
    for (const int tile_n : {64, 128})
      for (const int splits : {1, 5}) {
        const std::string what = "rows " + std::to_string(rows) + " tile_n " +
                                 std::to_string(tile_n) + " splits " + std::to_string(splits);
        wgmma.launch(x.get(), w.get(), y.as<float>(), rows, in, out, false, tile_n, splits,
                     stream(), false, false, nullptr, kWgmmaStageK);
        synchronize();
        auto scaled = download_f32(y, kRows * out);
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t c = 0; c < out; ++c)
            scaled[static_cast<std::size_t>(r * out + c)] *= scale[static_cast<std::size_t>(r)];
        const DeviceBuffer d_scaled = upload(scaled, CudaDType::kF32);
        launch_swiglu(CudaDType::kBF16, d_scaled.as<float>(), static_cast<std::int32_t>(out / 2),
                      act_ref.get(), static_cast<std::int32_t>(rows), stream());
        WgmmaNormFold fold;
        fold.in_square_sums = d_sums.as<float>();
        fold.eps = eps;
        DICE_CUDA_CHECK(cudaMemsetAsync(act.get(), 0xFF, act.bytes(), stream()));
        wgmma.launch(x.get(), w.get(), nullptr, rows, in, out, false, tile_n, splits, stream(),
                     true, true, act.get(), kWgmmaStageK, fold);
        synchronize();
        const auto n = static_cast<std::size_t>(rows * out / 2);
        ASSERT_TRUE(
            same_values(download(act, n, CudaDType::kBF16), download(act_ref, n, CudaDType::kBF16)))
            << what;
      }
  WgmmaNormFold fold;
  fold.in_square_sums = d_sums.as<float>();
  EXPECT_THROW(wgmma.launch(x.get(), w.get(), y.as<float>(), 40, in, out, false, 64, 1, stream(),
                            false, false, nullptr, kWgmmaStageK, fold),
               Error);
  DeviceBuffer wide(static_cast<std::size_t>(4160 * out) * 2);  // in 4,160 > 4,096
  EXPECT_THROW(wgmma.launch(wide.get(), wide.get(), nullptr, 1, 4160, out, false, 64, 1, stream(),
                            false, false, act.get(), 64, fold),
               Error);
}

TEST_F(CudaOps, WgmmaQkRopeEpilogueIsTheGemmThenTheQkKernel) {
  // The qkv projection's q/k epilogue (WgmmaQkRope) against the same wgmma launch into fp32 and
  // then launch_qk_norm_rope's vectorised kernel: q and both caches bit for bit (whole buffers,
  // so no slot outside the pass's rows is written), with and without the folded input norm, for
  // SDAR-1.7B's and -4B's head counts and widths, at 64 rows over a pass of 60 (the padding
  // rows skipped) and at 40, tile_n 64 (a head vector's two tiles in one cluster) and 128, the
  // rule's split count and the most, with and without PDL and early reads. Gemm::run_qk_rope
  // gives the same bits. Refused: too few splits for the rows, accumulate, stage k 64, a null
  // cache, a tile of 96 (Gemm::set_qk_rope_tile_n).
  if (!wgmma_gemm_supported()) GTEST_SKIP() << "the wgmma kernel is built for sm_90a only";
  const WgmmaGemm wgmma;
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  struct Case {
    std::int32_t heads, kv_heads;
    std::int64_t in;
  };
  const auto table = rope_table(1024, 128, 1e6);
  const DeviceBuffer d_rope = upload_rope(table);
  for (const Case& c : {Case{16, 8, 2048}, Case{32, 8, 2560}}) {
    const std::int64_t out = (c.heads + 2 * c.kv_heads) * 128, in = c.in;
    const LayerShape shape{static_cast<std::int32_t>(in), c.heads, c.kv_heads, 128, 6144, 1e-6};
    constexpr std::int64_t kRows = kWgmmaRowsLimit, kPages = 40;
    DeviceBuffer x(static_cast<std::size_t>(kRows * in) * 2),
        w(static_cast<std::size_t>(in * out) * 2), y(static_cast<std::size_t>(kRows * out) * 4);
    launch_fill_random(CudaDType::kBF16, x.get(), kRows * in, 1.0f, 131, stream());
    launch_fill_random(CudaDType::kBF16, w.get(), in * out, 0.05f, 132, stream());
    std::vector<float> sums = random_vector(static_cast<std::size_t>(kRows * in / 64), 133, 8.0f);
    for (auto& v : sums) v = v * v;
    const DeviceBuffer d_sums = upload(sums, CudaDType::kF32);
    const auto qn = rms_norm_weight(128, 134), kn = rms_norm_weight(128, 135);
    const auto d_qn = upload(qn, CudaDType::kF32), d_kn = upload(kn, CudaDType::kF32);
    const std::size_t q_bytes = static_cast<std::size_t>(kRows * c.heads * 128) * 2,
                      cache_bytes =
                          static_cast<std::size_t>(kPages * c.kv_heads * kPageTokens * 128) * 2;
    struct Outputs {
      DeviceBuffer q, k, v;
    };
    const auto fresh = [&] {
      Outputs o{DeviceBuffer(q_bytes), DeviceBuffer(cache_bytes), DeviceBuffer(cache_bytes)};
      for (const DeviceBuffer* b : {&o.q, &o.k, &o.v})
        DICE_CUDA_CHECK(cudaMemsetAsync(b->get(), 0xFF, b->bytes(), stream()));
      return o;
    };
    const auto same = [&](const Outputs& a, const Outputs& b) {
      return download_bytes(a.q, q_bytes) == download_bytes(b.q, q_bytes) &&
             download_bytes(a.k, cache_bytes) == download_bytes(b.k, cache_bytes) &&
             download_bytes(a.v, cache_bytes) == download_bytes(b.v, cache_bytes);
    };
    // Page j of the sequence is page 1 + 11 j mod 39: scattered, distinct.
    std::vector<std::int32_t> page_ids;
    for (std::int32_t j = 0; j < 31; ++j) page_ids.push_back(1 + (11 * j) % 39);
    for (const auto& [rows, pass_rows] : {std::pair<std::int64_t, int>{64, 60}, {40, 40}}) {
      const PassPlan plan =
          commit_pass(std::vector<std::int32_t>(pass_rows, 1), 900, page_ids, c.heads, c.kv_heads);
      const auto meta = upload_bytes(plan.bytes);
      for (const int tile_n : {64, 128}) {
        const int rule = wgmma_qk_rope_splits(rows, in, out, sms, 128, tile_n);
        const int per_split = static_cast<int>(kWgmmaQkRowsPerBlock) * wgmma_qk_tiles(tile_n);
        ASSERT_GT(rule, 0);
        ASSERT_LE((rows + rule - 1) / rule, per_split);
        ASSERT_LE(rule, kWgmmaQkMaxSplits);
        for (const int splits : std::set<int>{rule, kWgmmaQkMaxSplits})
          for (const bool folded : {false, true})
            for (const bool pdl : {false, true}) {
              const std::string what = "heads " + std::to_string(c.heads) + " rows " +
                                       std::to_string(rows) + " tile_n " + std::to_string(tile_n) +
                                       " splits " + std::to_string(splits) +
                                       (folded ? " folded" : "") + (pdl ? " pdl" : "");
              const float* square_sums = folded ? d_sums.as<float>() : nullptr;
              const Outputs want = fresh();
              wgmma.launch(x.get(), w.get(), y.as<float>(), rows, in, out, false, tile_n, splits,
                           stream(), false, false, nullptr, 128);
              launch_qk_norm_rope(CudaDType::kBF16, meta.as<PassHeader>(), y.as<float>(),
                                  d_qn.as<float>(), d_kn.as<float>(), d_rope.as<float2>(), shape,
                                  want.q.get(), CacheLayer{want.k.get(), want.v.get()},
                                  static_cast<std::int32_t>(rows), stream(), true, false,
                                  square_sums, static_cast<std::int32_t>(in));
              const Outputs got = fresh();
              WgmmaQkRope qk;
              qk.meta = meta.as<PassHeader>();
              qk.q_norm = d_qn.as<float>();
              qk.k_norm = d_kn.as<float>();
              qk.rope = d_rope.as<float2>();
              qk.shape = shape;
              qk.q_out = got.q.get();
              qk.cache = CacheLayer{got.k.get(), got.v.get()};
              qk.square_sums = square_sums;
              qk.fold_width = static_cast<std::int32_t>(in);
              wgmma.launch(x.get(), w.get(), nullptr, rows, in, out, false, tile_n, splits,
                           stream(), pdl, pdl, nullptr, 128, {}, qk);
              synchronize();
              ASSERT_TRUE(same(got, want)) << what;
              if (splits != rule || !folded || !pdl) continue;
              EXPECT_THROW(
                  wgmma.launch(x.get(), w.get(), nullptr, rows, in, out, false, tile_n,
                               kWgmmaQkMaxSplits + 1, stream(), false, false, nullptr, 128, {}, qk),
                  Error)
                  << what << ": more than kWgmmaQkMaxSplits";
              // Gemm picks the rule's splits; with its own PDL settings the same bits.
              Gemm gemm(16);
              gemm.set_wgmma(true);
              gemm.set_qk_rope_tile_n(tile_n);
              ASSERT_TRUE(gemm.fuses_qk_rope(CudaDType::kBF16, rows, in, shape, x.get(), w.get(),
                                             got.q.get()))
                  << what;
              const Outputs again = fresh();
              qk.q_out = again.q.get();
              qk.cache = CacheLayer{again.k.get(), again.v.get()};
              gemm.run_qk_rope(x.get(), w.get(), qk, rows, in, stream());
              synchronize();
              EXPECT_EQ(gemm.wgmma_launches(), 1);
              ASSERT_TRUE(same(again, want)) << what << ": Gemm::run_qk_rope";
              gemm.set_wgmma(true, 0, 64);
              EXPECT_FALSE(gemm.fuses_qk_rope(CudaDType::kBF16, rows, in, shape, x.get(), w.get(),
                                              got.q.get()))
                  << what << ": stage k 64";
              EXPECT_THROW(gemm.run_qk_rope(x.get(), w.get(), qk, rows, in, stream()), Error);
              // Refusals: too few splits, accumulate, a null cache.
              if (rows > per_split) {
                EXPECT_THROW(wgmma.launch(x.get(), w.get(), nullptr, rows, in, out, false, tile_n,
                                          1, stream(), false, false, nullptr, 128, {}, qk),
                             Error)
                    << what;
              }
              EXPECT_THROW(
                  wgmma.launch(x.get(), w.get(), y.as<float>(), rows, in, out, true, tile_n, splits,
                               stream(), false, false, nullptr, 128, {}, qk),
                  Error)
                  << what;
              WgmmaQkRope no_cache = qk;
              no_cache.cache.v = nullptr;
              EXPECT_THROW(wgmma.launch(x.get(), w.get(), nullptr, rows, in, out, false, tile_n,
                                        splits, stream(), false, false, nullptr, 128, {}, no_cache),
                           Error)
                  << what;
            }
      }
    }
  }
  const LayerShape narrow{256, 4, 2, 64, 512, 1e-6};  // head_dim 64: not taken
  Gemm gemm(16);
  gemm.set_wgmma(true);
  EXPECT_THROW(gemm.set_qk_rope_tile_n(96), Error);
  DeviceBuffer x(64 * 256 * 2), w(512 * 256 * 2), q(64 * 4 * 64 * 2);
  EXPECT_FALSE(gemm.fuses_qk_rope(CudaDType::kBF16, 64, 256, narrow, x.get(), w.get(), q.get()));
}

TEST_F(CudaOps, FoldedGemmRefusesWhatTheWgmmaKernelDoesNotTake) {
  // Gemm::run_folded takes folds_norm() shapes only: with the wgmma kernel off, at skinny rows
  // and with inputs the kernel's k tile does not divide it throws dice::Error and launches
  // nothing; a shape it takes runs.
  const std::int64_t in = 2048, out = 2048;
  DeviceBuffer x(static_cast<std::size_t>(64 * in) * 2), w(static_cast<std::size_t>(in * out) * 2),
      y(static_cast<std::size_t>(64 * out) * 4);
  launch_fill_random(CudaDType::kBF16, x.get(), 64 * in, 1.0f, 98, stream());
  launch_fill_random(CudaDType::kBF16, w.get(), in * out, 0.05f, 99, stream());
  Gemm off(16);  // set_wgmma never called: no wgmma kernel
  EXPECT_FALSE(off.folds_norm(CudaDType::kBF16, 64, in, out, x.get(), w.get(), y.get()));
  EXPECT_THROW(
      off.run_folded(x.get(), w.get(), y.as<float>(), nullptr, 64, in, out, false, {}, stream()),
      Error);
  if (!wgmma_gemm_supported()) GTEST_SKIP() << "the wgmma kernel is built for sm_90a only";
  Gemm on(16);  // the backend's skinny rows: 64 rows are not skinny
  on.set_wgmma(true);
  EXPECT_THROW(
      on.run_folded(x.get(), w.get(), y.as<float>(), nullptr, 16, in, out, false, {}, stream()),
      Error);  // skinny rows
  EXPECT_THROW(
      on.run_folded(x.get(), w.get(), y.as<float>(), nullptr, 64, in - 8, out, false, {}, stream()),
      Error);  // 2,040 inputs: not a multiple of kWgmmaTileK
  EXPECT_EQ(on.wgmma_launches(), 0);
  on.run_folded(x.get(), w.get(), y.as<float>(), nullptr, 64, in, out, false, {}, stream());
  synchronize();
  EXPECT_EQ(on.wgmma_launches(), 1);
}

TEST_F(CudaOps, QkNormRopeWithAFoldedInputNorm) {
  // launch_qk_norm_rope with square_sums: q, k and v projected from bf16(w x) (r times those of
  // RMSNorm(x)) give what the plain kernel gives on the unscaled projection, to bf16 rounding:
  // q and k through eps r^2, v through 1 / r. Refused for fp32 and the block-per-row layout.
  const int heads = 4, kv_heads = 2, vectors = heads + 2 * kv_heads, d = 128, rows = 8;
  const std::int32_t width = 256;
  const LayerShape shape{width, heads, kv_heads, d, 128, 1e-6};
  const std::vector<std::int32_t> tokens(rows, 1);
  const std::vector<std::int32_t> page_ids{3, 1};
  const PassPlan plan = commit_pass(tokens, 28, page_ids, heads, kv_heads);
  const auto meta = upload_bytes(plan.bytes);
  const auto qkv = random_vector(rows * vectors * d, 14, 2.0f);
  const auto qn = rms_norm_weight(d, 15), kn = rms_norm_weight(d, 16);
  // Row r's sums of squares: 4 parts of 64 columns, mean squares from ~0.3 to ~3,000.
  std::vector<float> sums(static_cast<std::size_t>(rows * width / kFoldColumns));
  for (std::size_t i = 0; i < sums.size(); ++i)
    sums[i] = 16.0f * std::pow(10.0f, static_cast<float>(i % 13) / 3.0f);
  std::vector<float> scaled = qkv;
  for (int r = 0; r < rows; ++r) {
    double total = 0;
    for (int p = 0; p < width / kFoldColumns; ++p)
      total += sums[static_cast<std::size_t>(r * 4 + p)];
    const double rms = std::sqrt(total / width + 1e-6);
    for (int i = 0; i < vectors * d; ++i)
      scaled[static_cast<std::size_t>(r * vectors * d + i)] =
          static_cast<float>(qkv[static_cast<std::size_t>(r * vectors * d + i)] * rms);
  }
  const auto table = rope_table(64, d, 1e6);
  const auto d_qn = upload(qn, CudaDType::kF32), d_kn = upload(kn, CudaDType::kF32),
             d_sums = upload(sums, CudaDType::kF32);
  const DeviceBuffer d_rope = upload_rope(table);
  const std::size_t cache_n = static_cast<std::size_t>(4 * kv_heads * kPageTokens * d);
  const auto run = [&](const std::vector<float>& input, const float* square_sums) {
    const auto d_qkv = upload(input, CudaDType::kF32);
    const auto k_cache = upload(std::vector<float>(cache_n, 0.0f), CudaDType::kBF16),
               v_cache = upload(std::vector<float>(cache_n, 0.0f), CudaDType::kBF16);
    DeviceBuffer q_out(static_cast<std::size_t>(rows * heads * d) * 2);
    launch_qk_norm_rope(CudaDType::kBF16, meta.as<PassHeader>(), d_qkv.as<float>(),
                        d_qn.as<float>(), d_kn.as<float>(), d_rope.as<float2>(), shape, q_out.get(),
                        CacheLayer{k_cache.get(), v_cache.get()}, rows, stream(), true, false,
                        square_sums, width);
    synchronize();
    return std::array{download(q_out, static_cast<std::size_t>(rows * heads * d), CudaDType::kBF16),
                      download(k_cache, cache_n, CudaDType::kBF16),
                      download(v_cache, cache_n, CudaDType::kBF16)};
  };
  const auto want = run(qkv, nullptr);
  const auto got = run(scaled, d_sums.as<float>());
  const char* names[] = {"q", "k", "v"};
  for (int t = 0; t < 3; ++t)
    for (std::size_t i = 0; i < want[t].size(); ++i)
      ASSERT_NEAR(got[t][i], want[t][i], 1e-2f * std::abs(want[t][i]) + 1e-5f)
          << "folded qk_norm_rope: " << names[t] << " at " << i;
  const auto d_qkv = upload(qkv, CudaDType::kF32);
  DeviceBuffer q_out(static_cast<std::size_t>(rows * heads * d) * 4);
  DeviceBuffer cache(cache_n * 4);
  EXPECT_THROW(launch_qk_norm_rope(CudaDType::kF32, meta.as<PassHeader>(), d_qkv.as<float>(),
                                   d_qn.as<float>(), d_kn.as<float>(), d_rope.as<float2>(), shape,
                                   q_out.get(), CacheLayer{cache.get(), cache.get()}, rows,
                                   stream(), true, false, d_sums.as<float>(), width),
               Error);
  EXPECT_THROW(launch_qk_norm_rope(CudaDType::kBF16, meta.as<PassHeader>(), d_qkv.as<float>(),
                                   d_qn.as<float>(), d_kn.as<float>(), d_rope.as<float2>(), shape,
                                   q_out.get(), CacheLayer{cache.get(), cache.get()}, rows,
                                   stream(), false, false, d_sums.as<float>(), width),
               Error);
}

TEST_F(CudaOps, SkinnyGemmStagedWeightsGiveTheSameBits) {
  // SkinnyStaging: each warp copies the rest of its weight share into shared memory before its
  // wait (with early weights), all at once or in batches of rounds. The rule stages whole shares
  // that fit in 96 KiB and nothing otherwise; the launches that stage give the plain launch's
  // bits, accumulating or not, whatever the batch (one that does not divide the share included);
  // a batch outside 0..64 throws.
  EXPECT_EQ(skinny_staged_chunks(8, 4096, 2), 12);  // SDAR-4B o: 16 chunks a warp, 4 in registers
  EXPECT_EQ(skinny_stage_bytes(12, 2), kSkinnyStageLimit);
  EXPECT_EQ(skinny_staged_chunks(8, 4096, 4), 0);   // 14 chunks x 4 tiles: over the limit
  EXPECT_EQ(skinny_staged_chunks(8, 2048, 2), 4);   // SDAR-1.7B o: 8 chunks a warp
  EXPECT_EQ(skinny_staged_chunks(8, 2048, 1), 0);   // all 8 in registers already
  EXPECT_EQ(skinny_staged_chunks(24, 2048, 2), 6);  // 2 m tiles: 2 chunks an iteration
  {
    // The launch asks for the rule's shared memory (seen in the captured kernel node), so the
    // bit comparisons below do run the staging path: SDAR-4B's o at 8 rows.
    const std::int64_t in = 4096, out = 2560, rows = 8;
    DeviceBuffer w(static_cast<std::size_t>(in * out) * 2), x(rows * in * 2), y(rows * out * 4);
    const auto shared_of = [&](int n, bool early, bool stage) {
      std::size_t shared = ~std::size_t{0};
      const auto read = [&](cudaGraph_t graph) {
        std::size_t count = 1;
        cudaGraphNode_t node = nullptr;
        DICE_CUDA_CHECK(cudaGraphGetNodes(graph, &node, &count));
        ASSERT_EQ(count, 1u);
        cudaKernelNodeParams params{};
        DICE_CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &params));
        shared = params.sharedMemBytes;
      };
      capture_graph(
          stream(),
          [&] {
            launch_skinny_gemm(x.get(), w.get(), y.as<float>(), rows, in, out, true, n, stream(),
                               true, nullptr, nullptr, early, SkinnyStaging{stage, 0});
          },
          read);
      return shared;
    };
    EXPECT_EQ(shared_of(2, true, true), kSkinnyStageLimit);
    EXPECT_EQ(shared_of(2, true, false), 0u);
    EXPECT_EQ(shared_of(2, false, true), 0u);  // staging only with early weights
    EXPECT_EQ(shared_of(4, true, true), 0u);   // over the limit: nothing staged
    for (const std::int32_t batch : {-1, 65})
      EXPECT_THROW(
          launch_skinny_gemm(x.get(), w.get(), y.as<float>(), rows, in, out, true, 2, stream(),
                             true, nullptr, nullptr, true, SkinnyStaging{true, batch}),
          Error)
          << batch;
  }
  struct Shape {
    std::int64_t in, out;
  };
  int staged_launches = 0;
  for (const Shape shape : {Shape{2048, 2048}, Shape{4096, 2560}, Shape{2048, 4096}}) {
    const std::int64_t in = shape.in, out = shape.out, most = 32;
    DeviceBuffer w(static_cast<std::size_t>(in * out) * 2),
        x(static_cast<std::size_t>(most * in) * 2), y0(static_cast<std::size_t>(most * out) * 4);
    DeviceBuffer y_plain(y0.bytes()), y_staged(y0.bytes());
    launch_fill_random(CudaDType::kBF16, w.get(), in * out, 0.05f, 0x61u, stream());
    launch_fill_random(CudaDType::kBF16, x.get(), most * in, 1.0f, 0x62u, stream());
    launch_fill_random(CudaDType::kF32, y0.get(), most * out, 1.0f, 0x63u, stream());
    for (const std::int64_t rows : {1, 4, 8, 16, 24})
      for (const bool accumulate : {false, true})
        for (const int n : skinny_n_tile_options(rows, out)) {
          const std::string what = fmt::format(
              "staged skinny gemm rows {} in {} out {} n {} acc {}", rows, in, out, n, accumulate);
          const std::size_t y_bytes = static_cast<std::size_t>(rows * out) * 4;
          for (const DeviceBuffer* y : {&y_plain, &y_staged})
            DICE_CUDA_CHECK(
                cudaMemcpyAsync(y->get(), y0.get(), y_bytes, cudaMemcpyDeviceToDevice, stream()));
          launch_skinny_gemm(x.get(), w.get(), y_plain.as<float>(), rows, in, out, accumulate, n,
                             stream());
          synchronize();
          const auto want = download_f32(y_plain, rows * out);
          for (const std::int32_t batch : {0, 1, 2, 5}) {
            DICE_CUDA_CHECK(cudaMemcpyAsync(y_staged.get(), y0.get(), y_bytes,
                                            cudaMemcpyDeviceToDevice, stream()));
            launch_skinny_gemm(x.get(), w.get(), y_staged.as<float>(), rows, in, out, accumulate, n,
                               stream(), true, nullptr, nullptr, true, SkinnyStaging{true, batch},
                               /*y_ready=*/batch % 2 == 1);  // (old y read before the wait)
            staged_launches +=
                skinny_launch_staged_chunks(SkinnyStaging{true, batch}, true, rows, in, n) > 0 ? 1
                                                                                               : 0;
            synchronize();
            const auto got = download_f32(y_staged, rows * out);
            ASSERT_TRUE(same_values(got, want))
                << what << " batch " << batch << (batch % 2 == 1 ? ", y ready" : "");
          }
        }
  }
  EXPECT_GT(staged_launches, 80);
}

TEST_F(CudaOps, SkinnyGemmFusedNormIsTheNormKernelThenTheGemm) {
  // The fused RMSNorm prologue against the vectorised norm kernel into a bf16 buffer, then the
  // skinny kernel on it: bit for bit, for every n-tile choice, at widths up to 4,096 (SDAR-1.7B,
  // -4B, -8B hidden sizes) and 1-16 rows, accumulating or not; refused shapes throw.
  struct Shape {
    std::int64_t in, out;
  };
  const Shape shapes[] = {{2048, 4096}, {2048, 12288}, {2560, 6144}, {2560, 19456}, {4096, 6144}};
  for (const Shape& shape : shapes) {
    const std::int64_t in = shape.in, out = shape.out;
    const NormGemmCase data(in, out, kGemmNormRowsLimit, 71, stream());
    const DeviceBuffer &w = data.w, &h = data.h;
    const GemmNorm& norm = data.norm;
    DeviceBuffer y_a(data.y0.bytes()), y_b(data.y0.bytes());
    for (const std::int64_t rows : {1, 4, 8, 13, 16})
      for (const bool accumulate : {false, true})
        for (const int n : skinny_n_tile_options(rows, out)) {
          if (gemm_norm_shared_bytes(rows, in) > kSkinnyNormSharedLimit) continue;
          const std::string what = "rows " + std::to_string(rows) + " in " + std::to_string(in) +
                                   " out " + std::to_string(out) + " n tiles " + std::to_string(n) +
                                   " accumulate " + std::to_string(accumulate);
          ASSERT_TRUE(skinny_norm_fits(rows, in, norm)) << what;
          for (const DeviceBuffer* y : {&y_a, &y_b}) data.start(*y, rows, stream());
          data.normalise(rows, stream());
          launch_skinny_gemm(h.get(), w.get(), y_a.as<float>(), rows, in, out, accumulate, n,
                             stream());
          launch_skinny_gemm(nullptr, w.get(), y_b.as<float>(), rows, in, out, accumulate, n,
                             stream(), false, &norm);
          synchronize();
          ASSERT_TRUE(same_values(download_f32(y_b, rows * out), download_f32(y_a, rows * out)))
              << what;
        }
  }
  DeviceBuffer residual(17 * 4128 * 4), weight(4128 * 4), w(4128 * 64 * 2), y(17 * 64 * 4);
  const GemmNorm norm{residual.as<float>(), weight.as<float>(), 1e-6f};
  EXPECT_FALSE(skinny_norm_fits(17, 2048, norm));
  EXPECT_FALSE(skinny_norm_fits(8, 4128, norm));
  EXPECT_FALSE(skinny_norm_fits(8, 2048, GemmNorm{residual.as<float>(), weight.as<float>(), 0}));
  EXPECT_THROW(launch_skinny_gemm(nullptr, w.get(), y.as<float>(), 17, 2048, 64, false, 1, stream(),
                                  false, &norm),
               Error);
  EXPECT_THROW(launch_skinny_gemm(nullptr, w.get(), y.as<float>(), 8, 4128, 64, false, 1, stream(),
                                  false, &norm),
               Error);
}

TEST_F(CudaOps, StreamGemmFusedNormIsTheNormKernelThenTheGemm) {
  // The streaming kernel's fused RMSNorm prologue against the vectorised norm kernel into a bf16
  // buffer, then the streaming kernel on it: bit for bit, with the plain and the SwiGLU epilogue,
  // accumulating or not, over the SMs and over 7 blocks with and without PDL and early weights, at
  // the SDAR-1.7B/-4B/-8B hidden sizes and a narrow one, 1-16 rows where the rows fit in shared
  // memory; refused shapes and arguments throw.
  struct Shape {
    std::int64_t in, out;
  };
  const Shape shapes[] = {{2048, 4096},  {2048, 12288}, {2560, 6144},
                          {2560, 19456}, {4096, 6144},  {96, 64}};
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  for (const Shape& shape : shapes) {
    const std::int64_t in = shape.in, out = shape.out;
    const NormGemmCase data(in, out, kStreamRowsLimit, 81, stream());
    const DeviceBuffer &w = data.w, &h = data.h;
    const GemmNorm& norm = data.norm;
    DeviceBuffer y_a(data.y0.bytes()), y_b(data.y0.bytes()),
        act_a(static_cast<std::size_t>(kStreamRowsLimit * out)), act_b(act_a.bytes());
    for (const std::int64_t rows : {1, 4, 8, 13, 16}) {
      const std::string shape_what = "rows " + std::to_string(rows) + " in " + std::to_string(in) +
                                     " out " + std::to_string(out);
      if (!stream_norm_fits(rows, in, norm)) {
        EXPECT_GT(stream_norm_shared_bytes(rows, in), 200 * 1024u) << shape_what;
        continue;
      }
      data.normalise(rows, stream());
      for (const bool accumulate : {false, true}) {
        const std::string what = shape_what + " accumulate " + std::to_string(accumulate);
        data.start(y_a, rows, stream());
        launch_stream_gemm(h.get(), w.get(), y_a.as<float>(), rows, in, out, accumulate, nullptr,
                           sms, stream(), false, false);
        synchronize();
        const auto want = download_f32(y_a, rows * out);
        struct Variant {
          int blocks;
          bool pdl, early;
        };
        for (const Variant v :
             {Variant{sms, false, false}, Variant{sms, true, true}, Variant{7, true, false}}) {
          data.start(y_b, rows, stream());
          launch_stream_gemm(nullptr, w.get(), y_b.as<float>(), rows, in, out, accumulate, nullptr,
                             v.blocks, stream(), v.pdl, v.early, &norm);
          synchronize();
          ASSERT_TRUE(same_values(download_f32(y_b, rows * out), want))
              << what << ", " << v.blocks << " blocks";
        }
        if (accumulate) continue;
        // The SwiGLU epilogue with the fused norm: the unfused kernel's activations.
        launch_stream_gemm(h.get(), w.get(), nullptr, rows, in, out, false, act_a.get(), sms,
                           stream(), false, false);
        launch_stream_gemm(nullptr, w.get(), nullptr, rows, in, out, false, act_b.get(), sms,
                           stream(), true, true, &norm);
        synchronize();
        const auto act_count = static_cast<std::size_t>(rows * out / 2);
        ASSERT_TRUE(same_values(download(act_b, act_count, CudaDType::kBF16),
                                download(act_a, act_count, CudaDType::kBF16)))
            << what << ": SwiGLU";
      }
    }
  }
  DeviceBuffer residual(16 * 4128 * 4), weight(4128 * 4), w(4128 * 64 * 2), y(16 * 64 * 4);
  const GemmNorm norm{residual.as<float>(), weight.as<float>(), 1e-6f};
  EXPECT_THROW(launch_stream_gemm(nullptr, w.get(), y.as<float>(), 4, 4128, 64, false, nullptr, sms,
                                  stream(), false, false, &norm),
               Error);
  EXPECT_THROW(launch_stream_gemm(nullptr, w.get(), y.as<float>(), 16, 4096, 64, false, nullptr,
                                  sms, stream(), false, false, &norm),
               Error);
  const GemmNorm no_eps{residual.as<float>(), weight.as<float>(), 0.0f};
  EXPECT_THROW(launch_stream_gemm(nullptr, w.get(), y.as<float>(), 4, 2048, 64, false, nullptr, sms,
                                  stream(), false, false, &no_eps),
               Error);
}

TEST_F(CudaOps, SkinnyGemmSwigluEpilogueIsTheGemmThenSwiglu) {
  // The SwiGLU epilogue against the plain kernel into fp32, then the SwiGLU kernel: bit for bit,
  // at every m-tile count (1-64 rows) and n-tile choice, on the SDAR-1.7B/-4B gate/up shapes and
  // a small one, with and without the fused norm (up to 16 rows); accumulating throws.
  struct Shape {
    std::int64_t in, inter;
  };
  const Shape shapes[] = {{2048, 6144}, {2560, 9728}, {256, 512}};
  for (const Shape& shape : shapes) {
    const std::int64_t in = shape.in, out = 2 * shape.inter;
    constexpr std::int64_t kRows = kSkinnyRowsLimit;
    DeviceBuffer x(static_cast<std::size_t>(kRows * in) * 2),
        w(static_cast<std::size_t>(in * out) * 2),
        residual(static_cast<std::size_t>(kRows * in) * 4),
        norm_weight(static_cast<std::size_t>(in) * 4), y(static_cast<std::size_t>(kRows * out) * 4),
        act_a(static_cast<std::size_t>(kRows * shape.inter) * 2), act_b(act_a.bytes());
    launch_fill_random(CudaDType::kBF16, x.get(), kRows * in, 1.0f, 81, stream());
    launch_fill_random(CudaDType::kBF16, w.get(), in * out, 0.05f, 82, stream());
    launch_fill_random(CudaDType::kF32, residual.get(), kRows * in, 3.0f, 83, stream());
    launch_fill_random(CudaDType::kF32, norm_weight.get(), in, 1.0f, 84, stream());
    constexpr double kEps = 1e-6;
    const GemmNorm norm{residual.as<float>(), norm_weight.as<float>(), static_cast<float>(kEps)};
    for (const std::int64_t rows : {1, 4, 13, 16, 29, 64})
      for (const bool normed : {false, true})
        for (const int n : skinny_n_tile_options(rows, out)) {
          if (normed && (rows > kGemmNormRowsLimit ||
                         gemm_norm_shared_bytes(rows, in) > kSkinnyNormSharedLimit))
            continue;
          const std::string what = "rows " + std::to_string(rows) + " in " + std::to_string(in) +
                                   " out " + std::to_string(out) + " n tiles " + std::to_string(n) +
                                   (normed ? " with the fused norm" : "");
          const auto inter = static_cast<std::int32_t>(shape.inter);
          if (normed) {
            launch_rms_norm(CudaDType::kBF16, residual.as<float>(), norm_weight.as<float>(),
                            static_cast<std::int32_t>(in), kEps, x.get(),
                            static_cast<std::int32_t>(rows), nullptr, stream(), true);
          }
          launch_skinny_gemm(x.get(), w.get(), y.as<float>(), rows, in, out, false, n, stream());
          launch_swiglu(CudaDType::kBF16, y.as<float>(), inter, act_a.get(),
                        static_cast<std::int32_t>(rows), stream());
          launch_skinny_gemm(normed ? nullptr : x.get(), w.get(), nullptr, rows, in, out, false, n,
                             stream(), false, normed ? &norm : nullptr, act_b.get());
          synchronize();
          ASSERT_TRUE(same_values(download(act_b, rows * shape.inter, CudaDType::kBF16),
                                  download(act_a, rows * shape.inter, CudaDType::kBF16)))
              << what;
        }
    EXPECT_THROW(launch_skinny_gemm(x.get(), w.get(), nullptr, 4, in, out, true, 1, stream(), false,
                                    nullptr, act_b.get()),
                 Error);
  }
}

TEST_F(CudaOps, SkinnyGemmDispatchAndRefusedShapesFallBack) {
  // Gemm with the skinny path on: shapes it refuses (rows over the limit, in not a multiple of
  // 32, out not of 8, fp32) run cuBLASLt, bit for bit as a Gemm with it off; taken shapes match
  // the kernel launched directly; tune() picks an n-tile choice without changing the bits.
  Gemm off, on(16);
  struct Case {
    CudaDType dtype;
    std::int64_t rows, in, out;
    bool skinny;
  };
  const Case cases[] = {
      {CudaDType::kBF16, 17, 256, 384, false}, {CudaDType::kBF16, 8, 48, 384, false},
      {CudaDType::kBF16, 8, 256, 12, false},   {CudaDType::kF32, 8, 256, 384, false},
      {CudaDType::kBF16, 8, 256, 384, true},   {CudaDType::kBF16, 16, 512, 1024, true}};
  for (const Case& c : cases) {
    const std::string what = std::string(name(c.dtype)) + " rows " + std::to_string(c.rows) +
                             " in " + std::to_string(c.in) + " out " + std::to_string(c.out);
    const auto x = as_dtype(random_vector(static_cast<std::size_t>(c.rows * c.in), 18), c.dtype);
    const auto w =
        as_dtype(random_vector(static_cast<std::size_t>(c.out * c.in), 19, 0.05f), c.dtype);
    const auto d_x = upload(x, c.dtype), d_w = upload(w, c.dtype);
    DeviceBuffer y_on(static_cast<std::size_t>(c.rows * c.out) * 4), y_off(y_on.bytes());
    EXPECT_EQ(on.skinny(c.dtype, c.rows, c.in, c.out, d_x.get(), d_w.get(), y_on.as<float>()),
              c.skinny)
        << what;
    EXPECT_FALSE(off.skinny(c.dtype, c.rows, c.in, c.out, d_x.get(), d_w.get(), y_on.as<float>()))
        << what;
    on.run(c.dtype, d_x.get(), d_w.get(), y_on.as<float>(), c.rows, c.in, c.out, false, stream());
    off.run(c.dtype, d_x.get(), d_w.get(), y_off.as<float>(), c.rows, c.in, c.out, false, stream());
    synchronize();
    const auto got = download_f32(y_on, c.rows * c.out);
    const auto cublas = download_f32(y_off, c.rows * c.out);
    if (!c.skinny) {
      ASSERT_TRUE(same_values(got, cublas)) << what;
      continue;
    }
    const auto want = reference_gemm(x, w, {}, static_cast<int>(c.rows), static_cast<int>(c.in),
                                     static_cast<int>(c.out), false);
    EXPECT_LT(rel_l2(got, want), 1e-5) << what;
    // The autotune of a skinny shape: times its n-tile choices, records them, same bits after.
    DeviceBuffer x_scratch(static_cast<std::size_t>(c.rows * c.in) * 2 + 256),
        y_scratch(y_on.bytes());
    EXPECT_GT(on.tune(c.dtype, x_scratch.get(), d_w.get(), y_scratch.as<float>(), c.rows, c.in,
                      c.out, false, stream()),
              0.0)
        << what;
    EXPECT_TRUE(on.tuned(c.dtype, c.rows, c.in, c.out, false)) << what;
    on.run(c.dtype, d_x.get(), d_w.get(), y_on.as<float>(), c.rows, c.in, c.out, false, stream());
    synchronize();
    const auto tuned = download_f32(y_on, c.rows * c.out);
    ASSERT_TRUE(same_values(tuned, got)) << what << " tuned";
  }
  const auto choices = on.choices();
  ASSERT_EQ(choices.size(), 2u);
  for (const auto& choice : choices) {
    EXPECT_TRUE(choice.skinny);
    EXPECT_GE(choice.candidates, 1);
    EXPECT_GT(choice.chosen_us, 0.0);
    const auto options = skinny_n_tile_options(choice.rows, choice.out);
    EXPECT_NE(std::find(options.begin(), options.end(), choice.skinny_n_tiles), options.end());
  }
  EXPECT_THROW(Gemm(65), Error);
  EXPECT_THROW(launch_skinny_gemm(nullptr, nullptr, nullptr, 8, 48, 384, false, 1, stream()),
               Error);
}

/// softmax(q k^T / sqrt(d)) v in double for query vector `q` (d values) of KV head `kv_head` over
/// positions [0, kv_len) of a sequence whose position p is in page pages[p / 32], slot p % 32 of
/// caches `k` and `v` laid out [page][kv_heads][32][d].
std::vector<double> attend(const float* q, const std::vector<float>& k, const std::vector<float>& v,
                           const std::vector<std::int32_t>& pages, int kv_head, int kv_heads,
                           int kv_len, int d) {
  const auto at = [&](int p) {
    return static_cast<std::size_t>(
        ((static_cast<std::int64_t>(pages[static_cast<std::size_t>(p / kPageTokens)]) * kv_heads +
          kv_head) *
             kPageTokens +
         p % kPageTokens) *
        d);
  };
  std::vector<double> scores(static_cast<std::size_t>(kv_len));
  double big = -1e300;
  for (int j = 0; j < kv_len; ++j) {
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += static_cast<double>(q[i]) * k[at(j) + i];
    scores[j] = dot / std::sqrt(static_cast<double>(d));
    big = std::max(big, scores[j]);
  }
  double sum = 0;
  for (auto& sc : scores) sum += (sc = std::exp(sc - big));
  std::vector<double> out(static_cast<std::size_t>(d), 0.0);
  for (int j = 0; j < kv_len; ++j)
    for (int i = 0; i < d; ++i) out[i] += scores[j] * v[at(j) + i];
  for (auto& o : out) o /= sum;
  return out;
}

struct AttnCase {
  CudaDType dtype;
  AttentionKernel kernel;
  int d, heads, kv_heads;
  std::int32_t target_work;           // large: split the KV ranges
  std::int32_t min_split_keys = 256;  // 0: the first planner's short splits (33-64 positions)
  std::int32_t max_splits = 0;        // the pipelined kernel's planner: most splits (0: 64)
};

const char* name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kCudaCores:
      return "simple";
    case AttentionKernel::kTensorCores:
      return "mma";
    case AttentionKernel::kTensorCoresPipelined:
      return "mma pipelined";
    case AttentionKernel::kTensorCoresPaired:
      return "mma paired";
    case AttentionKernel::kTensorCoresDeep:
      return "mma deep";
    case AttentionKernel::kTensorCoresDeepPaired:
      return "mma deep paired";
    case AttentionKernel::kTensorCoresDeepPaired8:
      return "mma deep paired, 8 warps";
  }
  return "?";
}

TEST_F(CudaOps, AttentionOverThePagedCache) {
  constexpr auto kSimple = AttentionKernel::kCudaCores;
  constexpr auto kMma = AttentionKernel::kTensorCores;
  constexpr auto kPipelined = AttentionKernel::kTensorCoresPipelined;
  constexpr auto kDeep = AttentionKernel::kTensorCoresDeep;
  constexpr auto kF32 = CudaDType::kF32;
  constexpr auto kBF16 = CudaDType::kBF16;
  const std::vector<AttnCase> cases{
      {kF32, kSimple, 16, 4, 2, 1},
      {kF32, kSimple, 128, 16, 8, 1},
      {kF32, kSimple, 128, 32, 8, 600},
      {kF32, kSimple, 64, 4, 4, 1},
      {kBF16, kSimple, 128, 16, 8, 1},
      {kBF16, kMma, 128, 16, 8, 1},
      {kBF16, kMma, 128, 32, 8, 1},
      {kBF16, kMma, 128, 32, 8, 600},
      {kBF16, kMma, 16, 4, 2, 300},
      {kBF16, kMma, 64, 4, 4, 1},
      {kBF16, kMma, 128, 32, 8, 600, 0},
      {kF32, kSimple, 128, 32, 8, 600, 0},
      {kBF16, kMma, 32, 16, 1, 1},
      {kBF16, kMma, 256, 8, 1, 100},
      {kBF16, kMma, 128, 16, 2, 1},
      // The pipelined kernel: unsplit (several pages per warp), splits of 2 pages per warp,
      // of one page per warp (the 1,008-position tile in 8), capped at 3 splits (3 pages per
      // warp), short splits down to 64 positions, every head_dim and group.
      {kBF16, kPipelined, 128, 16, 8, 1},
      {kBF16, kPipelined, 128, 16, 8, 600},
      {kBF16, kPipelined, 128, 16, 8, 4000},
      {kBF16, kPipelined, 128, 16, 8, 4000, 256, 3},
      {kBF16, kPipelined, 128, 32, 8, 4000, 64},
      {kBF16, kPipelined, 128, 32, 8, 1},
      {kBF16, kPipelined, 16, 4, 2, 300},
      {kBF16, kPipelined, 64, 4, 4, 4000, 128},
      {kBF16, kPipelined, 32, 16, 1, 1},
      {kBF16, kPipelined, 256, 8, 1, 100},
      {kBF16, kPipelined, 128, 16, 2, 4000, 0},
      // The paired kernel on plans without pairs (split and not); the deep kernel (three pages
      // in flight per warp): unsplit, split, capped, every head_dim.
      {kBF16, AttentionKernel::kTensorCoresPaired, 128, 16, 8, 1},
      {kBF16, AttentionKernel::kTensorCoresPaired, 128, 32, 8, 4000, 64},
      {kBF16, kDeep, 128, 16, 8, 1},
      {kBF16, kDeep, 128, 16, 8, 600},
      {kBF16, kDeep, 128, 16, 8, 4000, 256, 3},
      {kBF16, kDeep, 128, 32, 8, 4000, 64},
      {kBF16, kDeep, 16, 4, 2, 300},
      {kBF16, kDeep, 64, 4, 4, 4000, 128},
      {kBF16, kDeep, 32, 16, 1, 1},
      {kBF16, kDeep, 256, 8, 1, 100}};
  for (const auto& c : cases) {
    const int group = c.heads / c.kv_heads, pages = 260;
    const std::string what =
        std::string("attention ") + name(c.dtype) + " " + name(c.kernel) + " d " +
        std::to_string(c.d) + " heads " + std::to_string(c.heads) + "/" +
        std::to_string(c.kv_heads) + " target " + std::to_string(c.target_work) + " min split " +
        std::to_string(c.min_split_keys) + " max splits " + std::to_string(c.max_splits);
    // Sequences: (cached start, commit, block): a long denoising block, a fused store pass, a
    // prefill chunk, a short block, and a block at 4,204 positions (unsplit, each of 4 warps
    // streams 33 pages); pages shuffled.
    struct Seq {
      std::int64_t start, commit, block;
    };
    const std::vector<Seq> seqs{{1004, 0, 4}, {36, 4, 4},  {0, 52, 0},
                                {8, 0, 3},    {120, 8, 2}, {4200, 0, 4}};
    std::vector<std::int32_t> pool(pages - 1);
    std::iota(pool.begin(), pool.end(), 1);
    std::shuffle(pool.begin(), pool.end(), std::mt19937(11));
    std::vector<std::vector<std::int32_t>> seq_pages, tokens_commit, tokens_block;
    std::size_t next = 0;
    for (const auto& s : seqs) {
      const auto n = (s.start + s.commit + s.block + kPageTokens - 1) / kPageTokens;
      seq_pages.emplace_back(pool.begin() + static_cast<std::ptrdiff_t>(next),
                             pool.begin() + static_cast<std::ptrdiff_t>(next + n));
      next += static_cast<std::size_t>(n);
      tokens_commit.emplace_back(s.commit, 1);
      tokens_block.emplace_back(s.block, 1);
    }
    std::vector<PassItem> items(seqs.size());
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      items[i].commit = tokens_commit[i];
      items[i].block = tokens_block[i];
      items[i].start = seqs[i].start;
      items[i].block_length = 4;
      items[i].pages = seq_pages[i];
    }
    PlanShape plan_shape{c.heads,     c.kv_heads,       c.target_work,
                         4096,        c.min_split_keys, attention_split_align(c.kernel),
                         c.max_splits};
    plan_shape.split_cost = 0;  // splits wherever target_work asks: this test covers the merge
    const PassPlan plan = plan_pass(items, plan_shape);
    if (c.target_work > 1) {
      ASSERT_GT(plan.attn_combine, 0) << what;
    }
    std::int32_t most_splits = 1;
    for (const auto& cb : plan.combines()) most_splits = std::max(most_splits, cb.splits);
    if (c.max_splits > 0) {
      EXPECT_EQ(most_splits, c.max_splits) << what;
    }
    const auto meta = upload_bytes(plan.bytes);
    const std::size_t cache_n = static_cast<std::size_t>(pages) * c.kv_heads * kPageTokens * c.d;
    const auto k = as_dtype(random_vector(cache_n, 12, 1.0f), c.dtype);
    const auto v = as_dtype(random_vector(cache_n, 13, 1.0f), c.dtype);
    const auto q = as_dtype(
        random_vector(static_cast<std::size_t>(plan.rows * c.heads * c.d), 14, 1.0f), c.dtype);
    const auto d_k = upload(k, c.dtype), d_v = upload(v, c.dtype), d_q = upload(q, c.dtype);
    const std::vector<float> poison(static_cast<std::size_t>(plan.rows * c.heads * c.d),
                                    std::numeric_limits<float>::quiet_NaN());
    const auto d_out = upload(poison, c.dtype);
    DeviceBuffer partial_out(4096ull * kTileQueries * c.d * 4),
        partial_lse(4096ull * kTileQueries * 4), counters(4096ull * 4);
    DICE_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
    const LayerShape shape{c.heads * c.d, c.heads, c.kv_heads, c.d, 64, 1e-6};
    const std::int32_t grid = attention_grid(c.dtype, c.kernel, c.d);
    const auto run = [&] {
      launch_attention(c.dtype, c.kernel, meta.as<PassHeader>(), d_q.get(),
                       CacheLayer{d_k.get(), d_v.get()}, shape, d_out.get(),
                       partial_out.as<float>(), partial_lse.as<float>(),
                       counters.as<std::uint32_t>(), grid, stream());
      if (attention_needs_combine(c.kernel))
        launch_attention_combine(c.dtype, meta.as<PassHeader>(), partial_out.as<float>(),
                                 partial_lse.as<float>(), shape, d_out.get(), 4 * 132, stream());
    };
    run();
    synchronize();
    const auto got = download(d_out, poison.size(), c.dtype);
    // The same bits again (a fresh poison), and the pipelined kernel's counters back at zero.
    {
      const auto first = download_bytes(d_out, poison.size() * (c.dtype == kBF16 ? 2 : 4));
      DICE_CUDA_CHECK(cudaMemcpy(d_out.get(), upload(poison, c.dtype).get(), first.size(),
                                 cudaMemcpyDeviceToDevice));
      run();
      synchronize();
      EXPECT_EQ(download_bytes(d_out, first.size()), first) << what << ": not deterministic";
      const auto left = download_bytes(counters, counters.bytes());
      EXPECT_TRUE(
          std::all_of(left.begin(), left.end(), [](std::byte b) { return b == std::byte{0}; }))
          << what << ": merge counters not reset";
    }
    // Reference in double.
    const auto rows = std::vector<RowInfo>(
        pass_section<RowInfo>(&plan.header(), plan.header().rows_offset),
        pass_section<RowInfo>(&plan.header(), plan.header().rows_offset) + plan.rows);
    std::vector<double> want(poison.size());
    int row = 0;
    for (std::size_t s = 0; s < seqs.size(); ++s) {
      const auto n = seqs[s].commit + seqs[s].block;
      for (std::int64_t r = 0; r < n; ++r, ++row) {
        const int kv_len = rows[row].kv_len;
        for (int hq = 0; hq < c.heads; ++hq) {
          const int kvh = hq / group;
          const float* qv = q.data() + (row * c.heads + hq) * c.d;
          std::vector<double> scores(kv_len);
          double big = -1e300;
          for (int j = 0; j < kv_len; ++j) {
            const std::size_t base = static_cast<std::size_t>(
                ((seq_pages[s][j / kPageTokens] * c.kv_heads + kvh) * kPageTokens +
                 j % kPageTokens) *
                c.d);
            double dot = 0;
            for (int i = 0; i < c.d; ++i) dot += static_cast<double>(qv[i]) * k[base + i];
            scores[j] = dot / std::sqrt(static_cast<double>(c.d));
            big = std::max(big, scores[j]);
          }
          double sum = 0;
          for (auto& sc : scores) sum += (sc = std::exp(sc - big));
          for (int i = 0; i < c.d; ++i) {
            double o = 0;
            for (int j = 0; j < kv_len; ++j) {
              const std::size_t base = static_cast<std::size_t>(
                  ((seq_pages[s][j / kPageTokens] * c.kv_heads + kvh) * kPageTokens +
                   j % kPageTokens) *
                  c.d);
              o += scores[j] * v[base + i];
            }
            want[(row * c.heads + hq) * c.d + i] = o / sum;
          }
        }
      }
    }
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_FALSE(std::isnan(got[i])) << what << ": output " << i << " not written";
    const double tolerance =
        c.dtype == kF32 ? 1e-5 : (c.kernel != AttentionKernel::kCudaCores ? 1.5e-2 : 6e-3);
    EXPECT_LT(rel_l2(got, want), tolerance) << what;
    // Row by row too: an error confined to one sequence or head must not hide in the total.
    for (int r = 0; r < plan.rows; ++r) {
      const auto from = static_cast<std::ptrdiff_t>(r * c.heads * c.d);
      const std::vector<float> g(got.begin() + from, got.begin() + from + c.heads * c.d);
      const std::vector<double> w(want.begin() + from, want.begin() + from + c.heads * c.d);
      ASSERT_LT(rel_l2(g, w), 3 * tolerance) << what << ", row " << r;
    }
  }
}

/// One bf16 attention launch of `kernel` (`grid` blocks) over `plan` with Q `q` (fp32 values
/// of bf16, [rows, heads, d]) and the caches `k`, `v` on `stream`, into a NaN-poisoned output,
/// waited for; returns the output [rows, heads, d] as floats.
std::vector<float> run_bf16_attention(AttentionKernel kernel, const PassPlan& plan,
                                      const std::vector<float>& q, const DeviceBuffer& k,
                                      const DeviceBuffer& v, int heads, int kv_heads, int d,
                                      std::int32_t grid, cudaStream_t stream) {
  const auto meta = upload_bytes(plan.bytes);
  const auto d_q = upload(q, CudaDType::kBF16);
  const std::vector<float> poison(q.size(), std::numeric_limits<float>::quiet_NaN());
  const auto d_out = upload(poison, CudaDType::kBF16);
  DeviceBuffer partial_out(4096ull * kTileQueries * d * 4), partial_lse(4096ull * kTileQueries * 4),
      counters(4096ull * 4);
  DICE_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
  const LayerShape shape{heads * d, heads, kv_heads, d, 64, 1e-6};
  launch_attention(CudaDType::kBF16, kernel, meta.as<PassHeader>(), d_q.get(),
                   CacheLayer{k.get(), v.get()}, shape, d_out.get(), partial_out.as<float>(),
                   partial_lse.as<float>(), counters.as<std::uint32_t>(), grid, stream);
  DICE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return download(d_out, q.size(), CudaDType::kBF16);
}

/// Fused store passes (4 commit rows + a block of 4 each) of sequences whose blocks see
/// `contexts` positions, their pages numbered from 1 sequence by sequence (page 0: scratch).
/// The items point into the struct's vectors: not copyable.
struct StorePassItems {
  explicit StorePassItems(const std::vector<int>& contexts)
      : seq_pages(contexts.size()), commit(4, 1), block(4, 1), items(contexts.size()) {
    for (std::size_t i = 0; i < contexts.size(); ++i) {
      for (int j = 0; j < (contexts[i] + kPageTokens - 1) / kPageTokens; ++j)
        seq_pages[i].push_back(next_page++);
      items[i].commit = commit;
      items[i].block = block;
      items[i].start = contexts[i] - 8;
      items[i].block_length = 4;
      items[i].pages = seq_pages[i];
    }
  }
  StorePassItems(const StorePassItems&) = delete;
  StorePassItems& operator=(const StorePassItems&) = delete;

  std::vector<std::vector<std::int32_t>> seq_pages;
  std::vector<std::int32_t> commit, block;
  std::vector<PassItem> items;
  std::int32_t next_page = 1;  ///< one past the last page used
};

/// The largest relative L2 error over the rows of `plan` (8 rows a sequence: fused store passes)
/// of the attention output `got` [rows, heads, d] against attend() in double on the sequences'
/// pages `seq_pages`, each row over its own kv_len.
double worst_row_error(const PassPlan& plan, const std::vector<float>& q,
                       const std::vector<float>& k, const std::vector<float>& v,
                       const std::vector<std::vector<std::int32_t>>& seq_pages, int heads,
                       int kv_heads, int d, const std::vector<float>& got) {
  const auto* rows = pass_section<RowInfo>(&plan.header(), plan.header().rows_offset);
  double worst = 0;
  for (int r = 0; r < plan.rows; ++r) {
    const auto& pages = seq_pages[static_cast<std::size_t>(r / 8)];
    std::vector<double> want;
    std::vector<float> row_got;
    for (int h = 0; h < heads; ++h) {
      const auto o = attend(q.data() + (static_cast<std::size_t>(r) * heads + h) * d, k, v, pages,
                            h / (heads / kv_heads), kv_heads, rows[r].kv_len, d);
      want.insert(want.end(), o.begin(), o.end());
      const auto from = got.begin() + static_cast<std::ptrdiff_t>((r * heads + h) * d);
      row_got.insert(row_got.end(), from, from + d);
    }
    worst = std::max(worst, rel_l2(row_got, want));
  }
  return worst;
}

TEST_F(CudaOps, AttentionWithSeveralWorkItemsPerBlock) {
  // 150 sequences (fused store passes of 8 rows at contexts 64, 132, 200, ...): 1,200 work items
  // (SDAR-1.7B heads; 2,400 tiles with SDAR-4B's, paired into 1,200 items by the pipelined
  // kernel's planner), more than the persistent grid's blocks, so blocks take several items of
  // unequal page counts per warp; against the double reference, every row.
  for (const int kHeads : {16, 32}) {
    constexpr int kD = 128, kKvHeads = 8, kSequences = 150;
    const std::vector<int> some{64, 132, 200, 96, 36};
    std::vector<int> contexts;
    for (int i = 0; i < kSequences; ++i) contexts.push_back(some[static_cast<std::size_t>(i) % 5]);
    const StorePassItems pass(contexts);
    const auto& [seq_pages, commit, block, items, next_page] = pass;
    const std::size_t cache_n = static_cast<std::size_t>(next_page) * kKvHeads * kPageTokens * kD;
    const auto k = as_dtype(random_vector(cache_n, 31, 1.0f), CudaDType::kBF16);
    const auto v = as_dtype(random_vector(cache_n, 32, 1.0f), CudaDType::kBF16);
    const auto d_k = upload(k, CudaDType::kBF16), d_v = upload(v, CudaDType::kBF16);
    // The paired kernel on the pairing plan, then the deep paired kernel on it (bit for bit);
    // the pipelined one without pairs, then the paired, the deep and the deep paired kernel
    // (three pages in flight per warp) on that same plan (more items than blocks either way: no
    // splits), which must give its output bit for bit.
    std::pair<std::vector<std::byte>, std::vector<float>> pipelined, paired;
    for (const auto& [kernel, pair] : std::vector<std::pair<AttentionKernel, bool>>{
             {AttentionKernel::kTensorCoresPaired, true},
             {AttentionKernel::kTensorCoresDeepPaired, true},
             {AttentionKernel::kTensorCoresPipelined, false},
             {AttentionKernel::kTensorCoresPaired, false},
             {AttentionKernel::kTensorCoresDeep, false},
             {AttentionKernel::kTensorCoresDeepPaired, false},
             {AttentionKernel::kTensorCores, false},
             {AttentionKernel::kCudaCores, false}}) {
      const std::string what = std::string(name(kernel)) + (pair ? ", paired tiles" : "") +
                               ", heads " + std::to_string(kHeads);
      const std::int32_t grid = attention_grid(CudaDType::kBF16, kernel, kD);
      PlanShape plan_shape{kHeads, kKvHeads, grid, 4096, 256, attention_split_align(kernel), 16};
      plan_shape.pair_tiles = pair;
      const PassPlan plan = plan_pass(items, plan_shape);
      ASSERT_GT(plan.attn_work, grid) << what;
      const auto work = plan.work();
      const bool has_pairs = std::any_of(work.begin(), work.end(), [&](const AttnWork& w) {
        return w.rows * (kHeads / kKvHeads) > kTileQueries;
      });
      EXPECT_EQ(has_pairs, pair && kHeads == 32) << what;
      const auto q =
          as_dtype(random_vector(static_cast<std::size_t>(plan.rows) * kHeads * kD, 33, 1.0f),
                   CudaDType::kBF16);
      const auto got =
          run_bf16_attention(kernel, plan, q, d_k, d_v, kHeads, kKvHeads, kD, grid, stream());
      if (kernel == AttentionKernel::kTensorCoresPipelined) pipelined = {plan.bytes, got};
      if (kernel == AttentionKernel::kTensorCoresPaired && pair) paired = {plan.bytes, got};
      if (kernel == AttentionKernel::kTensorCoresDeepPaired && pair) {
        EXPECT_EQ(plan.bytes, paired.first) << what << ": not the paired plan";
        EXPECT_TRUE(got == paired.second) << what << ": other bits than paired";
      }
      if (attention_merges_splits(kernel) && !pair &&
          kernel != AttentionKernel::kTensorCoresPipelined) {
        EXPECT_EQ(plan.bytes, pipelined.first) << what << ": not the pipelined plan";
        EXPECT_TRUE(got == pipelined.second) << what << ": other bits than pipelined";
      }
      EXPECT_LT(worst_row_error(plan, q, k, v, seq_pages, kHeads, kKvHeads, kD, got), 4.5e-2)
          << what << ": worst row";
    }
  }
}

TEST_F(CudaOps, DeepPairedAttentionOverLongContexts) {
  // The backend's deep pairs (CudaBackend: SDAR-4B's fused store passes at 16 sequences): 16
  // sequences of 4 commit rows + a block of 4 at 388-2,068 positions, 32 query heads over 8 KV
  // heads, planned as the backend does (work for exactly the pairs: 128 paired items, none
  // split). Every warp pair streams 6-33 pages, so the six-page ring wraps. The 4-warp deep
  // paired kernel gives the paired kernel's bits on that plan, the 8-warp one the same bits
  // twice; all three the double reference on every row.
  constexpr int kD = 128, kHeads = 32, kKvHeads = 8, kSequences = 16;
  std::vector<int> contexts;
  for (int i = 0; i < kSequences; ++i) contexts.push_back(388 + 112 * i);
  const StorePassItems pass(contexts);
  const auto& [seq_pages, commit, block, items, next_page] = pass;
  const std::int64_t pairs = attention_paired_work_items(items, kHeads, kKvHeads);
  ASSERT_EQ(pairs, kSequences * kKvHeads);
  ASSERT_EQ(attention_work_items(items, kHeads, kKvHeads), 2 * pairs);
  const std::size_t cache_n = static_cast<std::size_t>(next_page) * kKvHeads * kPageTokens * kD;
  const auto k = as_dtype(random_vector(cache_n, 41, 1.0f), CudaDType::kBF16);
  const auto v = as_dtype(random_vector(cache_n, 42, 1.0f), CudaDType::kBF16);
  const auto d_k = upload(k, CudaDType::kBF16), d_v = upload(v, CudaDType::kBF16);
  std::vector<float> q;
  std::vector<float> paired;
  std::vector<std::byte> paired_plan;
  for (const auto kernel :
       {AttentionKernel::kTensorCoresPaired, AttentionKernel::kTensorCoresDeepPaired,
        AttentionKernel::kTensorCoresDeepPaired8}) {
    const std::string what = name(kernel);
    const std::int32_t grid = attention_grid(CudaDType::kBF16, kernel, kD);
    ASSERT_GT(grid, 0) << what;
    PlanShape plan_shape{kHeads, kKvHeads, static_cast<std::int32_t>(pairs),
                         4096,   256,      attention_split_align(kernel)};
    plan_shape.pair_tiles = true;
    const PassPlan plan = plan_pass(items, plan_shape);
    ASSERT_EQ(plan.attn_work, pairs) << what;
    ASSERT_EQ(plan.paired_items, pairs) << what;
    ASSERT_EQ(plan.attn_combine, 0) << what;
    if (q.empty())
      q = as_dtype(random_vector(static_cast<std::size_t>(plan.rows) * kHeads * kD, 43, 1.0f),
                   CudaDType::kBF16);
    const auto got =
        run_bf16_attention(kernel, plan, q, d_k, d_v, kHeads, kKvHeads, kD, grid, stream());
    if (kernel == AttentionKernel::kTensorCoresPaired) {
      paired = got;
      paired_plan = plan.bytes;
    } else {
      EXPECT_EQ(plan.bytes, paired_plan) << what << ": not the paired kernel's plan";
      // (8 warps split the pages among 4 pairs: other sums, other bits)
      if (kernel == AttentionKernel::kTensorCoresDeepPaired)
        EXPECT_TRUE(got == paired) << what << ": other bits than the paired kernel";
      else
        EXPECT_TRUE(got == run_bf16_attention(kernel, plan, q, d_k, d_v, kHeads, kKvHeads, kD, grid,
                                              stream()))
            << what << ": not the same bits twice";
    }
    EXPECT_LT(worst_row_error(plan, q, k, v, seq_pages, kHeads, kKvHeads, kD, got), 4.5e-2)
        << what << ": worst row";
  }
}

TEST_F(CudaOps, AttentionAtManySequencesOfOneShortContext) {
  // 128 sequences, each a fused store pass (4 commit rows + a block of 4) whose block sees 64
  // positions (2 pages: two of a block's 4 warps get no page), K/V/Q from the device's random
  // fill, the output poisoned and fenced by 1 MiB guard bands on both sides: every kernel and
  // both planners against the double reference on every row, the guard bands and Q unchanged.
  // (The timing test saw the first mma kernel's output differ from its reference for the last
  // sequence in exactly this setting; the reference there is computed after all variants ran.)
  constexpr int kD = 128, kKvHeads = 8, kSequences = 128, kContext = 64, kRows = 8;
  constexpr int kPagesPerSequence = kContext / kPageTokens;
  for (const int heads : {16, 32}) {
    const std::int64_t pages = kSequences * kPagesPerSequence + 1;
    const std::int64_t cache_elems = pages * kKvHeads * kPageTokens * kD;
    DeviceBuffer d_k(static_cast<std::size_t>(cache_elems * 2)),
        d_v(static_cast<std::size_t>(cache_elems * 2));
    launch_fill_random(CudaDType::kBF16, d_k.get(), cache_elems, 1.0f, 21, stream());
    launch_fill_random(CudaDType::kBF16, d_v.get(), cache_elems, 1.0f, 22, stream());
    const std::int64_t q_elems = std::int64_t{kSequences} * kRows * heads * kD;
    DeviceBuffer d_q(static_cast<std::size_t>(q_elems * 2));
    launch_fill_random(CudaDType::kBF16, d_q.get(), q_elems, 1.0f, 23, stream());
    synchronize();
    const auto k = download(d_k, static_cast<std::size_t>(cache_elems), CudaDType::kBF16);
    const auto v = download(d_v, static_cast<std::size_t>(cache_elems), CudaDType::kBF16);
    const auto q = download(d_q, static_cast<std::size_t>(q_elems), CudaDType::kBF16);
    std::vector<std::vector<std::int32_t>> seq_pages(kSequences);
    const std::vector<std::int32_t> commit(4, 1), block(4, 1);
    std::vector<PassItem> items(kSequences);
    for (int i = 0; i < kSequences; ++i) {
      auto& p = seq_pages[static_cast<std::size_t>(i)];
      for (int j = 0; j < kPagesPerSequence; ++j) p.push_back(1 + i * kPagesPerSequence + j);
      auto& item = items[static_cast<std::size_t>(i)];
      item.commit = commit;
      item.block = block;
      item.start = kContext - kRows;
      item.block_length = 4;
      item.pages = p;
    }
    const LayerShape shape{heads * kD, heads, kKvHeads, kD, 64, 1e-6};
    // The reference once per model.
    std::vector<std::vector<double>> want(static_cast<std::size_t>(kSequences) * kRows);
    for (int r = 0; r < kSequences * kRows; ++r) {
      const int kv_len = r % kRows < 4 ? kContext - 4 : kContext;
      for (int h = 0; h < heads; ++h) {
        const auto o = attend(q.data() + (static_cast<std::size_t>(r) * heads + h) * kD, k, v,
                              seq_pages[static_cast<std::size_t>(r / kRows)],
                              h / (heads / kKvHeads), kKvHeads, kv_len, kD);
        want[static_cast<std::size_t>(r)].insert(want[static_cast<std::size_t>(r)].end(), o.begin(),
                                                 o.end());
      }
    }
    for (const auto kernel :
         {AttentionKernel::kTensorCoresPipelined, AttentionKernel::kTensorCoresPaired,
          AttentionKernel::kTensorCoresDeep, AttentionKernel::kTensorCores,
          AttentionKernel::kCudaCores})
      for (const int planner : {0, 1, 2}) {  // balanced, earlier, balanced with paired tiles
        // Paired plans for the paired kernel only (the others trap on paired items).
        if ((planner == 2) != (kernel == AttentionKernel::kTensorCoresPaired)) continue;
        const bool balanced = planner != 1;
        const std::string what = std::string(name(kernel)) + ", heads " + std::to_string(heads) +
                                 (planner == 2 ? ", paired tiles"
                                  : balanced   ? ", balanced plan"
                                               : ", earlier plan");
        const std::int32_t grid = attention_grid(CudaDType::kBF16, kernel, kD);
        PlanShape plan_shape{heads, kKvHeads, grid,    4096, 256, attention_split_align(kernel),
                             16,    balanced, balanced};
        plan_shape.pair_tiles = planner == 2;
        const PassPlan plan = plan_pass(items, plan_shape);
        const auto meta = upload_bytes(plan.bytes);
        constexpr std::int64_t kGuard = 512 * 1024;  // bf16 elements per guard band (1 MiB)
        std::vector<float> poison(static_cast<std::size_t>(q_elems + 2 * kGuard),
                                  std::numeric_limits<float>::quiet_NaN());
        for (std::int64_t i = 0; i < kGuard; ++i)
          poison[static_cast<std::size_t>(i)] =
              poison[static_cast<std::size_t>(kGuard + q_elems + i)] = 1.5f;
        const auto d_fenced = upload(poison, CudaDType::kBF16);
        void* d_out = static_cast<std::uint16_t*>(d_fenced.get()) + kGuard;
        DeviceBuffer partial_out(4096ull * kTileQueries * kD * 4),
            partial_lse(4096ull * kTileQueries * 4), counters(4096ull * 4);
        DICE_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
        launch_attention(CudaDType::kBF16, kernel, meta.as<PassHeader>(), d_q.get(),
                         CacheLayer{d_k.get(), d_v.get()}, shape, d_out, partial_out.as<float>(),
                         partial_lse.as<float>(), counters.as<std::uint32_t>(), grid, stream());
        synchronize();
        const auto fenced =
            download(d_fenced, static_cast<std::size_t>(q_elems + 2 * kGuard), CudaDType::kBF16);
        EXPECT_TRUE(
            std::all_of(fenced.begin(), fenced.begin() + kGuard, [](float x) { return x == 1.5f; }))
            << what << ": wrote before the output";
        EXPECT_TRUE(
            std::all_of(fenced.end() - kGuard, fenced.end(), [](float x) { return x == 1.5f; }))
            << what << ": wrote past the output";
        EXPECT_EQ(download(d_q, static_cast<std::size_t>(q_elems), CudaDType::kBF16), q)
            << what << ": Q changed";
        const std::vector<float> got(fenced.begin() + kGuard, fenced.end() - kGuard);
        int bad = 0;
        for (int r = 0; r < kSequences * kRows; ++r) {
          const auto from = got.begin() + static_cast<std::ptrdiff_t>(r) * heads * kD;
          const std::vector<float> row(from, from + static_cast<std::ptrdiff_t>(heads) * kD);
          const double error = rel_l2(row, want[static_cast<std::size_t>(r)]);
          if (!(error < 4.5e-2) && ++bad <= 4) {
            double norm = 0;
            int nans = 0;
            for (const float x : row) {
              nans += std::isnan(x) ? 1 : 0;
              norm += std::isnan(x) ? 0.0 : static_cast<double>(x) * x;
            }
            ADD_FAILURE() << what << ": row " << r << " (sequence " << r / kRows << ") rel. L2 "
                          << error << ", " << nans << " NaN, norm " << std::sqrt(norm);
          }
        }
        EXPECT_EQ(bad, 0) << what << ": rows off the reference";
      }
  }
}

/// The comma-separated integers of environment variable `name`, or `fallback` when it is unset
/// (the timing tests' knobs).
std::vector<int> env_ints(const char* name, std::vector<int> fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  std::vector<int> values;
  std::string s(text);
  for (std::size_t at = 0; at <= s.size();) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    if (comma > at) values.push_back(std::stoi(s.substr(at, comma - at)));
    at = comma + 1;
  }
  return values.empty() ? fallback : values;
}

/// Time (us) of one replay of what `body` enqueues on `stream` (and on streams it forks from and
/// joins back to `stream`), captured as one CUDA graph: `warmups` replays, then the median of
/// `replays` replays' event times.
double captured_graph_us(cudaStream_t stream, int warmups, int replays,
                         const std::function<void()>& body) {
  const GraphExec graph = capture_graph(stream, body);
  for (int i = 0; i < warmups; ++i) graph.launch(stream);
  std::vector<double> times;
  for (int i = 0; i < replays; ++i) {
    Event start, stop;
    start.record(stream);
    graph.launch(stream);
    stop.record(stream);
    DICE_CUDA_CHECK(cudaStreamSynchronize(stream));
    times.push_back(stop.since(start) * 1000.0);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Per-launch time (us) of `launch(0) .. launch(launches - 1)` captured on `stream` as one CUDA
/// graph (captured_graph_us over `launches`).
double graph_replay_us(cudaStream_t stream, int launches, int warmups, int replays,
                       const std::function<void(std::int64_t)>& launch) {
  return captured_graph_us(stream, warmups, replays,
                           [&] {
                             for (int i = 0; i < launches; ++i) launch(i);
                           }) /
         launches;
}

// What cuBLASLt configurations beyond its heuristic's list would give the engine's many-row
// GEMMs (not a check: skipped unless DICE_GEMM_SEARCH is set). For each SDAR-1.7B/-4B layer
// shape at DICE_GEMM_SEARCH_ROWS rows (default 64, 512, 640): the heuristic's first choice (the
// reference bits), its list (BEST_FIT, up to 64), the list in CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID
// mode for each algorithm id of the list, that list with cluster shapes 1x1x1, 2x1x1 and 1x2x1
// (measured not to pay in decoding), and every (tile, stages, cluster shape) of the first
// choice's algorithm id that cublasLtMatmulAlgoCheck accepts, with split-K 1 or each count of
// DICE_GEMM_SEARCH_SPLITK (a comma list; counts above 1 with reduction schemes 1 and 2; at most
// 3,000; DICE_GEMM_SEARCH_ENUMERATE=0 leaves these out). Each candidate: one run (its bits
// against the reference's), then the median of 5 graph replays of 10 launches. Prints the
// fastest with the reference's bits and the fastest of any bits per source, and the fastest of
// each split-K count (bench/results/2026-11-24-split-norm-h100).
TEST_F(CudaOps, GemmConfigSearch) {
  if (std::getenv("DICE_GEMM_SEARCH") == nullptr)
    GTEST_SKIP() << "set DICE_GEMM_SEARCH=1 to time cuBLASLt configurations per layer shape";
  struct Shape {
    const char* name;
    int in, out;
    bool accumulate, bf16_out;
  };
  const Shape shapes[] = {
      {"1.7B qkv", 2048, 4096, false, false},     {"1.7B o", 2048, 2048, true, false},
      {"1.7B gate/up", 2048, 12288, false, true}, {"1.7B down", 6144, 2048, true, false},
      {"4B qkv", 2560, 6144, false, false},       {"4B o", 4096, 2560, true, false},
      {"4B gate/up", 2560, 19456, false, true},   {"4B down", 9728, 2560, true, false}};
  // cuBLASLt objects destroyed when leaving scope, an ASSERT's early return included.
  const auto owned = [](auto* object, auto destroy) {
    return std::unique_ptr<std::remove_pointer_t<decltype(object)>, decltype(destroy)>(object,
                                                                                       destroy);
  };
  cublasLtHandle_t handle = nullptr;
  DICE_CUBLAS_CHECK(cublasLtCreate(&handle));
  const auto handle_owner = owned(handle, &cublasLtDestroy);
  DeviceBuffer workspace(64ull << 20);
  const std::uint64_t workspace_bytes = workspace.bytes();
  for (const int rows : env_ints("DICE_GEMM_SEARCH_ROWS", {64, 512, 640}))
    for (const Shape& g : shapes) {
      DeviceBuffer x(static_cast<std::size_t>(rows) * g.in * 2),
          w(static_cast<std::size_t>(g.out) * g.in * 2),
          y(static_cast<std::size_t>(rows) * g.out * 4);
      launch_fill_random(CudaDType::kBF16, x.get(), rows * g.in, 1.0f, 0x71u, stream());
      launch_fill_random(CudaDType::kBF16, w.get(), static_cast<std::int64_t>(g.out) * g.in, 0.05f,
                         0x72u, stream());
      cublasLtMatmulDesc_t desc = nullptr;
      cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
      DICE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const auto desc_owner = owned(desc, &cublasLtMatmulDescDestroy);
      const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
      DICE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                       &transpose, sizeof transpose));
      DICE_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none));
      const cudaDataType_t out_type = g.bf16_out ? CUDA_R_16BF : CUDA_R_32F;
      DICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, g.in, g.out, g.in));
      const auto a_owner = owned(a, &cublasLtMatrixLayoutDestroy);
      DICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, g.in, rows, g.in));
      const auto b_owner = owned(b, &cublasLtMatrixLayoutDestroy);
      DICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c, out_type, g.out, rows, g.out));
      const auto c_owner = owned(c, &cublasLtMatrixLayoutDestroy);
      const auto heuristic = [&](std::uint32_t mode, const cublasLtMatmulAlgo_t* seed) {
        cublasLtMatmulPreference_t preference = nullptr;
        DICE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
        DICE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
            preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
            sizeof workspace_bytes));
        DICE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
            preference, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &mode, sizeof mode));
        std::vector<cublasLtMatmulHeuristicResult_t> results(64);
        if (seed != nullptr)
          for (auto& r : results) r.algo = *seed;
        int found = 0;
        const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
            handle, desc, a, b, c, c, preference, static_cast<int>(results.size()), results.data(),
            &found);
        cublasLtMatmulPreferenceDestroy(preference);
        std::vector<cublasLtMatmulAlgo_t> algos;
        if (status != CUBLAS_STATUS_SUCCESS) return algos;
        for (int i = 0; i < found; ++i)
          if (results[i].state == CUBLAS_STATUS_SUCCESS &&
              results[i].workspaceSize <= workspace_bytes)
            algos.push_back(results[i].algo);
        return algos;
      };
      const float alpha = 1.0f, beta = g.accumulate ? 1.0f : 0.0f;
      const std::size_t y_bytes = static_cast<std::size_t>(rows) * g.out * (g.bf16_out ? 2 : 4);
      const auto run = [&](const cublasLtMatmulAlgo_t& algo) {
        return cublasLtMatmul(handle, desc, &alpha, w.get(), a, x.get(), b, &beta, y.get(), c,
                              y.get(), c, &algo, workspace.get(), workspace_bytes, stream());
      };
      const auto output_of = [&](const cublasLtMatmulAlgo_t& algo) {
        std::vector<unsigned char> bytes;
        DICE_CUDA_CHECK(cudaMemsetAsync(y.get(), 0, y_bytes, stream()));
        if (run(algo) != CUBLAS_STATUS_SUCCESS) return bytes;
        bytes.resize(y_bytes);
        DICE_CUDA_CHECK(
            cudaMemcpyAsync(bytes.data(), y.get(), y_bytes, cudaMemcpyDeviceToHost, stream()));
        synchronize();
        return bytes;
      };
      const auto time_of = [&](const cublasLtMatmulAlgo_t& algo) {
        return graph_replay_us(stream(), 10, 2, 5,
                               [&](std::int64_t) { DICE_CUBLAS_CHECK(run(algo)); });
      };
      const auto best = heuristic(CUBLASLT_SEARCH_BEST_FIT, nullptr);
      ASSERT_FALSE(best.empty()) << g.name;
      const auto reference = output_of(best[0]);
      const double reference_us = time_of(best[0]);
      struct Source {
        std::string name;
        std::vector<cublasLtMatmulAlgo_t> algos;
      };
      std::vector<Source> sources{{"best_fit", best}};
      // LIMITED_BY_ALGO_ID for each algorithm id the BEST_FIT list names.
      std::vector<int> ids;
      for (const auto& algo : best) {
        const int id = algo_config(algo, CUBLASLT_ALGO_CONFIG_ID);
        if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
      }
      Source limited{"limited_by_id", {}};
      for (const int id : ids) {
        cublasLtMatmulAlgo_t seed{};
        if (cublasLtMatmulAlgoInit(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF,
                                   out_type, out_type, id, &seed) != CUBLAS_STATUS_SUCCESS)
          continue;
        for (const auto& algo : heuristic(CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID, &seed))
          limited.algos.push_back(algo);
      }
      sources.push_back(limited);
      // The BEST_FIT list with cluster shapes 1x1x1, 2x1x1 and 1x2x1 too.
      Source clustered{"best_fit+clusters", best};
      for (const auto& listed : best)
        for (const std::uint16_t cluster :
             {static_cast<std::uint16_t>(CUBLASLT_CLUSTER_SHAPE_1x1x1),
              static_cast<std::uint16_t>(CUBLASLT_CLUSTER_SHAPE_2x1x1),
              static_cast<std::uint16_t>(CUBLASLT_CLUSTER_SHAPE_1x2x1)}) {
          cublasLtMatmulAlgo_t algo = listed;
          cublasLtMatmulHeuristicResult_t checked{};
          if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
                                                   &cluster,
                                                   sizeof cluster) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulAlgoCheck(handle, desc, a, b, c, c, &algo, &checked) ==
                  CUBLAS_STATUS_SUCCESS &&
              checked.workspaceSize <= workspace_bytes)
            clustered.algos.push_back(algo);
        }
      sources.push_back(clustered);
      // Every (tile, stages, cluster) of the first choice's id, split-K 1, its other settings.
      Source all{"enumerated", {}};
      if (std::getenv("DICE_GEMM_SEARCH_ENUMERATE") == nullptr ||
          std::string(std::getenv("DICE_GEMM_SEARCH_ENUMERATE")) != "0") {
        const cublasLtMatmulAlgo_t first = best[0];
        const auto cap_list = [&](cublasLtMatmulAlgoCapAttributes_t what) {
          std::size_t needed = 0;
          cublasLtMatmulAlgoCapGetAttribute(&first, what, nullptr, 0, &needed);
          std::vector<std::uint32_t> values(needed / sizeof(std::uint32_t));
          std::size_t written = 0;
          if (!values.empty() &&
              cublasLtMatmulAlgoCapGetAttribute(&first, what, values.data(),
                                                values.size() * sizeof(std::uint32_t),
                                                &written) != CUBLAS_STATUS_SUCCESS)
            values.clear();
          return values;
        };
        const auto tiles = cap_list(CUBLASLT_ALGO_CAP_TILE_IDS);
        auto stages = cap_list(CUBLASLT_ALGO_CAP_STAGES_IDS);
        if (stages.empty())
          stages.push_back(
              static_cast<std::uint32_t>(algo_config(first, CUBLASLT_ALGO_CONFIG_STAGES_ID)));
        const std::uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1,
                                          CUBLASLT_CLUSTER_SHAPE_2x1x1,
                                          CUBLASLT_CLUSTER_SHAPE_1x2x1};
        int checked_ok = 0, check_failed = 0;
        // (split-K count, reduction scheme): split-K 1 takes none, more take schemes 1 and 2.
        std::vector<std::pair<std::int32_t, std::uint32_t>> splits;
        for (const int split : env_ints("DICE_GEMM_SEARCH_SPLITK", {1}))
          for (const std::uint32_t scheme :
               split == 1 ? std::vector<std::uint32_t>{0} : std::vector<std::uint32_t>{1, 2})
            splits.emplace_back(split, scheme);
        for (const auto& [split, scheme] : splits)
          for (const std::uint32_t tile : tiles)
            for (const std::uint32_t stage : stages)
              for (const std::uint16_t cluster : clusters) {
                if (all.algos.size() >= 3000) break;
                cublasLtMatmulAlgo_t algo = first;
                const bool set =
                    cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                                         sizeof tile) == CUBLAS_STATUS_SUCCESS &&
                    cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID,
                                                         &stage,
                                                         sizeof stage) == CUBLAS_STATUS_SUCCESS &&
                    cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                         &split,
                                                         sizeof split) == CUBLAS_STATUS_SUCCESS &&
                    cublasLtMatmulAlgoConfigSetAttribute(
                        &algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster) ==
                        CUBLAS_STATUS_SUCCESS &&
                    cublasLtMatmulAlgoConfigSetAttribute(
                        &algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme) ==
                        CUBLAS_STATUS_SUCCESS;
                cublasLtMatmulHeuristicResult_t checked{};
                if (set &&
                    cublasLtMatmulAlgoCheck(handle, desc, a, b, c, c, &algo, &checked) ==
                        CUBLAS_STATUS_SUCCESS &&
                    checked.workspaceSize <= workspace_bytes) {
                  all.algos.push_back(algo);
                  ++checked_ok;
                } else {
                  ++check_failed;
                }
              }
        std::printf(
            "%s rows %d: algo %d caps: %zu tiles, %zu stages; %d configs pass the check, "
            "%d do not\n",
            g.name, rows, algo_config(first, CUBLASLT_ALGO_CONFIG_ID), tiles.size(), stages.size(),
            checked_ok, check_failed);
      }
      sources.push_back(all);
      const double flops = 2.0 * rows * g.in * g.out;
      std::printf(
          "%s rows %d: heuristic first %.2f us (%.0f TFLOP/s) tile %d stages %d cluster %d\n",
          g.name, rows, reference_us, flops / reference_us * 1e-6,
          algo_config(best[0], CUBLASLT_ALGO_CONFIG_TILE_ID),
          algo_config(best[0], CUBLASLT_ALGO_CONFIG_STAGES_ID),
          algo_config(best[0], CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
      for (const Source& source : sources) {
        double same_us = reference_us, any_us = reference_us;
        int same = 0, ran = 0;
        cublasLtMatmulAlgo_t same_algo = best[0], any_algo = best[0];
        std::map<int, std::pair<double, cublasLtMatmulAlgo_t>> per_split;  // fastest per split-K
        for (const auto& algo : source.algos) {
          const auto bytes = output_of(algo);
          if (bytes.empty()) continue;
          ++ran;
          const double us = time_of(algo);
          if (const auto [it, added] = per_split.try_emplace(
                  algo_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), us, algo);
              !added && us < it->second.first)
            it->second = {us, algo};
          const bool same_bits = bytes == reference;
          same += same_bits ? 1 : 0;
          if (same_bits && us < same_us) {
            same_us = us;
            same_algo = algo;
          }
          if (us < any_us) {
            any_us = us;
            any_algo = algo;
          }
        }
        const auto describe = [&](const cublasLtMatmulAlgo_t& algo) {
          return fmt::format("id {} tile {} stages {} cluster {} splitk {} swizzle {}",
                             algo_config(algo, CUBLASLT_ALGO_CONFIG_ID),
                             algo_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                             algo_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                             algo_config(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
                             algo_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                             algo_config(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING));
        };
        std::printf(
            "  %-13s %4zu candidates, %4d ran, %4d same bits: same-bits best %.2f us (x%.3f; "
            "%s); any bits best %.2f us (x%.3f; %s)\n",
            source.name.c_str(), source.algos.size(), ran, same, same_us, reference_us / same_us,
            describe(same_algo).c_str(), any_us, reference_us / any_us, describe(any_algo).c_str());
        for (const auto& [sk, best_of] : per_split)
          std::printf("    splitk %d best %.2f us (x%.3f; %s reduction %d)\n", sk, best_of.first,
                      reference_us / best_of.first, describe(best_of.second).c_str(),
                      algo_config(best_of.second, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME));
      }
      std::fflush(stdout);
    }
}

// Per-launch skinny GEMM times (not a check: skipped unless DICE_SKINNY_TIMINGS is set; run on
// the device by bench/device_skinny_sweep.sh). SDAR-1.7B and -4B layer shapes at 4 and 16 rows
// (1 and 4 sequences of a block of 4; DICE_SKINNY_ROWS: other counts up to 64, a comma list):
// every n-tile choice, cuBLASLt's heuristic choice and cuBLASLt's choice after Gemm::tune, and the
// streaming kernel (stream_gemm.h) where it takes the shape. The
// launches of one graph rotate over as many copies of the weights as fill 512 MiB, so that weights
// come from HBM as in a forward (L2 holds 50 MiB); the time is the graph replay's over its
// launches, median of 7 replays. GB/s: weight bytes over that time, next to the copy bandwidth
// measured in the same run (measure_copy_bandwidth). DICE_SKINNY_SHAPE (e.g. "1.7b gate_up"):
// that shape only (for Nsight Compute runs of one kernel). DICE_SKINNY_WGMMA_ONLY=1: the wgmma
// kernel only; DICE_SKINNY_WGMMA_TILES / DICE_SKINNY_WGMMA_SPLITS / DICE_SKINNY_WGMMA_STAGE_K
// (comma lists; stage k default kWgmmaStageK): those tile widths / split counts / k per stage
// only; DICE_SKINNY_WGMMA_PDL=1: each launch programmatic with early weights, as in the engine. The
// wgmma rows name c<clusters>/<how many can be resident at once> (WgmmaGemm::max_active_clusters;
// bench/results/2026-11-28-wgmma-balanced-h200). "4b up" is SDAR-4B's up projection alone: the down
// projection's weight bytes in short rows. "1.7b lm_head" and "4b lm_head" (vocabulary 151,936)
// run only when DICE_SKINNY_SHAPE names them.
TEST_F(CudaOps, SkinnyGemmTimings) {
  if (std::getenv("DICE_SKINNY_TIMINGS") == nullptr)
    GTEST_SKIP() << "set DICE_SKINNY_TIMINGS=1 to time the skinny GEMM's tile and split choices";
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  const double copy = measure_copy_bandwidth(0, 1ll << 30, 5);
  std::printf("copy bandwidth %.0f GB/s, %d SMs\n", copy / 1e9, sms);
  std::printf("%-12s %4s %6s %6s %-22s %9s %8s %7s\n", "shape", "rows", "in", "out", "kernel", "us",
              "GB/s", "x copy");
  struct Shape {
    const char* name;
    std::int64_t in, out;
    bool accumulate;
    bool named_only = false;  ///< timed only when DICE_SKINNY_SHAPE names it (lm_heads)
  };
  const Shape shapes[] = {{"1.7b qkv", 2048, 4096, false},
                          {"1.7b o", 2048, 2048, true},
                          {"1.7b gate_up", 2048, 12288, false},
                          {"1.7b down", 6144, 2048, true},
                          {"4b qkv", 2560, 6144, false},
                          {"4b o", 4096, 2560, true},
                          {"4b gate_up", 2560, 19456, false},
                          {"4b down", 9728, 2560, true},
                          {"4b up", 2560, 9728, false},
                          {"1.7b lm_head", 2048, 151936, false, true},
                          {"4b lm_head", 2560, 151936, false, true}};
  constexpr std::int64_t kPoolBytes = 512ll << 20;
  Gemm cublas, tuned;
  std::optional<WgmmaGemm> wgmma;  // sm_90 only
  if (wgmma_gemm_supported()) wgmma.emplace();
  const char* only = std::getenv("DICE_SKINNY_SHAPE");  // one shape's name, e.g. "1.7b o"
  for (const Shape& shape : shapes) {
    if (only != nullptr ? std::string(only) != shape.name : shape.named_only) continue;
    const std::int64_t weight_bytes = shape.in * shape.out * 2;
    const std::int64_t copies = std::max<std::int64_t>(2, kPoolBytes / weight_bytes);
    DeviceBuffer w(static_cast<std::size_t>(copies * weight_bytes)),
        x(static_cast<std::size_t>(64 * shape.in * 2)),
        y(static_cast<std::size_t>(64 * shape.out * 4));
    launch_fill_random(CudaDType::kBF16, w.get(), copies * shape.in * shape.out, 0.05f, 61,
                       stream());
    launch_fill_random(CudaDType::kBF16, x.get(), 64 * shape.in, 1.0f, 62, stream());
    DICE_CUDA_CHECK(cudaMemset(y.get(), 0, y.bytes()));
    const auto weights = [&](std::int64_t i) {
      return static_cast<const char*>(w.get()) + (i % copies) * weight_bytes;
    };
    const int launches = static_cast<int>(std::max<std::int64_t>(copies, 24));
    for (const int rows : env_ints("DICE_SKINNY_ROWS", {4, 16})) {
      const auto time = [&](const std::function<void(std::int64_t)>& launch) {
        launch(0);
        synchronize();
        return graph_replay_us(stream(), launches, 1, 7, launch);
      };
      const auto print = [&](const std::string& kernel, double us) {
        const double rate = static_cast<double>(weight_bytes) / (us * 1e-6);
        std::printf("%-12s %4lld %6lld %6lld %-22s %9.2f %8.0f %7.3f\n", shape.name,
                    static_cast<long long>(rows), static_cast<long long>(shape.in),
                    static_cast<long long>(shape.out), kernel.c_str(), us, rate / 1e9, rate / copy);
        std::fflush(stdout);
      };
      const bool wgmma_only = std::getenv("DICE_SKINNY_WGMMA_ONLY") != nullptr;
      if (!wgmma_only) {
        print("cublaslt", time([&](std::int64_t i) {
                cublas.run(CudaDType::kBF16, x.get(), weights(i), y.as<float>(), rows, shape.in,
                           shape.out, shape.accumulate, stream());
              }));
        DeviceBuffer x_scratch(x.bytes()), y_scratch(y.bytes());
        tuned.tune(CudaDType::kBF16, x_scratch.get(), weights(0), y_scratch.as<float>(), rows,
                   shape.in, shape.out, shape.accumulate, stream());
        print("cublaslt tuned", time([&](std::int64_t i) {
                tuned.run(CudaDType::kBF16, x.get(), weights(i), y.as<float>(), rows, shape.in,
                          shape.out, shape.accumulate, stream());
              }));
        for (const int n : skinny_n_tile_options(rows, shape.out))
          print("skinny n" + std::to_string(n), time([&](std::int64_t i) {
                  launch_skinny_gemm(x.get(), weights(i), y.as<float>(), rows, shape.in, shape.out,
                                     shape.accumulate, n, stream());
                }));
        if (rows <= kStreamRowsLimit && shape.out % kStreamTileColumns == 0) {
          print("stream", time([&](std::int64_t i) {
                  launch_stream_gemm(x.get(), weights(i), y.as<float>(), rows, shape.in, shape.out,
                                     shape.accumulate, nullptr, sms, stream(), false, false);
                }));
          // Back to back under PDL with early weights, as a chain of GEMMs runs in the forward.
          print("stream pdl", time([&](std::int64_t i) {
                  launch_stream_gemm(x.get(), weights(i), y.as<float>(), rows, shape.in, shape.out,
                                     shape.accumulate, nullptr, sms, stream(), true, true);
                }));
          if (stream_split_fits(shape.in, shape.out, sms)) {  // the split walk, both ways
            const DeviceBuffer slots(stream_split_slot_bytes(sms));
            print("stream split", time([&](std::int64_t i) {
                    launch_stream_gemm(x.get(), weights(i), y.as<float>(), rows, shape.in,
                                       shape.out, shape.accumulate, nullptr, sms, stream(), false,
                                       false, nullptr, StreamRing::kByShape, slots.as<float>());
                  }));
            print("stream split pdl", time([&](std::int64_t i) {
                    launch_stream_gemm(x.get(), weights(i), y.as<float>(), rows, shape.in,
                                       shape.out, shape.accumulate, nullptr, sms, stream(), true,
                                       true, nullptr, StreamRing::kByShape, slots.as<float>());
                  }));
          }
        }
      }
      const std::vector<int> only_splits = env_ints("DICE_SKINNY_WGMMA_SPLITS", {});
      const bool pdl = std::getenv("DICE_SKINNY_WGMMA_PDL") != nullptr;
      if (wgmma && rows > 16)
        for (const int stage_k : env_ints("DICE_SKINNY_WGMMA_STAGE_K", {kWgmmaStageK}))
          for (const int tile_n : env_ints("DICE_SKINNY_WGMMA_TILES", {64, 128})) {
            const int rule = wgmma_default_splits(shape.in, shape.out, tile_n, sms, stage_k);
            for (const int splits : wgmma_split_options(shape.in, stage_k)) {
              if (!only_splits.empty() &&
                  std::find(only_splits.begin(), only_splits.end(), splits) == only_splits.end())
                continue;
              const std::int64_t clusters = shape.out / tile_n;
              print("wgmma t" + std::to_string(tile_n) + (stage_k == 128 ? " k128" : "") +
                        (pdl ? " pdl" : "") + " s" + std::to_string(splits) +
                        (splits == rule ? "*" : "") + " c" + std::to_string(clusters) + "/" +
                        std::to_string(wgmma->max_active_clusters(shape.in, shape.out, tile_n,
                                                                  splits, stage_k)),
                    time([&](std::int64_t i) {
                      wgmma->launch(x.get(), weights(i), y.as<float>(), rows, shape.in, shape.out,
                                    shape.accumulate, tile_n, splits, stream(), pdl, pdl, nullptr,
                                    stage_k);
                    }));
            }
          }
    }
  }
}

/// The timing tests' attention pass: `sequences` sequences, each with `commit_rows` commit rows
/// and a block of 4 ending at position context - 1, sequence i on pages 1 + i * P .. (i + 1) * P
/// (P = ceil(context / kPageTokens); page 0 is scratch). Owns what the items point to.
/// `interleaved`: page j of sequence i is page 1 + j x sequences + i (sequences that grew page by
/// page together, as in decoding) instead of 1 + i x pages per sequence + j.
struct TimingPass {
  TimingPass(int sequences, int context, int commit_rows, bool interleaved = false)
      : pages(static_cast<std::size_t>(sequences)),
        commit(static_cast<std::size_t>(commit_rows), 1),
        block(4, 1),
        items(static_cast<std::size_t>(sequences)) {
    const std::int64_t per_sequence = (context + kPageTokens - 1) / kPageTokens;
    for (int i = 0; i < sequences; ++i) {
      auto& p = pages[static_cast<std::size_t>(i)];
      for (std::int64_t j = 0; j < per_sequence; ++j)
        p.push_back(static_cast<std::int32_t>(interleaved ? 1 + j * sequences + i
                                                          : 1 + i * per_sequence + j));
      auto& item = items[static_cast<std::size_t>(i)];
      item.commit = commit;
      item.block = block;
      item.start = context - commit_rows - 4;
      item.block_length = 4;
      item.pages = p;
    }
  }
  TimingPass(const TimingPass&) = delete;
  TimingPass& operator=(const TimingPass&) = delete;

  std::vector<std::vector<std::int32_t>> pages;
  std::vector<std::int32_t> commit, block;
  std::vector<PassItem> items;
};

// Per-launch attention times (not a check: skipped unless DICE_ATTENTION_TIMINGS is set; run on
// the device by bench/results/2026-11-23-engine-attention-h100). SDAR-1.7B and -4B heads, bf16,
// head_dim 128; per sequence a fused store pass (4 commit rows + a block of 4) whose block sees
// `context` positions; the first mma kernel (with its combine launch when split) against the
// pipelined one under several planner settings. 28 launches (one per layer, rotating over as many
// layers' caches as fit 3 GiB, so that the KV cache mostly comes from HBM as in a forward) are
// captured in a CUDA graph; the time is its replay's over 28, median of 9 replays. Knobs:
// DICE_ATTENTION_ROWS=4 (block-only passes: a block of 4 per sequence, no commit rows),
// DICE_ATTENTION_SEQUENCES and DICE_ATTENTION_CONTEXTS (comma lists; contexts multiples of 4).
TEST_F(CudaOps, AttentionTimings) {
  if (std::getenv("DICE_ATTENTION_TIMINGS") == nullptr)
    GTEST_SKIP() << "set DICE_ATTENTION_TIMINGS=1 to time the attention kernels";
  struct Variant {
    std::string name;
    AttentionKernel kernel;
    std::int32_t min_split_keys, max_splits;
    bool wave_splits, group_tiles;
    std::int32_t split_align = 0;  ///< 0: attention_split_align(kernel)
    bool pair_tiles = false;
    std::int32_t split_cost = 768;
  };
  // first: the first mma kernel with the earlier planner; pipe: the pipelined kernel with the
  // balanced planner (the default but for pair_tiles); pipe_early: the pipelined kernel with the
  // earlier planner (ceil splits, longest range first); pipe_waves: only the wave-aware split
  // count; pipe_m512: splits of at least 512 positions; pipe_s1 / pipe_s4: at most 1 / 4
  // splits; pipe_a256 / pipe_a512: ranges in units of 256 / 512 positions; pipe_pair: paired
  // tiles; pipe_cost0: no split cost in the wave rule (the previous default); deep: the deep
  // kernel (three pages in flight per warp, one block per SM), planned for its grid; deep_s1 /
  // deep_s2 / deep_s4: the deep kernel with at most 1 / 2 / 4 splits (fewer merges at 1
  // sequence, more pages per warp in flight); deep_pair: the deep paired kernel with paired
  // tiles, planned as the backend does (work for the pairs, at most its grid: no splits).
  const std::vector<Variant> variants{
      {"first", AttentionKernel::kTensorCores, 256, 0, false, false},
      {"pipe", AttentionKernel::kTensorCoresPipelined, 256, 16, true, true},
      {"pipe_early", AttentionKernel::kTensorCoresPipelined, 256, 16, false, false},
      {"pipe_waves", AttentionKernel::kTensorCoresPipelined, 256, 16, true, false},
      {"pipe_m512", AttentionKernel::kTensorCoresPipelined, 512, 16, true, true},
      {"pipe_s1", AttentionKernel::kTensorCoresPipelined, 256, 1, true, true},
      {"pipe_s4", AttentionKernel::kTensorCoresPipelined, 256, 4, true, true},
      {"pipe_a256", AttentionKernel::kTensorCoresPipelined, 256, 16, true, true, 256},
      {"pipe_a512", AttentionKernel::kTensorCoresPipelined, 256, 16, true, true, 512},
      {"pipe_pair", AttentionKernel::kTensorCoresPaired, 256, 16, true, true, 0, true},
      {"pipe_cost0", AttentionKernel::kTensorCoresPipelined, 256, 16, true, true, 0, false, 0},
      {"deep", AttentionKernel::kTensorCoresDeep, 256, 16, true, true},
      {"deep_s1", AttentionKernel::kTensorCoresDeep, 256, 1, true, true},
      {"deep_s2", AttentionKernel::kTensorCoresDeep, 256, 2, true, true},
      {"deep_s4", AttentionKernel::kTensorCoresDeep, 256, 4, true, true},
      {"deep_pair", AttentionKernel::kTensorCoresDeepPaired, 256, 16, true, true, 0, true},
      {"deep_pair8", AttentionKernel::kTensorCoresDeepPaired8, 256, 16, true, true, 0, true}};
  // DICE_ATTENTION_ROWS=4: block-only passes (a block of 4 per sequence, no commit rows).
  // DICE_ATTENTION_INTERLEAVE set: the sequences' pages interleaved (TimingPass).
  constexpr int kD = 128, kLayers = 28;
  const int kRowsPerSequence = env_ints("DICE_ATTENTION_ROWS", {8}).front() == 4 ? 4 : 8;
  std::printf("attention us per launch (median of 9 graph replays of %d launches)\n", kLayers);
  std::printf("%-5s %5s %7s", "model", "seqs", "context");
  for (const auto& v : variants) std::printf(" %9s", v.name.c_str());
  std::printf("  pipe/first pipe/early  ref err first, pipelined (last sequence)\n");
  for (const auto& [model, heads] :
       std::vector<std::pair<std::string, int>>{{"1.7b", 16}, {"4b", 32}})
    for (const int sequences : env_ints("DICE_ATTENTION_SEQUENCES", {1, 16, 128}))
      for (const int context : env_ints("DICE_ATTENTION_CONTEXTS", {64, 256, 1024, 4160})) {
        const int kv_heads = 8;
        const std::int64_t pages_per_sequence = (context + kPageTokens - 1) / kPageTokens;
        const std::int64_t pages = sequences * pages_per_sequence + 1;  // page 0: scratch
        const std::int64_t layer_elems = pages * kv_heads * kPageTokens * kD;
        const std::int64_t layers =
            std::clamp<std::int64_t>((3ll << 30) / (layer_elems * 4), 1, kLayers);
        DeviceBuffer k(static_cast<std::size_t>(layers * layer_elems * 2)),
            v(static_cast<std::size_t>(layers * layer_elems * 2));
        launch_fill_random(CudaDType::kBF16, k.get(), layers * layer_elems, 1.0f, 21, stream());
        launch_fill_random(CudaDType::kBF16, v.get(), layers * layer_elems, 1.0f, 22, stream());
        const std::int64_t rows = std::int64_t{sequences} * kRowsPerSequence;
        DeviceBuffer q(static_cast<std::size_t>(rows * heads * kD * 2)),
            out(static_cast<std::size_t>(rows * heads * kD * 2)),
            partial_out(4096ull * kTileQueries * kD * 4), partial_lse(4096ull * kTileQueries * 4),
            counters(4096ull * 4);
        launch_fill_random(CudaDType::kBF16, q.get(), rows * heads * kD, 1.0f, 23, stream());
        DICE_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
        const TimingPass pass(sequences, context, kRowsPerSequence - 4,
                              std::getenv("DICE_ATTENTION_INTERLEAVE") != nullptr);
        const std::vector<PassItem>& items = pass.items;
        const LayerShape shape{heads * kD, heads, kv_heads, kD, 64, 1e-6};
        std::vector<double> times;
        std::vector<std::vector<float>> outputs;
        for (const auto& variant : variants) {
          const std::int32_t grid = attention_grid(CudaDType::kBF16, variant.kernel, kD);
          const auto target = static_cast<std::int32_t>(
              variant.kernel == AttentionKernel::kTensorCoresDeepPaired ||
                      variant.kernel == AttentionKernel::kTensorCoresDeepPaired8
                  ? std::min<std::int64_t>(grid,
                                           attention_paired_work_items(items, heads, kv_heads))
                  : grid);
          PlanShape plan_shape{
              heads,
              kv_heads,
              target,
              4096,
              variant.min_split_keys,
              variant.split_align > 0 ? variant.split_align : attention_split_align(variant.kernel),
              variant.max_splits,
              variant.wave_splits,
              variant.group_tiles};
          plan_shape.pair_tiles = variant.pair_tiles;
          plan_shape.split_cost = variant.split_cost;
          const PassPlan plan = plan_pass(items, plan_shape);
          const auto meta = upload_bytes(plan.bytes);
          const auto launch = [&](std::int64_t layer) {
            const CacheLayer cache{static_cast<std::uint16_t*>(k.get()) + layer * layer_elems,
                                   static_cast<std::uint16_t*>(v.get()) + layer * layer_elems};
            launch_attention(CudaDType::kBF16, variant.kernel, meta.as<PassHeader>(), q.get(),
                             cache, shape, out.get(), partial_out.as<float>(),
                             partial_lse.as<float>(), counters.as<std::uint32_t>(), grid, stream());
            if (plan.attn_combine > 0 && attention_needs_combine(variant.kernel))
              launch_attention_combine(CudaDType::kBF16, meta.as<PassHeader>(),
                                       partial_out.as<float>(), partial_lse.as<float>(), shape,
                                       out.get(), 4 * 132, stream());
          };
          launch(0);
          synchronize();
          outputs.push_back(
              download(out, static_cast<std::size_t>(rows * heads * kD), CudaDType::kBF16));
          times.push_back(graph_replay_us(stream(), kLayers, 2, 9,
                                          [&](std::int64_t l) { launch(l % layers); }));
        }
        // Each variant's output rows of the last sequence (layer 0) against the double reference.
        const std::int64_t last = sequences - 1;
        const std::int64_t page_elems = std::int64_t{kv_heads} * kPageTokens * kD;
        const std::size_t seq_elems = static_cast<std::size_t>(pages_per_sequence * page_elems);
        std::vector<std::uint16_t> bits(seq_elems);
        std::vector<float> k_seq(seq_elems), v_seq(seq_elems), q_seq;
        const auto& last_pages = pass.pages[static_cast<std::size_t>(last)];
        for (auto [from, to] : {std::pair{&k, &k_seq}, std::pair{&v, &v_seq}}) {
          for (std::int64_t j = 0; j < pages_per_sequence; ++j)  // its pages, in order
            DICE_CUDA_CHECK(cudaMemcpy(bits.data() + j * page_elems,
                                       static_cast<const std::uint16_t*>(from->get()) +
                                           last_pages[static_cast<std::size_t>(j)] * page_elems,
                                       static_cast<std::size_t>(page_elems) * 2,
                                       cudaMemcpyDeviceToHost));
          for (std::size_t i = 0; i < seq_elems; ++i) (*to)[i] = model::bf16_to_f32(bits[i]);
        }
        const std::size_t row_elems = static_cast<std::size_t>(heads) * kD;
        const auto all_q =
            download(q, static_cast<std::size_t>(rows) * row_elems, CudaDType::kBF16);
        std::vector<std::int32_t> local(static_cast<std::size_t>(pages_per_sequence));
        std::iota(local.begin(), local.end(), 0);
        std::vector<double> want;
        for (int r = 0; r < kRowsPerSequence; ++r) {
          const int kv_len = r < kRowsPerSequence - 4 ? context - 4 : context;
          const std::size_t row = static_cast<std::size_t>(last * kRowsPerSequence + r);
          for (int h = 0; h < heads; ++h) {
            const auto o =
                attend(all_q.data() + row * row_elems + static_cast<std::size_t>(h) * kD, k_seq,
                       v_seq, local, h / (heads / kv_heads), kv_heads, kv_len, kD);
            want.insert(want.end(), o.begin(), o.end());
          }
        }
        std::vector<double> errors;
        for (std::size_t i = 0; i < outputs.size(); ++i) {
          const auto from =
              outputs[i].begin() + static_cast<std::ptrdiff_t>(last * kRowsPerSequence * row_elems);
          errors.push_back(rel_l2(
              std::vector<float>(from, from + static_cast<std::ptrdiff_t>(want.size())), want));
          EXPECT_LT(errors.back(), 1.5e-2) << model << " " << sequences << " sequences, context "
                                           << context << ", " << variants[i].name;
        }
        std::printf("%-5s %5d %7d", model.c_str(), sequences, context);
        for (const double t : times) std::printf(" %9.2f", t);
        std::printf("  %10.2f %10.2f  %.1e %.1e\n", times[1] / times[0], times[1] / times[2],
                    errors[0], *std::max_element(errors.begin() + 1, errors.end()));
        std::fflush(stdout);
      }
}

// What ordering two kernels of a graph costs (not a check: skipped unless DICE_BOUNDARY_TIMINGS
// is set). Chains of 224 kernels (28 layers x 8) captured as one graph, each kernel reading the
// one before it (BoundaryProbe), under each BoundaryMode, with weights read after or before the
// wait; us per kernel, median of 7 replays; then one eager run from NaN activations whose last
// output must sum to the plain chain's (an ordering that let a kernel read early would not).
TEST_F(CudaOps, KernelBoundaryTimings) {
  if (std::getenv("DICE_BOUNDARY_TIMINGS") == nullptr)
    GTEST_SKIP() << "set DICE_BOUNDARY_TIMINGS=1 to time kernel orderings";
  BoundaryProbe probe;
  const auto uniform = [](int blocks, std::int64_t bytes) {
    return std::vector<BoundaryLink>(224, BoundaryLink{blocks, bytes});
  };
  std::vector<BoundaryLink> layers;
  for (int l = 0; l < 28; ++l) {
    // SDAR-1.7B at 1 sequence: norm, qkv, q/k norm, attention, o, norm, gate/up, down.
    const BoundaryLink layer[] = {{8, 0},       {128, 131072}, {32, 0},      {396, 6144},
                                  {128, 65536}, {8, 0},        {768, 65536}, {256, 98304}};
    layers.insert(layers.end(), std::begin(layer), std::end(layer));
  }
  const std::pair<const char*, std::vector<BoundaryLink>> chains[] = {
      {"8 blocks, no weights", uniform(8, 0)},
      {"132 blocks, no weights", uniform(132, 0)},
      {"132 blocks x 64 KiB", uniform(132, 65536)},
      {"SDAR-1.7B-like layers", layers}};
  const std::pair<const char*, BoundaryMode> modes[] = {
      {"plain", BoundaryMode::kPlain},
      {"pdl, trigger at exit", BoundaryMode::kPdlAtExit},
      {"pdl, trigger after wait", BoundaryMode::kPdlEarly},
      {"flags, trigger after spin", BoundaryMode::kFlagsAfter},
      {"flags, trigger at start", BoundaryMode::kFlagsAtStart}};
  std::printf("%-24s %-26s %-6s %10s %10s\n", "chain", "mode", "early", "us/kernel", "vs plain");
  for (const auto& [chain_name, chain] : chains) {
    double plain_us = 0, plain_sum = 0;
    for (const auto& [mode_name, mode] : modes) {
      for (const bool early : {false, true}) {
        if (early && mode == BoundaryMode::kPlain) continue;
        const double us = captured_graph_us(stream(), 2, 7,
                                            [&] { probe.enqueue(chain, mode, early, stream()); }) /
                          static_cast<double>(chain.size());
        const double sum = probe.checked_run(chain, mode, early, stream());
        if (mode == BoundaryMode::kPlain) {
          plain_us = us;
          plain_sum = sum;
        }
        EXPECT_EQ(sum, plain_sum) << chain_name << ", " << mode_name;
        std::printf("%-24s %-26s %-6s %10.3f %+10.3f\n", chain_name, mode_name,
                    early ? "yes" : "no", us, us - plain_us);
      }
    }
  }
}

// A persistent decode kernel's weight stream against the engine's chain of GEMM launches (not a
// check: skipped unless DICE_PERSISTENT_TIMINGS is set; persistent_probe.h). Per model (SDAR-1.7B
// and -4B's four layer GEMMs, their o, gate/up and down only ("-mlp"), and each GEMM alone
// ("4b-qkv", "4b-o", "4b-gate-up", "4b-down", the same for 1.7b); every layer's own
// weights, so from HBM; DICE_PERSISTENT_MODELS picks, a comma list, e.g. "4b,4b-mlp") at
// DICE_PERSISTENT_ROWS rows (default 4: one sequence), us a layer, median of 7 graph replays: the
// engine's launches (Gemm at few rows: the streaming kernel, its split walk, the skinny kernel
// where tiles fill poorly) plain and under PDL with early weights; then, for each of seven rings,
// the probe kernel launched once a GEMM under PDL (its even split of the work, without
// persistence), and as one persistent kernel on every SM whose ring runs on across phases: no waits
// (the stream alone), count-ins after every GEMM but no waits, waits after the o and down
// projections only (a layer whose other dependencies stay within groups of blocks), waits after
// every GEMM, and 1 more grid barrier after each (a real layer's norms, q/k and attention); then
// dynamic units of 1 and 2 stages (PersistentOrder::dynamic_stages), a launch a GEMM and
// persistent with waits. A waiting run must leave every barrier passed by every block, a dynamic
// run every unit taken.
TEST_F(CudaOps, PersistentStreamTimings) {
  if (std::getenv("DICE_PERSISTENT_TIMINGS") == nullptr)
    GTEST_SKIP() << "set DICE_PERSISTENT_TIMINGS=1 to time a persistent kernel's weight stream";
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  const double copy = measure_copy_bandwidth(0, 1ll << 30, 5);
  std::printf("copy bandwidth %.0f GB/s, %d SMs\n", copy / 1e9, sms);
  struct Model {
    std::string name;
    int layers;
    std::vector<ProbeGemm> gemms;
    unsigned o_and_down;  // wait_mask bits of the o and down projections
  };
  // Each model's four layer GEMMs (qkv, o, gate/up, down), then their o, gate/up and down only
  // ("-mlp": the chain a persistent kernel could take between the attention of one layer and the
  // qkv projection of the next), then each GEMM alone ("-o": which projection a variant wins or
  // loses on).
  const Model full[] = {
      {"1.7b", 28, {{2048, 4096}, {2048, 2048}, {2048, 12288}, {6144, 2048}}, 0b1010u},
      {"4b", 36, {{2560, 6144}, {4096, 2560}, {2560, 19456}, {9728, 2560}}, 0b1010u}};
  const char* const gemm_names[] = {"qkv", "o", "gate-up", "down"};
  std::vector<Model> models(std::begin(full), std::end(full));
  for (const Model& m : full)
    models.push_back(
        {m.name + "-mlp", m.layers, {m.gemms.begin() + 1, m.gemms.end()}, m.o_and_down >> 1});
  for (const Model& m : full)
    for (std::size_t j = 0; j < m.gemms.size(); ++j)
      models.push_back({m.name + "-" + gemm_names[j], m.layers, {m.gemms[j]}, 0u});
  const char* only = std::getenv("DICE_PERSISTENT_MODELS");
  std::printf("%-12s %4s %-34s %10s %8s %9s\n", "model", "rows", "variant", "us/layer", "x copy",
              "vs pdl");
  for (const Model& model : models) {
    if (only != nullptr &&
        ("," + std::string(only) + ",").find("," + model.name + ",") == std::string::npos)
      continue;
    PersistentProbe probe(model.layers, model.gemms);
    const double copy_us = static_cast<double>(probe.layer_weight_bytes()) / copy * 1e6;
    for (const int rows : env_ints("DICE_PERSISTENT_ROWS", {4})) {
      double pdl_us = 0;
      const auto print = [&](const std::string& variant, double us) {
        std::printf("%-12s %4d %-34s %10.2f %8.3f %9.3f\n", model.name.c_str(), rows,
                    variant.c_str(), us, us / copy_us, pdl_us > 0 ? us / pdl_us : 1.0);
        std::fflush(stdout);
      };
      const auto per_layer = [&](const std::function<void()>& body) {
        return captured_graph_us(stream(), 2, 7, body) / model.layers;
      };
      print("launches, plain", per_layer([&] { probe.enqueue_launches(rows, false, stream()); }));
      pdl_us = per_layer([&] { probe.enqueue_launches(rows, true, stream()); });
      print("launches, pdl + early weights", pdl_us);
      const std::pair<const char*, ProbeRingShape> rings[] = {
          {"2 x 2048", ProbeRingShape::kTwoOf2048},   {"3 x 2048", ProbeRingShape::kThreeOf2048},
          {"3 x 1280", ProbeRingShape::kThreeOf1280}, {"4 x 1280", ProbeRingShape::kFourOf1280},
          {"5 x 1280", ProbeRingShape::kFiveOf1280},  {"4 x 1024", ProbeRingShape::kFourOf1024},
          {"6 x 1024", ProbeRingShape::kSixOf1024}};
      for (const auto& [ring_name, ring] : rings) {
        const std::string name = ring_name;
        print(name + ", a launch a GEMM, pdl",
              per_layer([&] { probe.enqueue_phase_launches(rows, sms, ring, true, stream()); }));
        print(name + ", persistent, no waits", per_layer([&] {
                probe.enqueue_persistent(rows, sms, ring, {false, 0}, stream());
              }));
        const auto timed = [&](const std::string& variant, const PersistentOrder& order) {
          print(name + ", persistent, " + variant,
                per_layer([&] { probe.enqueue_persistent(rows, sms, ring, order, stream()); }));
          EXPECT_EQ(probe.counters_passed(sms, stream()), probe.barriers(order))
              << model.name << ", " << name << ", " << variant;
        };
        if (probe.flagged_fits()) {
          print(name + ", persistent, flagged inputs", per_layer([&] {
                  probe.enqueue_persistent(rows, sms, ring, {false, 0, ~0u, false, true}, stream());
                }));
          EXPECT_EQ(probe.stale_flagged_words(rows, stream()), 0) << model.name << ", " << name;
        }
        timed("count-ins only", {true, 0, ~0u, true});
        // (Not for one GEMM alone: with no o or down bit nobody waits, and nothing is checked.)
        if (model.o_and_down != 0) timed("waits after o, down", {true, 0, model.o_and_down});
        for (const int extra : {0, 1}) timed("waits + " + std::to_string(extra), {true, extra});
        // Dynamic units of one and two stages (PersistentOrder::dynamic_stages).
        for (const int group : {1, 2}) {
          const std::string unit = ", dynamic units of " + std::to_string(group);
          print(name + unit + ", a launch a GEMM, pdl", per_layer([&] {
                  probe.enqueue_phase_launches(rows, sms, ring, true, stream(), group);
                }));
          EXPECT_TRUE(probe.all_units_taken(sms, ring, group, stream())) << name << unit;
          PersistentOrder order;
          order.dynamic_stages = group;
          print(name + unit + ", persistent, waits + 0",
                per_layer([&] { probe.enqueue_persistent(rows, sms, ring, order, stream()); }));
          EXPECT_TRUE(probe.all_units_taken(sms, ring, group, stream())) << name << unit;
          EXPECT_EQ(probe.counters_passed(sms, stream()), probe.barriers(order)) << name << unit;
        }
      }
    }
  }
}

// Whether the layer GEMMs and the attention could overlap at 128 sequences (not a check but for
// the attention's output beside the GEMMs: skipped unless DICE_OVERLAP_TIMINGS is set; run on the
// device by bench/device_overlap_probe.sh). SDAR-4B shapes: one layer's four GEMMs at 512 rows (128
// sequences x a block of 4; cuBLASLt, heuristic plans) and one block-only attention pass of 128
// sequences whose blocks see `context` positions (DICE_OVERLAP_CONTEXTS, default 1024,4096).
// Graphs of 12 layers, rotating over 2 copies of the weights and 3 layers of KV cache (HBM, not
// L2), us per layer, median of 7 replays:
//   gemm, attn: each alone on every SM; serial: both on one stream, as the forward runs them;
//   for each GEMM SM count g (DICE_OVERLAP_GEMM_SMS, default 3/4, 2/3 and 1/2 of the SMs):
//   gemm_g: the GEMMs planned for g SMs (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET) alone;
//   pipe_g / deep_g: the pipelined attention kernel with the grid of the other SMs (its blocks
//   per SM times sms - g) / the deep kernel (one block per SM, sms - g blocks) alone;
//   both_pipe / both_deep: the GEMMs and that attention at once on two streams, as two
//   independent chains: the most that overlapping the two could give.
// Then the same split made with green contexts (SmPartition: the driver rounds g to its
// granularity, 8 SMs on sm_90), whose kernels cannot leave their SMs, timed eagerly on the
// host clock, and once as a graph spanning both contexts.
TEST_F(CudaOps, OverlapTimings) {
  if (std::getenv("DICE_OVERLAP_TIMINGS") == nullptr)
    GTEST_SKIP() << "set DICE_OVERLAP_TIMINGS=1 to time GEMMs and attention side by side";
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  constexpr int kD = 128, kHeads = 32, kKvHeads = 8, kSequences = 128, kRows = 4 * kSequences;
  constexpr int kLayers = 12, kWeightCopies = 2, kCacheLayers = 3;
  struct Shape {
    std::int64_t in, out;
    bool accumulate;
  };
  const Shape shapes[] = {
      {2560, 6144, false}, {4096, 2560, true}, {2560, 19456, false}, {9728, 2560, true}};
  std::vector<DeviceBuffer> weights;
  for (const Shape& shape : shapes) {
    weights.emplace_back(static_cast<std::size_t>(kWeightCopies * shape.in * shape.out * 2));
    launch_fill_random(CudaDType::kBF16, weights.back().get(), kWeightCopies * shape.in * shape.out,
                       0.05f, 71, stream());
  }
  DeviceBuffer x(static_cast<std::size_t>(kRows) * 9728 * 2),
      y(static_cast<std::size_t>(kRows) * 19456 * 4);
  launch_fill_random(CudaDType::kBF16, x.get(), std::int64_t{kRows} * 9728, 1.0f, 72, stream());
  DICE_CUDA_CHECK(cudaMemset(y.get(), 0, y.bytes()));
  const auto gemms = [&](Gemm& gemm, cudaStream_t on, std::int64_t layer) {
    for (std::size_t i = 0; i < std::size(shapes); ++i) {
      const Shape& shape = shapes[i];
      const auto* w = static_cast<const char*>(weights[i].get()) +
                      (layer % kWeightCopies) * shape.in * shape.out * 2;
      gemm.run(CudaDType::kBF16, x.get(), w, y.as<float>(), kRows, shape.in, shape.out,
               shape.accumulate, on);
    }
  };
  Stream side;
  Event fork, join;
  const auto time_layers = [&](const std::function<void(std::int64_t)>* on_main,
                               const std::function<void(std::int64_t)>* on_side) {
    const auto body = [&] {
      if (on_side != nullptr) {
        fork.record(stream());
        DICE_CUDA_CHECK(cudaStreamWaitEvent(side.get(), fork.get(), 0));
      }
      if (on_main != nullptr)
        for (int l = 0; l < kLayers; ++l) (*on_main)(l);
      if (on_side != nullptr) {
        for (int l = 0; l < kLayers; ++l) (*on_side)(l);
        join.record(side.get());
        DICE_CUDA_CHECK(cudaStreamWaitEvent(stream(), join.get(), 0));
      }
    };
    body();  // plans and first-use costs outside the graph
    synchronize();
    side.synchronize();
    return captured_graph_us(stream(), 2, 7, body) / kLayers;
  };
  std::vector<int> gemm_sms;
  for (const int g : env_ints("DICE_OVERLAP_GEMM_SMS", {sms * 3 / 4, sms * 2 / 3, sms / 2}))
    if (g > 0 && g < sms) gemm_sms.push_back(g);
  std::printf("gemms and attention per layer (us; SDAR-4B, %d rows, %d SMs)\n", kRows, sms);
  std::printf("%7s %8s %8s %8s %4s %8s %8s %8s %9s %9s %8s\n", "context", "gemm", "attn", "serial",
              "g", "gemm_g", "pipe_g", "deep_g", "both_pipe", "both_deep", "best/ser");
  const std::int32_t pipe_blocks =
      attention_grid(CudaDType::kBF16, AttentionKernel::kTensorCoresPipelined, kD) / sms;
  const std::int32_t deep_blocks =
      attention_grid(CudaDType::kBF16, AttentionKernel::kTensorCoresDeep, kD) / sms;
  ASSERT_GT(deep_blocks, 0) << "the deep attention kernel cannot run on this device";
  std::vector<std::string> green_rows;
  for (const int context : env_ints("DICE_OVERLAP_CONTEXTS", {1024, 4096})) {
    const std::int64_t pages_per_sequence = (context + kPageTokens - 1) / kPageTokens;
    const std::int64_t pages = kSequences * pages_per_sequence + 1;  // page 0: scratch
    const std::int64_t layer_elems = pages * kKvHeads * kPageTokens * kD;
    DeviceBuffer k(static_cast<std::size_t>(kCacheLayers * layer_elems * 2)),
        v(static_cast<std::size_t>(kCacheLayers * layer_elems * 2));
    launch_fill_random(CudaDType::kBF16, k.get(), kCacheLayers * layer_elems, 1.0f, 73, stream());
    launch_fill_random(CudaDType::kBF16, v.get(), kCacheLayers * layer_elems, 1.0f, 74, stream());
    DeviceBuffer q(static_cast<std::size_t>(kRows) * kHeads * kD * 2),
        out(static_cast<std::size_t>(kRows) * kHeads * kD * 2),
        partial_out(4096ull * kTileQueries * kD * 4), partial_lse(4096ull * kTileQueries * 4),
        counters(4096ull * 4);
    launch_fill_random(CudaDType::kBF16, q.get(), std::int64_t{kRows} * kHeads * kD, 1.0f, 75,
                       stream());
    DICE_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
    const TimingPass pass(kSequences, context, 0);
    const std::vector<PassItem>& items = pass.items;
    const LayerShape shape{kHeads * kD, kHeads, kKvHeads, kD, 64, 1e-6};
    // An attention launch of `kernel` on `grid` blocks, its pass planned for that grid.
    struct Attention {
      AttentionKernel kernel;
      std::int32_t grid;
      DeviceBuffer meta;
    };
    const auto planned = [&](AttentionKernel kernel, std::int32_t grid) {
      PlanShape plan_shape{kHeads, kKvHeads, grid, 4096, 256, attention_split_align(kernel),
                           16,     true,     true};
      return Attention{kernel, grid, upload_bytes(plan_pass(items, plan_shape).bytes)};
    };
    const auto attention_on = [&](const Attention& a, cudaStream_t on) {
      return std::function<void(std::int64_t)>([&a, &k, &v, &q, &out, &partial_out, &partial_lse,
                                                &counters, &shape, layer_elems,
                                                on](std::int64_t layer) {
        const std::int64_t at = (layer % kCacheLayers) * layer_elems;
        launch_attention(CudaDType::kBF16, a.kernel, a.meta.as<PassHeader>(), q.get(),
                         CacheLayer{static_cast<std::uint16_t*>(k.get()) + at,
                                    static_cast<std::uint16_t*>(v.get()) + at},
                         shape, out.get(), partial_out.as<float>(), partial_lse.as<float>(),
                         counters.as<std::uint32_t>(), a.grid, on);
      });
    };
    Gemm full;
    const std::function<void(std::int64_t)> gemm_full = [&](std::int64_t l) {
      gemms(full, stream(), l);
    };
    const Attention attn_all = planned(AttentionKernel::kTensorCoresPipelined, pipe_blocks * sms);
    const auto attn_main = attention_on(attn_all, stream());
    const std::function<void(std::int64_t)> serial_layer = [&](std::int64_t l) {
      gemms(full, stream(), l);
      attn_main(l);
    };
    const double gemm_us = time_layers(&gemm_full, nullptr);
    const double attn_us = time_layers(&attn_main, nullptr);
    const double serial_us = time_layers(&serial_layer, nullptr);
    const auto serial_out =
        download(out, static_cast<std::size_t>(kRows) * kHeads * kD, CudaDType::kBF16);
    const std::vector<double> reference(serial_out.begin(), serial_out.end());
    // The same split made with green contexts (SmPartition: each group's kernels run on its own
    // SMs only). Timed eagerly (host clock around 12 layers launched layer by layer on both
    // streams, median of 5 after a warm-up), the serial layer timed the same way for the ratio;
    // then the concurrent layers as one graph captured across the two contexts (it works with
    // CUDA 13 on an H100; a failed capture is reported in the row, not raised).
    const auto green_row = [&](int context_keys, int g) -> std::string {
      try {
        const SmPartition partition(0, g);
        struct Work {  // what to launch for layer l, and on which stream
          std::function<void(std::int64_t)> layer;
          cudaStream_t on;
        };
        const auto eager_us = [&](const std::vector<Work>& work) {
          std::vector<double> times;
          for (int rep = 0; rep < 6; ++rep) {
            for (const Work& w : work) DICE_CUDA_CHECK(cudaStreamSynchronize(w.on));
            const auto start = std::chrono::steady_clock::now();
            for (int l = 0; l < kLayers; ++l)
              for (const Work& w : work) w.layer(l);
            for (const Work& w : work) DICE_CUDA_CHECK(cudaStreamSynchronize(w.on));
            times.push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count());
          }
          std::sort(times.begin() + 1, times.end());
          return times[3] / kLayers;
        };
        Gemm part(0, false, 64ull << 20, partition.first_sms());
        const auto gemm_on = [&](Gemm& gemm, cudaStream_t on) {
          return std::function<void(std::int64_t)>(
              [&gemm, &gemms, on](std::int64_t l) { gemms(gemm, on, l); });
        };
        const Attention pipe =
            planned(AttentionKernel::kTensorCoresPipelined, pipe_blocks * partition.second_sms());
        const Attention deep =
            planned(AttentionKernel::kTensorCoresDeep, deep_blocks * partition.second_sms());
        const Work gemm_a{gemm_on(part, partition.first()), partition.first()};
        const Work pipe_b{attention_on(pipe, partition.second()), partition.second()};
        const Work deep_b{attention_on(deep, partition.second()), partition.second()};
        const double serial = eager_us({Work{gemm_on(full, stream()), stream()},
                                        Work{attention_on(attn_all, stream()), stream()}});
        const double gemm_a_us = eager_us({gemm_a});
        const double pipe_b_us = eager_us({pipe_b});
        const double deep_b_us = eager_us({deep_b});
        const double both_pipe = eager_us({gemm_a, pipe_b});
        EXPECT_LT(rel_l2(download(out, reference.size(), CudaDType::kBF16), reference), 1e-3)
            << "green contexts, context " << context_keys << ", g " << g;
        const double both_deep = eager_us({gemm_a, deep_b});
        std::string graph = "-";
        try {
          const double us = captured_graph_us(partition.first(), 2, 7, [&] {
            fork.record(partition.first());
            DICE_CUDA_CHECK(cudaStreamWaitEvent(partition.second(), fork.get(), 0));
            for (int l = 0; l < kLayers; ++l) {
              gemm_a.layer(l);
              pipe_b.layer(l);
            }
            join.record(partition.second());
            DICE_CUDA_CHECK(cudaStreamWaitEvent(partition.first(), join.get(), 0));
          });
          graph = std::to_string(us / kLayers);
        } catch (const std::exception& e) {
          graph = std::string("capture failed: ") + e.what();
          cudaGetLastError();
        }
        char line[512];
        std::snprintf(line, sizeof line,
                      "%7d %3d+%-3d %8.1f %8.1f %8.1f %8.1f %9.1f %9.1f %8.3f  graph both_pipe: %s",
                      context_keys, partition.first_sms(), partition.second_sms(), serial,
                      gemm_a_us, pipe_b_us, deep_b_us, both_pipe, both_deep,
                      std::min(both_pipe, both_deep) / serial, graph.c_str());
        return line;
      } catch (const std::exception& e) {
        return std::to_string(context_keys) + " g " + std::to_string(g) +
               ": green contexts failed: " + e.what();
      }
    };
    for (const int g : gemm_sms) {
      Gemm part(0, false, 64ull << 20, g);
      const std::function<void(std::int64_t)> gemm_part = [&](std::int64_t l) {
        gemms(part, stream(), l);
      };
      const Attention pipe =
          planned(AttentionKernel::kTensorCoresPipelined, pipe_blocks * (sms - g));
      const Attention deep = planned(AttentionKernel::kTensorCoresDeep, deep_blocks * (sms - g));
      const auto pipe_main = attention_on(pipe, stream()), deep_main = attention_on(deep, stream());
      const auto pipe_side = attention_on(pipe, side.get()),
                 deep_side = attention_on(deep, side.get());
      const double gemm_g = time_layers(&gemm_part, nullptr);
      const double pipe_g = time_layers(&pipe_main, nullptr);
      const double deep_g = time_layers(&deep_main, nullptr);
      const double both_pipe = time_layers(&gemm_part, &pipe_side);
      // The attention's output beside the GEMMs is the serial run's (up to the split merges'
      // rounding where the smaller grid splits other tiles).
      EXPECT_LT(rel_l2(download(out, reference.size(), CudaDType::kBF16), reference), 1e-3)
          << "context " << context << ", g " << g;
      const double both_deep = time_layers(&gemm_part, &deep_side);
      std::printf("%7d %8.1f %8.1f %8.1f %4d %8.1f %8.1f %8.1f %9.1f %9.1f %8.3f\n", context,
                  gemm_us, attn_us, serial_us, g, gemm_g, pipe_g, deep_g, both_pipe, both_deep,
                  std::min(both_pipe, both_deep) / serial_us);
      std::fflush(stdout);
      green_rows.push_back(green_row(context, g));
    }
  }
  std::printf(
      "\nthe same with green contexts (us per layer, eager launches)\n%7s %7s %8s %8s %8s "
      "%8s %9s %9s %8s\n",
      "context", "sms", "serial", "gemm_a", "pipe_b", "deep_b", "both_pipe", "both_deep",
      "best/ser");
  for (const std::string& row : green_rows) std::printf("%s\n", row.c_str());
}

struct VocabCase {
  SamplingParams params;
  std::string what;
  // 0: normal, 1: ties (multiples of 0.5), 2: some -inf, 3: peaked, 4: narrow (every logit
  // within one level-0 bin of the top-k / top-p threshold search: its sub-bins decide)
  int logits_kind;
};

/// The chunked vocabulary pass's scratch for `rows_pad` block rows of up to `chunks` chunks
/// each, counters and bins zeroed (as the backend's, which every pass leaves zero).
struct VocabScratch {
  VocabScratch(std::int32_t rows_pad, std::int32_t chunks)
      : partials(std::size_t{1} * rows_pad * chunks * sizeof(VocabPartial)),
        counters(std::size_t{4} * rows_pad),
        bin_counts(std::size_t{4} * rows_pad * kVocabBins),
        bin_masses(std::size_t{8} * rows_pad * kVocabBins) {
    for (const DeviceBuffer* b : {&counters, &bin_counts, &bin_masses})
      DICE_CUDA_CHECK(cudaMemset(b->get(), 0, b->bytes()));
  }
  VocabWorkspace workspace() const {
    return VocabWorkspace{partials.as<VocabPartial>(), counters.as<std::uint32_t>(),
                          bin_counts.as<std::uint32_t>(), bin_masses.as<unsigned long long>()};
  }
  DeviceBuffer partials, counters, bin_counts, bin_masses;
};

TEST_F(CudaOps, VocabPassMatchesTheCpuProcedure) {
  const int vocab = 151936;
  std::vector<VocabCase> cases;
  const auto add = [&](double t, int k, double p, std::uint64_t seed, int kind,
                       const std::string& what, int limit = 151670, int mask = 151669) {
    VocabCase c;
    c.params.temperature = t;
    c.params.top_k = k;
    c.params.top_p = p;
    c.params.seed = seed;
    c.params.vocab_limit = limit;
    c.params.mask_id = mask;
    c.logits_kind = kind;
    c.what = what;
    cases.push_back(c);
  };
  for (int kind = 0; kind < 5; ++kind) {
    const std::string k = " logits " + std::to_string(kind);
    add(0, 0, 1, 0, kind, "greedy" + k);
    add(1.0, 0, 1, 7, kind, "T=1" + k);
    add(0.7, 0, 1, 8, kind, "T=0.7" + k);
    add(1.5, 0, 1, 9, kind, "T=1.5" + k);
    add(1.0, 1, 1, 10, kind, "top-k 1" + k);
    add(1.0, 40, 1, 11, kind, "top-k 40" + k);
    add(0.8, 1000, 1, 12, kind, "top-k 1000" + k);
    add(1.0, 0, 0.9, 13, kind, "top-p 0.9" + k);
    add(1.0, 0, 0.3, 14, kind, "top-p 0.3" + k);
    add(0.8, 40, 0.9, 15, kind, "top-k 40 top-p 0.9" + k);
    add(1.0, 100000, 1, 17, kind, "top-k 100000" + k);
    add(1.0, 0, 0.999, 18, kind, "top-p 0.999" + k);
    add(0.6, 20, 0.95, 19, kind, "T=0.6 top-k 20 top-p 0.95" + k);
    add(2.0, 5000, 0.5, 20, kind, "T=2 top-k 5000 top-p 0.5" + k);
    add(1.0, 0, 1, 16, kind, "limit 1000, mask 7" + k, 1000, 7);
    add(0, 0, 1, 0, kind, "greedy mask 0" + k, 151670, 0);
  }
  // Many rows of one pass, each with its own parameters, positions and steps.
  std::vector<float> logits(cases.size() * vocab);
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (std::size_t r = 0; r < cases.size(); ++r)
    for (int i = 0; i < vocab; ++i) {
      float x = normal(rng);
      switch (cases[r].logits_kind) {
        case 1:
          x = std::round(x * 2.0f) / 2.0f;
          break;
        case 2:
          if (i % 3 == 0) x = -std::numeric_limits<float>::infinity();
          break;
        case 3:
          if (i % 5000 == 17) x += 25.0f;
          break;
        case 4:
          x *= 0.001f;
          break;
        default:
          break;
      }
      logits[r * vocab + i] = x;
    }
  std::vector<std::int32_t> block_tokens(1, 1);
  std::vector<std::vector<std::int32_t>> pages(cases.size(), std::vector<std::int32_t>{1});
  std::vector<PassItem> items(cases.size());
  for (std::size_t r = 0; r < cases.size(); ++r) {
    items[r].block = block_tokens;
    items[r].start = static_cast<std::int64_t>(4 * r);
    items[r].block_length = 4;
    pages[r].assign(static_cast<std::size_t>(r / 8 + 1), 1);
    items[r].pages = pages[r];
    items[r].sampling = cases[r].params;
    items[r].step = static_cast<std::int32_t>(r % 4);
  }
  const PassPlan plan = plan_pass(items, {4, 2, 1, 0});
  const auto meta = upload_bytes(plan.bytes);
  const auto d_logits = upload(logits, CudaDType::kF32);
  const int rows = static_cast<int>(cases.size());
  const int rows_pad = bucket_rows(rows);
  std::vector<Proposal> want;
  for (int r = 0; r < rows; ++r)
    want.push_back(
        propose(std::span<const float>(logits.data() + std::size_t{1} * r * vocab, vocab),
                cases[r].params, items[r].start, items[r].step));
  // The whole-row pass (chunks 0 here), then the chunked pass at several chunk counts, the
  // backend's choice for these rows included; each chunked layout runs three times (its per-row
  // counters must be left at zero): its sum kernel at the rule's occupancy, then at one and at
  // three blocks per SM, which must give the same proposals bit for bit.
  const std::int32_t auto_chunks = vocab_pass_chunks(vocab, rows_pad, 132);
  ASSERT_GT(rows_pad, kVocabSumFewRows);
  EXPECT_EQ(vocab_sum_blocks_per_sm(rows_pad), 3);
  EXPECT_EQ(vocab_sum_blocks_per_sm(kVocabSumFewRows), 1);
  EXPECT_EQ(vocab_sum_blocks_per_sm(8), 1);
  for (const std::int32_t chunks : {0, 1, 7, auto_chunks, 148, kMaxVocabChunks}) {
    const std::string layout =
        chunks == 0 ? std::string(" whole row") : " chunks " + std::to_string(chunks);
    DeviceBuffer out(rows_pad * sizeof(ProposalOut));
    const VocabScratch scratch(rows_pad, kMaxVocabChunks);
    std::vector<ProposalOut> first;
    for (int run = 0; run < (chunks == 0 ? 1 : 3); ++run) {
      if (chunks == 0)
        launch_vocab_pass(meta.as<PassHeader>(), d_logits.as<float>(), vocab, out.as<ProposalOut>(),
                          rows_pad, stream());
      else
        launch_vocab_pass_chunked(meta.as<PassHeader>(), d_logits.as<float>(), vocab,
                                  out.as<ProposalOut>(), rows_pad, chunks, scratch.workspace(),
                                  stream(), false,
                                  run == 0   ? 0
                                  : run == 1 ? 1
                                             : 3);
      synchronize();
      std::vector<ProposalOut> got(cases.size());
      DICE_CUDA_CHECK(cudaMemcpy(got.data(), out.get(), got.size() * sizeof(ProposalOut),
                                 cudaMemcpyDeviceToHost));
      if (run > 0) {
        const std::string rerun =
            std::string(run == 1 ? "vocab pass rerun, 1 block per SM" : "vocab pass rerun, 3") +
            layout;
        for (int r = 0; r < rows; ++r) {
          EXPECT_EQ(got[r].token, first[r].token) << rerun;
          EXPECT_EQ(got[r].confidence, first[r].confidence) << rerun;
          EXPECT_EQ(got[r].entropy, first[r].entropy) << rerun;
        }
        continue;
      }
      first = got;
      for (int r = 0; r < rows; ++r) {
        const std::string what = "vocab pass " + cases[r].what + layout;
        ASSERT_EQ(got[r].status, kProposalOk) << what;
        EXPECT_EQ(got[r].token, want[r].token) << what;
        EXPECT_NEAR(got[r].confidence, want[r].confidence, 1e-6 * want[r].confidence + 1e-12)
            << what;
        EXPECT_NEAR(got[r].entropy, want[r].entropy, 1e-5 * want[r].entropy + 1e-9) << what;
      }
    }
    if (chunks > 0) {
      std::vector<std::uint32_t> left(rows_pad);
      DICE_CUDA_CHECK(
          cudaMemcpy(left.data(), scratch.counters.get(), left.size() * 4, cudaMemcpyDeviceToHost));
      for (int r = 0; r < rows_pad; ++r) EXPECT_EQ(left[r], 0u) << "counter of row " << r << layout;
      // The top-k / top-p rows' bins are left zero for the next pass (and graph replay).
      std::vector<std::uint32_t> counts(std::size_t{1} * rows_pad * kVocabBins);
      std::vector<unsigned long long> masses(counts.size());
      DICE_CUDA_CHECK(cudaMemcpy(counts.data(), scratch.bin_counts.get(),
                                 scratch.bin_counts.bytes(), cudaMemcpyDeviceToHost));
      DICE_CUDA_CHECK(cudaMemcpy(masses.data(), scratch.bin_masses.get(),
                                 scratch.bin_masses.bytes(), cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::count(counts.begin(), counts.end(), 0u), std::ssize(counts))
          << "bin counts left" << layout;
      EXPECT_EQ(std::count(masses.begin(), masses.end(), 0ull), std::ssize(masses))
          << "bin masses left" << layout;
    }
  }
}

TEST(VocabPassChunks, FillTheGpuAtFewRowsAndStayInRange) {
  EXPECT_EQ(vocab_pass_chunks(151936, 8, 132), 66);   // 4 blocks per SM over 8 padded rows
  EXPECT_EQ(vocab_pass_chunks(151936, 1, 132), 149);  // chunks of at least 1,024 ids
  EXPECT_EQ(vocab_pass_chunks(151936, 512, 132), 2);
  EXPECT_EQ(vocab_pass_chunks(151936, 1024, 132), 1);
  EXPECT_EQ(vocab_pass_chunks(500, 8, 132), 1);
  EXPECT_EQ(vocab_pass_chunks(10'000'000, 1, 132), kMaxVocabChunks);
  // The sum kernel's occupancy: the 104-register kernel at few block rows (1 sequence), the
  // 3-blocks-per-SM one above kVocabSumFewRows.
  EXPECT_EQ(vocab_sum_blocks_per_sm(1), 1);
  EXPECT_EQ(vocab_sum_blocks_per_sm(8), 1);
  EXPECT_EQ(vocab_sum_blocks_per_sm(kVocabSumFewRows), 1);
  EXPECT_EQ(vocab_sum_blocks_per_sm(kVocabSumFewRows + 1), 3);
  EXPECT_EQ(vocab_sum_blocks_per_sm(512), 3);
}

TEST_F(CudaOps, VocabPassReportsNaNAndNoAllowedId) {
  const int vocab = 5000;
  std::vector<float> logits(2 * vocab, 0.5f);
  logits[1234] = std::numeric_limits<float>::quiet_NaN();
  logits[777] = std::numeric_limits<float>::quiet_NaN();
  std::vector<PassItem> items(2);
  const std::vector<std::int32_t> block(1, 1), pages(1, 1);
  for (auto& item : items) {
    item.block = block;
    item.block_length = 4;
    item.pages = pages;
  }
  items[1].sampling.vocab_limit = 1;
  items[1].sampling.mask_id = 0;  // nothing allowed
  const PassPlan plan = plan_pass(items, {4, 2, 1, 0});
  const auto meta = upload_bytes(plan.bytes);
  const auto d_logits = upload(logits, CudaDType::kF32);
  // The chunked pass with its sum kernel at one and at three blocks per SM (both finish rows).
  for (const auto& [chunks, occupancy] : {std::pair{0, 0}, {1, 1}, {3, 1}, {1, 3}, {3, 3}}) {
    DeviceBuffer out(8 * sizeof(ProposalOut));
    const VocabScratch scratch(8, 3);
    if (chunks == 0)
      launch_vocab_pass(meta.as<PassHeader>(), d_logits.as<float>(), vocab, out.as<ProposalOut>(),
                        8, stream());
    else
      launch_vocab_pass_chunked(meta.as<PassHeader>(), d_logits.as<float>(), vocab,
                                out.as<ProposalOut>(), 8, chunks, scratch.workspace(), stream(),
                                false, occupancy);
    synchronize();
    std::vector<ProposalOut> got(2);
    DICE_CUDA_CHECK(
        cudaMemcpy(got.data(), out.get(), 2 * sizeof(ProposalOut), cudaMemcpyDeviceToHost));
    const std::string what =
        "chunks " + std::to_string(chunks) + ", sum blocks per SM " + std::to_string(occupancy);
    EXPECT_EQ(got[0].status, kProposalNaN) << what;
    EXPECT_EQ(got[0].token, 777) << what;  // the lowest NaN id, as the CPU's
    EXPECT_EQ(got[1].status, kProposalNoAllowed) << what;
  }
  const VocabScratch scratch(8, 3);
  DeviceBuffer out(8 * sizeof(ProposalOut));
  EXPECT_THROW(launch_vocab_pass_chunked(meta.as<PassHeader>(), d_logits.as<float>(), vocab,
                                         out.as<ProposalOut>(), 8, 3, scratch.workspace(), stream(),
                                         false, 2),
               Error);
}

TEST_F(CudaOps, MeasuredCeilingsArePositive) {
  EXPECT_GT(measure_copy_bandwidth(0, 64 << 20, 3), 1e10);
  EXPECT_GT(measure_gemm_rate(0, 1024, 1024, 1024, 3), 1e12);
  EXPECT_GT(measure_sustained_gemm_rate(0, 1024, 1024, 1024, 0.05), 1e12);
  EXPECT_THROW(measure_sustained_gemm_rate(0, 1024, 1024, 1024, 0.0), Error);
  EXPECT_THROW(measure_sustained_gemm_rate(0, 1024, 1024, 1024, -1.0), Error);
}

}  // namespace
}  // namespace dice::engine::cuda
