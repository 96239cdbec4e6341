#include "gemm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>

#include "cuda_check.h"
#include "device_query.h"
#include "dice/core/error.h"
#include "ops.h"
#include "skinny_gemm.h"

namespace dice::engine::cuda {

namespace {

/// Events around what `enqueue` puts on `stream` (it returns nothing). Waits for the second
/// event and returns the time between the two, in ms. Throws dice::Error on CUDA failures.
template <typename F>
float timed_ms(cudaStream_t stream, const Event& start, const Event& stop, F&& enqueue) {
  start.record(stream);
  enqueue();
  stop.record(stream);
  stop.synchronize();
  return stop.since(start);
}

/// Mean time (us) of one of `steps` calls of `step(k)` (k = 0 .. steps - 1, each enqueuing work on
/// `stream`) as a forward runs them: captured in one CUDA graph on `stream` (capture_graph),
/// replayed once to warm up, then one replay timed between `start` and `stop`.
/// Timed launch by launch, a GEMM carries launch overhead that the forward's graphs do not pay,
/// and the autotune chose by it (0.8-2.3% fewer tok/s at 16 and 128 sequences on an H100,
/// bench/results/2026-11-24-gemm-autotune-h100). Throws dice::Error on CUDA or cuBLASLt
/// failures.
double graph_time_us(cudaStream_t stream, int steps, const Event& start, const Event& stop,
                     const std::function<void(int)>& step) {
  const GraphExec graph = capture_graph(stream, [&] {
    for (int k = 0; k < steps; ++k) step(k);
  });
  graph.launch(stream);
  const float ms = timed_ms(stream, start, stop, [&] { graph.launch(stream); });
  return 1e3 * static_cast<double>(ms) / steps;
}

/// Enqueues a memset of `flush` (twice the L2: Gemm::set_cold_tune) that leaves the L2 holding
/// none of a GEMM's operands; `k` varies the value written. Throws dice::Error on failure.
void flush_l2(const DeviceBuffer& flush, int k, cudaStream_t stream) {
  DICE_CUDA_CHECK(cudaMemsetAsync(flush.get(), k & 0xFF, flush.bytes(), stream));
}

}  // namespace

Gemm::Gemm(std::int64_t skinny_max_rows, bool programmatic_launch, std::size_t workspace_bytes,
           std::int32_t sm_count_target)
    : skinny_max_rows_(skinny_max_rows),
      pdl_(programmatic_launch),
      sm_count_target_(sm_count_target),
      workspace_(workspace_bytes),
      hash_(256) {
  if (skinny_max_rows < 0 || skinny_max_rows > kSkinnyRowsLimit)
    throw Error(fmt::format("skinny GEMM rows {}: expected 0 (off) to {}", skinny_max_rows,
                            kSkinnyRowsLimit));
  sms_ = device_attribute(cudaDevAttrMultiProcessorCount);
  if (sm_count_target < 0 || sm_count_target > sms_)
    throw Error(
        fmt::format("GEMM SM count target {}: expected 0 (every SM) to {}", sm_count_target, sms_));
  DICE_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

void Gemm::set_stream_gemm(bool on, double min_fill, bool split) {
  if (!(min_fill >= 0.0 && min_fill <= 1.0))
    throw Error(fmt::format("streaming GEMM minimum fill {}: expected 0 to 1", min_fill));
  // The kernel's bulk copies need sm_90, its ring 146 KiB of shared memory per block (not on a
  // device that offers less, e.g. 99 KiB on compute capability 12.0): there it stays off.
  stream_ = on && device_attribute(cudaDevAttrComputeCapabilityMajor) >= 9 &&
            static_cast<std::size_t>(device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin)) >=
                kStreamSharedBytes;
  stream_min_fill_ = min_fill;
  if (stream_ && split) {
    if (stream_split_slots_.bytes() == 0)
      stream_split_slots_ = DeviceBuffer(stream_split_slot_bytes(sms_));
  } else {
    stream_split_slots_ = DeviceBuffer();
  }
}

void Gemm::set_stream_dynamic(double dynamic_share, double min_tiles) {
  if (!(dynamic_share >= 0.0 && dynamic_share < 1.0))
    throw Error(
        fmt::format("streaming GEMM dynamic share {}: expected 0 (off) to below 1", dynamic_share));
  if (!(min_tiles >= 1.0))
    throw Error(
        fmt::format("streaming GEMM dynamic tail minimum tiles a block {}: expected 1 "
                    "or more",
                    min_tiles));
  stream_dynamic_share_ = dynamic_share;
  stream_dynamic_min_tiles_ = min_tiles;
  if (dynamic_share > 0.0) {
    if (stream_dynamic_counters_.bytes() == 0) {
      stream_dynamic_counters_ = DeviceBuffer(kStreamDynamicCounterBytes);
      DICE_CUDA_CHECK(cudaMemset(stream_dynamic_counters_.get(), 0, kStreamDynamicCounterBytes));
    }
  } else {
    stream_dynamic_counters_ = DeviceBuffer();
  }
}

bool Gemm::stream_splits(std::int64_t in, std::int64_t out) const {
  // stream_split_saving_k is 0 where stream_split_fits does not hold.
  static_assert(kStreamSplitMinSavingK > 0);
  return stream_split_slots_.bytes() > 0 &&
         stream_split_saving_k(in, out, sms_) >= kStreamSplitMinSavingK;
}

bool Gemm::streams(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                   const void* x, const void* w, const void* y) const {
  return stream_ && skinny(dtype, rows, in, out, x, w, y) &&
         stream_gemm_fits(rows, in, out, x, w, y) &&
         (stream_gemm_fill(out, sms_) >= stream_min_fill_ || stream_splits(in, out));
}

bool Gemm::skinny(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                  const void* x, const void* w, const void* y) const {
  return skinny_gemm_fits(dtype == CudaDType::kBF16, rows, in, out, skinny_max_rows_, x, w, y);
}

void Gemm::set_wgmma(bool on, std::int64_t min_block_k, int stage_k) {
  if (min_block_k < 0)
    throw Error(fmt::format("wgmma GEMM minimum k per block {}: expected 0 or more", min_block_k));
  if (std::ranges::find(kWgmmaStageKChoices, stage_k) == kWgmmaStageKChoices.end())
    throw Error(fmt::format("wgmma GEMM k per stage {}: expected one of {}", stage_k,
                            fmt::join(kWgmmaStageKChoices, ", ")));
  wgmma_min_block_k_ = min_block_k;
  wgmma_stage_k_ = stage_k;
  if (on && wgmma_gemm_supported()) {
    if (!wgmma_) wgmma_.emplace();
  } else {
    wgmma_.reset();
  }
}

bool Gemm::folds_norm(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                      const void* x, const void* w, const void* y) const {
  return wgmma_.has_value() && dtype == CudaDType::kBF16 &&
         !skinny(dtype, rows, in, out, x, w, y) &&
         wgmma_gemm_fits(rows, in, out, kWgmmaTileN, x, w, y) &&
         wgmma_max_splits(in, wgmma_stage_k_) > 0;
}

bool Gemm::wgmma(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                 const void* x, const void* w, const void* y) const {
  return folds_norm(dtype, rows, in, out, x, w, y) &&
         wgmma_block_k(in, out, kWgmmaTileN, sms_, wgmma_stage_k_) >= wgmma_min_block_k_;
}

void Gemm::run_wgmma(const void* x, const void* w, float* y, void* act, std::int64_t rows,
                     std::int64_t in, std::int64_t out, bool accumulate, const WgmmaNormFold& fold,
                     cudaStream_t stream) {
  wgmma_->launch(x, w, y, rows, in, out, accumulate, kWgmmaTileN,
                 wgmma_default_splits(in, out, kWgmmaTileN, sms_, wgmma_stage_k_), stream, pdl_,
                 early_weights_, act, wgmma_stage_k_, fold);
  ++wgmma_launches_;
}

void Gemm::run_folded(const void* x, const void* w, float* y, void* act, std::int64_t rows,
                      std::int64_t in, std::int64_t out, bool accumulate, const WgmmaNormFold& fold,
                      cudaStream_t stream) {
  if (rows <= 0) return;
  if (!folds_norm(CudaDType::kBF16, rows, in, out, x, w, act != nullptr ? act : y))
    throw Error(
        fmt::format("GEMM with a folded RMSNorm: rows {} in {} out {} is not a shape the "
                    "wgmma kernel takes (set_wgmma off, skinny rows limit {}, or no fit)",
                    rows, in, out, skinny_max_rows_));
  run_wgmma(x, w, y, act, rows, in, out, accumulate, fold, stream);
}

static_assert(std::ranges::all_of(kQkRopeTileChoices,
                                  [](int tile_n) { return wgmma_qk_tiles(tile_n) > 0; }),
              "every CLI choice of the q/k epilogue's column tile is one the epilogue takes");

void Gemm::set_qk_rope_tile_n(int tile_n) {
  if (wgmma_qk_tiles(tile_n) == 0)
    throw Error(fmt::format("q/k epilogue column tile {}: expected one of {}", tile_n,
                            fmt::join(kQkRopeTileChoices, ", ")));
  qk_rope_tile_n_ = tile_n;
}

int Gemm::qk_rope_splits(CudaDType dtype, std::int64_t rows, std::int64_t in,
                         const LayerShape& shape, const void* x, const void* w,
                         const void* q_out) const {
  const std::int64_t out = static_cast<std::int64_t>(shape.heads + 2 * shape.kv_heads) * kQkHeadDim;
  const bool fits = wgmma_.has_value() && dtype == CudaDType::kBF16 &&
                    shape.head_dim == kQkHeadDim && shape.heads > 0 && shape.kv_heads > 0 &&
                    !skinny(dtype, rows, in, out, x, w, q_out) &&
                    wgmma_gemm_fits(rows, in, out, qk_rope_tile_n_, x, w, q_out);
  return fits ? wgmma_qk_rope_splits(rows, in, out, sms_, wgmma_stage_k_, qk_rope_tile_n_) : 0;
}

bool Gemm::fuses_qk_rope(CudaDType dtype, std::int64_t rows, std::int64_t in,
                         const LayerShape& shape, const void* x, const void* w,
                         const void* q_out) const {
  return qk_rope_splits(dtype, rows, in, shape, x, w, q_out) > 0;
}

void Gemm::run_qk_rope(const void* x, const void* w, const WgmmaQkRope& qk, std::int64_t rows,
                       std::int64_t in, cudaStream_t stream) {
  if (rows <= 0) return;
  const std::int64_t out =
      static_cast<std::int64_t>(qk.shape.heads + 2 * qk.shape.kv_heads) * qk.shape.head_dim;
  const int splits = qk_rope_splits(CudaDType::kBF16, rows, in, qk.shape, x, w, qk.q_out);
  if (splits == 0)
    throw Error(fmt::format(
        "qkv GEMM with the q/k epilogue: rows {} in {} (heads {}, kv_heads {}, head_dim {}) is not "
        "a shape the wgmma kernel takes (set_wgmma off or stage k 64, skinny rows limit {}, "
        "head_dim not 128, or no fit)",
        rows, in, qk.shape.heads, qk.shape.kv_heads, qk.shape.head_dim, skinny_max_rows_));
  wgmma_->launch(x, w, nullptr, rows, in, out, false, qk_rope_tile_n_, splits, stream, pdl_,
                 early_weights_, nullptr, wgmma_stage_k_, {}, qk);
  ++wgmma_launches_;
}

void Gemm::run_stream(const void* x, const void* w, float* y, void* act, std::int64_t rows,
                      std::int64_t in, std::int64_t out, bool accumulate, cudaStream_t stream,
                      const GemmNorm* norm, bool y_ready) {
  float* slots =
      norm == nullptr && stream_splits(in, out) ? stream_split_slots_.as<float>() : nullptr;
  StreamDynamic dynamic;
  dynamic.static_tiles =
      stream_dynamic_counters_.bytes() > 0 && stream_dynamic_applies(accumulate, norm, slots)
          ? stream_dynamic_static_tiles(out, sms_, stream_dynamic_share_, stream_dynamic_min_tiles_)
          : 0;
  dynamic.counters = stream_dynamic_counters_.as<unsigned>();
  launch_stream_gemm(x, w, y, rows, in, out, accumulate, act, sms_, stream, pdl_, early_weights_,
                     norm, StreamRing::kByShape, slots, y_ready,
                     dynamic.static_tiles > 0 ? &dynamic : nullptr);
  ++stream_launches_;
  if (dynamic.static_tiles > 0) ++dynamic_launches_;
  if (stream_reads_y_early(y_ready, accumulate, pdl_, early_weights_, slots)) ++early_y_launches_;
}

int Gemm::skinny_n_tiles(std::int64_t rows, std::int64_t in, std::int64_t out,
                         bool accumulate) const {
  const auto it =
      skinny_.find(Key{static_cast<int>(CudaDType::kBF16), rows, in, out, accumulate, false});
  return it != skinny_.end() ? it->second.n_tiles : skinny_default_n_tiles(rows, out, sms_);
}

void Gemm::set_cold_tune(bool on) {
  if (!on)
    l2_flush_ = DeviceBuffer();
  else if (!cold_tune())
    l2_flush_ = DeviceBuffer(
        2 * static_cast<std::size_t>(std::max(device_attribute(cudaDevAttrL2CacheSize), 1 << 20)));
}

double Gemm::tune_skinny(void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                         std::int64_t out, bool accumulate, cudaStream_t stream, int repeats) {
  const Key key{static_cast<int>(CudaDType::kBF16), rows, in, out, accumulate, false};
  if (const auto it = skinny_.find(key); it != skinny_.end() && it->second.tuned) return 0;
  const auto started = std::chrono::steady_clock::now();
  launch_fill_random(CudaDType::kBF16, x, rows * in, 1.0f,
                     0x5EED0000u + static_cast<std::uint64_t>(rows), stream);
  SkinnyPlan p;
  const int by_default = skinny_default_n_tiles(rows, out, sms_);
  p.n_tiles = by_default;
  const std::vector<int> options = skinny_n_tile_options(rows, out);
  const Event start, stop;
  double best_us = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < options.size(); ++i) {
    const int n = options[i];
    launch_skinny_gemm(x, w, y, rows, in, out, accumulate, n, stream, pdl_);  // warm-up
    const float ms = timed_ms(stream, start, stop, [&] {
      for (int k = 0; k < repeats; ++k)
        launch_skinny_gemm(x, w, y, rows, in, out, accumulate, n, stream, pdl_);
    });
    const double us = 1e3 * static_cast<double>(ms) / repeats;
    if (n == by_default) p.choice.heuristic_us = us;
    if (us < best_us) {
      best_us = us;
      p.n_tiles = n;
      p.choice.chosen = static_cast<int>(i);
    }
  }
  p.tuned = true;
  p.choice.rows = rows;
  p.choice.in = in;
  p.choice.out = out;
  p.choice.accumulate = accumulate;
  p.choice.candidates = static_cast<int>(options.size());
  p.choice.same_bits = static_cast<int>(options.size());  // the sum order ignores n_tiles
  p.choice.chosen_us = best_us;
  p.choice.fastest_us = best_us;
  p.choice.algo_id = -1;
  p.choice.tile_id = -1;
  p.choice.splitk = kSkinnyWarps;
  p.choice.stages_id = -1;
  p.choice.cluster_shape_id = -1;
  p.choice.skinny = true;
  p.choice.skinny_n_tiles = p.n_tiles;
  skinny_[key] = p;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

Gemm::~Gemm() {
  for (auto& [key, p] : plans_) {
    if (p.c != nullptr) cublasLtMatrixLayoutDestroy(p.c);
    if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
    if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
    if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
  }
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

const Gemm::Plan& Gemm::plan(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                             bool accumulate, bool bf16_out) {
  const Key key{static_cast<int>(dtype), rows, in, out, accumulate, bf16_out};
  if (bf16_out && (dtype != CudaDType::kBF16 || accumulate || out % 2 != 0))
    throw Error(
        fmt::format("GEMM rows {} in {} out {}: a bf16 output takes bf16 inputs, no "
                    "accumulation and an even out",
                    rows, in, out));
  if (const auto it = plans_.find(key); it != plans_.end()) return it->second;
  // Column-major view: D (out x rows, ld out) = op(A) B with A = w stored as (in x out, ld in),
  // op(A) = A^T, and B = x stored as (in x rows, ld in).
  const cudaDataType_t type = dtype == CudaDType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
  Plan p;
  try {
    DICE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
    DICE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                     &transpose, sizeof transpose));
    DICE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none));
    if (sm_count_target_ > 0)
      DICE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                                                       &sm_count_target_, sizeof sm_count_target_));
    DICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, type, static_cast<std::uint64_t>(in),
                                                 static_cast<std::uint64_t>(out), in));
    DICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, type, static_cast<std::uint64_t>(in),
                                                 static_cast<std::uint64_t>(rows), in));
    DICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, bf16_out ? CUDA_R_16BF : CUDA_R_32F,
                                                 static_cast<std::uint64_t>(out),
                                                 static_cast<std::uint64_t>(rows), out));
    cublasLtMatmulPreference_t preference = nullptr;
    DICE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const std::uint64_t bytes = workspace_.bytes();
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = [&] {
      const cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
          preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes);
      if (s != CUBLAS_STATUS_SUCCESS) return s;
      return cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, preference, 1,
                                            &result, &found);
    }();
    cublasLtMatmulPreferenceDestroy(preference);
    DICE_CUBLAS_CHECK(status);
    if (found == 0)
      throw Error(fmt::format("cuBLASLt has no algorithm for {} GEMM rows {} in {} out {}",
                              dtype == CudaDType::kBF16 ? "bf16" : "fp32", rows, in, out));
    p.algo = result.algo;
  } catch (...) {
    if (p.c != nullptr) cublasLtMatrixLayoutDestroy(p.c);
    if (p.b != nullptr) cublasLtMatrixLayoutDestroy(p.b);
    if (p.a != nullptr) cublasLtMatrixLayoutDestroy(p.a);
    if (p.desc != nullptr) cublasLtMatmulDescDestroy(p.desc);
    throw;
  }
  return plans_.emplace(key, p).first->second;
}

int algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t what) {
  const auto read = [&](auto value) {  // value: the attribute's type, zero
    std::size_t written = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(&algo, what, &value, sizeof value, &written) ==
                   CUBLAS_STATUS_SUCCESS
               ? static_cast<int>(value)
               : -1;
  };
  // The cluster and inner shape ids are 16 bits; the others int32 or uint32 (the same 4 bytes).
  return what == CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID ||
                 what == CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID
             ? read(std::uint16_t{0})
             : read(std::uint32_t{0});
}

bool Gemm::tuned(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                 bool accumulate, bool bf16_out) const {
  if (!bf16_out)  // the skinny kernel writes fp32 only
    if (const auto s = skinny_.find(Key{static_cast<int>(dtype), rows, in, out, accumulate, false});
        s != skinny_.end() && s->second.tuned)
      return true;
  const auto it = plans_.find(Key{static_cast<int>(dtype), rows, in, out, accumulate, bf16_out});
  return it != plans_.end() && it->second.tuned;
}

std::vector<GemmChoice> Gemm::choices() const {
  std::vector<GemmChoice> all;
  for (const auto& [key, p] : plans_)
    if (p.tuned) all.push_back(p.choice);
  for (const auto& [key, p] : skinny_)
    if (p.tuned) all.push_back(p.choice);
  return all;
}

double Gemm::tune(CudaDType dtype, void* x, const void* w, float* y, std::int64_t rows,
                  std::int64_t in, std::int64_t out, bool accumulate, cudaStream_t stream,
                  int candidates, int repeats, bool bf16_out) {
  if (rows <= 0) return 0;
  if (!bf16_out && streams(dtype, rows, in, out, x, w, y)) return 0;  // nothing to choose
  if (!bf16_out && skinny(dtype, rows, in, out, x, w, y))
    return tune_skinny(x, w, y, rows, in, out, accumulate, stream, repeats);
  if (!bf16_out && wgmma(dtype, rows, in, out, x, w, y)) return 0;  // a fixed rule, no timing
  const auto started = std::chrono::steady_clock::now();
  plan(dtype, rows, in, out, accumulate, bf16_out);
  Plan& p = plans_.at(Key{static_cast<int>(dtype), rows, in, out, accumulate, bf16_out});
  if (p.tuned) return 0;
  cublasLtMatmulPreference_t preference = nullptr;
  DICE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const std::uint64_t bytes = workspace_.bytes();
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(candidates));
  int found = 0;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes);
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, preference,
                                            candidates, results.data(), &found);
  cublasLtMatmulPreferenceDestroy(preference);
  DICE_CUBLAS_CHECK(status);
  // Random inputs (the caller's x is dead), so that outputs tell algorithms' roundings apart.
  launch_fill_random(dtype, x, rows * in, 1.0f, 0x5EED0000u + static_cast<std::uint64_t>(rows),
                     stream);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  // A bf16 output is hashed as the 32-bit words of its element pairs (out is even).
  const std::int64_t y_words = bf16_out ? rows * out / 2 : rows * out;
  const std::size_t y_bytes = static_cast<std::size_t>(y_words) * sizeof(float);
  auto* hash = hash_.as<unsigned long long>();
  const Event start, stop;
  unsigned long long reference = 0;
  double best_us = std::numeric_limits<double>::infinity(), fastest_us = best_us;
  int best = -1, same_bits = 0;
  // Candidate 0 is the plan's own algorithm (the heuristic's first choice, the reference: only
  // algorithms with the very same output bits may replace it), then the heuristic's list.
  std::vector<cublasLtMatmulAlgo_t> algos{p.algo};
  for (int i = 0; i < found; ++i) {
    const cublasLtMatmulHeuristicResult_t& r = results[static_cast<std::size_t>(i)];
    if (r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > bytes) continue;
    if (std::memcmp(&r.algo, &p.algo, sizeof r.algo) == 0) continue;
    algos.push_back(r.algo);
  }
  // With cold_tune, each timed launch finds the L2 cold, as the forward's GEMMs do (the layers
  // before have streamed other weights through it).
  // The flushes' own time (per flush) is measured once per shape and subtracted.
  const bool cold = cold_tune();
  const int timed = cold ? std::max(repeats, 8) : repeats;
  const double flush_us = cold ? graph_time_us(stream, timed, start, stop,
                                               [&](int k) { flush_l2(l2_flush_, k, stream); })
                               : 0.0;
  for (std::size_t i = 0; i < algos.size(); ++i) {
    const auto launch = [&] {
      return cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c,
                            &algos[i], workspace_.get(), workspace_.bytes(), stream);
    };
    // Its result from y = 0 (accumulating GEMMs too), hashed.
    DICE_CUDA_CHECK(cudaMemsetAsync(y, 0, y_bytes, stream));
    const cublasStatus_t ran = launch();
    if (i == 0) DICE_CUBLAS_CHECK(ran);          // the plan's algorithm must run
    if (ran != CUBLAS_STATUS_SUCCESS) continue;  // another that cannot run is skipped
    launch_hash(y, y_words, hash, stream);
    unsigned long long bits = 0;
    DICE_CUDA_CHECK(cudaMemcpyAsync(&bits, hash, sizeof bits, cudaMemcpyDeviceToHost, stream));
    // At least 1 ns: a launch that the flushes' jitter hides still has a positive time.
    const double us = std::max(graph_time_us(stream, timed, start, stop,
                                             [&](int k) {
                                               if (cold) flush_l2(l2_flush_, k, stream);
                                               DICE_CUBLAS_CHECK(launch());
                                             }) -
                                   flush_us,
                               1e-3);
    if (i == 0) {
      reference = bits;
      p.choice.heuristic_us = us;
    }
    if (us < fastest_us) fastest_us = us;
    if (bits != reference) continue;
    ++same_bits;
    if (us < best_us) {
      best_us = us;
      best = static_cast<int>(i);
    }
  }
  p.tuned = true;
  p.choice.rows = rows;
  p.choice.in = in;
  p.choice.out = out;
  p.choice.accumulate = accumulate;
  p.choice.bf16_out = bf16_out;
  p.choice.candidates = static_cast<int>(algos.size());
  p.choice.same_bits = same_bits;
  if (best >= 0) {
    p.algo = algos[static_cast<std::size_t>(best)];
    p.choice.chosen = best;
    p.choice.chosen_us = best_us;
    p.choice.fastest_us = fastest_us;
  }
  p.choice.algo_id = algo_config(p.algo, CUBLASLT_ALGO_CONFIG_ID);
  p.choice.tile_id = algo_config(p.algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
  p.choice.splitk = algo_config(p.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  p.choice.stages_id = algo_config(p.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
  p.choice.cluster_shape_id = algo_config(p.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

bool Gemm::fuses_norm(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                      const GemmNorm& norm, const void* w, const void* y) const {
  // A GEMM the streaming kernel takes stays there, with its own norm prologue (one block per SM,
  // the ring filling meanwhile) where its shared memory holds the rows, else unfused: the fused
  // and the separate norm give the same bits.
  // A split launch has no norm prologue: its norm stays a kernel of its own.
  if (streams(dtype, rows, in, out, norm.residual, w, y))
    return !stream_splits(in, out) && stream_norm_fits(rows, in, norm);
  // Every block of a fused launch runs the norm prologue, which the first weight loads only
  // partly hide: fused only where the launch is one wave of two blocks per SM (fused in every
  // launch, 14% slower at 1 sequence: bench/results/2026-11-23-engine-skinny-split-h100).
  return skinny(dtype, rows, in, out, norm.residual, w, y) && skinny_norm_fits(rows, in, norm) &&
         out / (8 * skinny_n_tiles(rows, in, out, false)) <= 2 * static_cast<std::int64_t>(sms_);
}

void Gemm::run_normed(const GemmNorm& norm, const void* w, float* y, std::int64_t rows,
                      std::int64_t in, std::int64_t out, cudaStream_t stream) {
  if (rows <= 0) return;
  if (!fuses_norm(CudaDType::kBF16, rows, in, out, norm, w, y))
    throw Error(
        fmt::format("GEMM with a fused RMSNorm: rows {} in {} out {} is not a shape the "
                    "skinny or the streaming kernel's norm takes (skinny rows limit {})",
                    rows, in, out, skinny_max_rows_));
  if (streams(CudaDType::kBF16, rows, in, out, norm.residual, w, y))
    return run_stream(nullptr, w, y, nullptr, rows, in, out, false, stream, &norm);
  launch_skinny_gemm(nullptr, w, y, rows, in, out, false, skinny_n_tiles(rows, in, out, false),
                     stream, pdl_, &norm, nullptr, early_weights_);
}

bool Gemm::fuses_swiglu(CudaDType dtype, std::int64_t rows, std::int64_t in, std::int64_t out,
                        const void* x, const void* w, const void* act) const {
  return own_kernel(dtype, rows, in, out, x, w, act);
}

void Gemm::run_swiglu(const void* x, const GemmNorm* norm, const void* w, void* act,
                      std::int64_t rows, std::int64_t in, std::int64_t out, cudaStream_t stream) {
  if (rows <= 0) return;
  const void* input = norm != nullptr ? static_cast<const void*>(norm->residual) : x;
  if (!fuses_swiglu(CudaDType::kBF16, rows, in, out, input, w, act) ||
      (norm != nullptr && !fuses_norm(CudaDType::kBF16, rows, in, out, *norm, w, act)))
    throw Error(fmt::format(
        "GEMM with a SwiGLU epilogue{}: rows {} in {} out {} is not a shape "
        "the skinny or the wgmma kernel takes (skinny rows limit {})",
        norm != nullptr ? " and a fused RMSNorm" : "", rows, in, out, skinny_max_rows_));
  if (!skinny(CudaDType::kBF16, rows, in, out, input, w, act))
    return run_wgmma(x, w, nullptr, act, rows, in, out, false, {}, stream);
  if (streams(CudaDType::kBF16, rows, in, out, input, w, act))
    return run_stream(x, w, nullptr, act, rows, in, out, false, stream, norm);
  launch_skinny_gemm(x, w, nullptr, rows, in, out, false, skinny_n_tiles(rows, in, out, false),
                     stream, pdl_, norm, act, early_weights_);
}

void Gemm::run(CudaDType dtype, const void* x, const void* w, float* y, std::int64_t rows,
               std::int64_t in, std::int64_t out, bool accumulate, cudaStream_t stream,
               SkinnyStaging staging, bool y_ready) {
  if (rows <= 0) return;
  if (streams(dtype, rows, in, out, x, w, y))
    return run_stream(x, w, y, nullptr, rows, in, out, accumulate, stream, nullptr, y_ready);
  if (skinny(dtype, rows, in, out, x, w, y)) {
    const int n_tiles = skinny_n_tiles(rows, in, out, accumulate);
    launch_skinny_gemm(x, w, y, rows, in, out, accumulate, n_tiles, stream, pdl_, nullptr, nullptr,
                       early_weights_, staging, y_ready);
    if (reads_y_early(y_ready, accumulate, pdl_, early_weights_)) ++early_y_launches_;
    if (skinny_launch_staged_chunks(staging, early_weights_, rows, in, n_tiles) > 0)
      ++staged_launches_;
    return;
  }
  if (wgmma(dtype, rows, in, out, x, w, y))
    return run_wgmma(x, w, y, nullptr, rows, in, out, accumulate, {}, stream);
  const Plan& p = plan(dtype, rows, in, out, accumulate);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  DICE_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c,
                                   &p.algo, workspace_.get(), workspace_.bytes(), stream));
}

void Gemm::run_bf16_out(const void* x, const void* w, void* y, std::int64_t rows, std::int64_t in,
                        std::int64_t out, cudaStream_t stream) {
  if (rows <= 0) return;
  const Plan& p = plan(CudaDType::kBF16, rows, in, out, false, true);
  const float alpha = 1.0f, beta = 0.0f;
  DICE_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c,
                                   &p.algo, workspace_.get(), workspace_.bytes(), stream));
}

}  // namespace dice::engine::cuda
