#pragma once
// A weight-streaming bf16 GEMM for 17-64 rows on Hopper (issue 6: at 16 sequences, 64 padded
// rows, cuBLASLt streams the SDAR layer weights at 1.3-2.4 TB/s of ~3.0 TB/s,
// bench/results/2026-11-24-panel-gemm-h100): y[rows, out] (fp32) = x[rows, in] (bf16)
// w[out, in]^T (bf16), fp32 accumulation, optionally adding into y. Each block owns `tile_n`
// output columns and one contiguous split of k; the Tensor Memory Accelerator brings x (64 x 64
// boxes, rows past `rows` zero-filled) and w (tile_n x 64 boxes), stage_k / 64 of each per stage,
// into a ring of shared-memory stages (128-byte swizzle, one mbarrier per stage), and one
// warpgroup multiplies them with
// wgmma.mma_async m64n{tile_n}k16 (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply").
// The splits of one column tile form a thread block cluster; their partial sums meet in
// distributed shared memory and block r of the cluster adds rows r of every partial in split
// order: deterministic, no workspace, no counters. Built for sm_90a only (CMake: the
// dice_engine_cuda_sm90a objects), so on other devices its launch fails with no kernel image;
// Gemm takes it only on sm_90 (Gemm::set_wgmma). Per launch about even with cuBLASLt at 64 rows
// where its blocks stream much k, 2-3 us slower where they stream little
// (bench/results/2026-11-25-wgmma-gemm-h100); what it gains is its programmatic early start, so
// the backend gives it the long-block shapes only (wgmma_auto_min_block_k), and the o, gate/up and
// down projections where it folds the RMSNorms into them (WgmmaNormFold, norm_fold.h).

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "norm_fold.h"
#include "ops.h"

namespace dice::engine::cuda {

/// Rows of the wgmma M dimension: the kernel takes 1..64 rows (zero-filled past `rows`).
inline constexpr std::int64_t kWgmmaRowsLimit = 64;
/// k per TMA box: 64 bf16 = one 128-byte swizzle row.
inline constexpr std::int64_t kWgmmaTileK = 64;
/// k per pipeline stage of the engine's launches (Gemm::set_wgmma, CudaBackendOptions::
/// wgmma_stage_k): two boxes, so one mbarrier wait, block barrier and refill per 128 k. At 64
/// rows on an H200 4-19% less time a launch on the SDAR down, o and qkv shapes (4B down 20.6 ->
/// 18.5 us, below cuBLASLt's 19.3), even on the gate/up ones; +0.5-1.1% tok/s on SDAR-4B at 16
/// sequences (bench/results/2026-11-28-wgmma-balanced-h200). With it a launch takes ~5.6 us plus
/// its bytes at the copy rate on every SDAR shape; a producer warp, an MMA group in flight or
/// deeper pipelines did not shorten it (bench/results/2026-11-28-wgmma-producer-h200).
inline constexpr int kWgmmaStageK = 128;
/// Most splits of k (one cluster; 8 is the portable cluster size).
inline constexpr int kWgmmaMaxSplits = 8;
/// Output columns per block of the engine's launches (Gemm::set_wgmma): at 64 rows 64 was as fast
/// as or faster than 128 on every SDAR-1.7B and -4B layer shape (at 32 rows 128 won SDAR-4B's o,
/// 12.5 against 13.6 us; bench/results/2026-11-25-wgmma-gemm-h100, sweep-4-stages-call2.txt).
inline constexpr int kWgmmaTileN = 64;

/// The wgmma kernel's RMSNorm folds (norm_fold.h). Output side (`norm_weight` set; y written,
/// not SwiGLU): after a block writes y[row, n0..n0 + tile_n) it writes normed[row, col] = bf16(y *
/// norm_weight[col]) and square_sums[row, col / kFoldColumns] = the sum of y^2 over those
/// kFoldColumns columns (a fixed shuffle tree: deterministic). Input side (`in_square_sums` set;
/// SwiGLU only; in at most 4,096): x is such a bf16(w * x) of width `in`, and gate and up are
/// multiplied by 1 / sqrt(folded_mean_square(total, in, eps)) (rms_norm.cuh) before silu(gate) *
/// up, total = (the row's even sums added in order) + (its odd sums added in order). The sums
/// are loaded before the k loop, so their latency hides under it.
struct WgmmaNormFold {
  const float* norm_weight = nullptr;     ///< fp32 [out]
  void* normed = nullptr;                 ///< bf16 [rows, out]
  float* square_sums = nullptr;           ///< fp32 [rows, out / kFoldColumns]
  const float* in_square_sums = nullptr;  ///< fp32 [rows, in / kFoldColumns]
  float eps = 0.0f;                       ///< the input side's RMSNorm epsilon
};
/// The widest `in` the norm fold's input side takes: each row's square sums are held in the
/// registers of two threads, 32 each.
inline constexpr std::int64_t kWgmmaFoldMaxIn = 4096;

/// The qkv projection's q/k epilogue (CudaBackendOptions::fused_qk_norm_rope): a head vector (q
/// heads, then k, then v) is one column tile at tile_n 128, two at tile_n 64 (one cluster with
/// their splits, which share the rows), and instead of writing y the block that sums a row's head
/// vector does what launch_qk_norm_rope's bf16 head_dim-128 kernel does with it
/// (qk_norm_rope.cuh, the same bits): per-head RMSNorm of q and k with q_norm / k_norm, NeoX
/// rotate-half RoPE at the row's position, q into q_out and k, v into the paged cache at the row's
/// page and slot; with `square_sums` the folded input norm's eps r^2 and 1 / r (norm_fold.h).
/// Rows at or past meta->rows are skipped. The rows' metadata, RoPE pairs and norm weight are read
/// before the kernel's programmatic wait (with early weights), the square sums after it; both
/// land while the k loop streams. `meta` null: off.
struct WgmmaQkRope {
  const PassHeader* meta = nullptr;    ///< the pass (RowInfo: position, page, slot)
  const float* q_norm = nullptr;       ///< fp32 [128]
  const float* k_norm = nullptr;       ///< fp32 [128]
  const float2* rope = nullptr;        ///< (cos, sin) fp32 [positions, 64]
  LayerShape shape{};                  ///< heads, kv_heads, head_dim (128), eps
  void* q_out = nullptr;               ///< bf16 [rows, heads, 128]
  CacheLayer cache{};                  ///< bf16 K and V pages
  const float* square_sums = nullptr;  ///< fp32 [rows, fold_width / 64], or null: no fold
  std::int32_t fold_width = 0;         ///< the folded norm's width (in), at most 4,096
};
/// Column tiles of `tile_n` columns a head vector spans in the q/k epilogue: 2 at tile_n 64, 1 at
/// 128 (kQkHeadDim), 0 for a width the epilogue does not take.
constexpr int wgmma_qk_tiles(int tile_n) {
  return tile_n == 64 || tile_n == kQkHeadDim ? kQkHeadDim / tile_n : 0;
}
/// Rows of one block's share in the q/k epilogue: a warp sums rows w, w + 4, ... of it (4 warps),
/// at most 4 each, so a launch of `rows` rows needs ceil(rows / (splits x 128 / tile_n)) <= 16.
inline constexpr std::int64_t kWgmmaQkRowsPerBlock = 16;
/// Most splits of a q/k epilogue launch (its epilogue loads a row's partials from at most this
/// many blocks, all rows' together): with kWgmmaQkRowsPerBlock, up to 64 rows.
inline constexpr int kWgmmaQkMaxSplits = 4;

/// The split count of a q/k epilogue launch (WgmmaQkRope) at `tile_n` (64 or 128): the split
/// rule's (wgmma_default_splits at tile_n), within [ceil(rows / (kWgmmaQkRowsPerBlock x 128 /
/// tile_n)), min(wgmma_max_splits(in, stage_k), kWgmmaQkMaxSplits)]; 0 when that range is empty,
/// stage_k is not 128 or tile_n is neither.
int wgmma_qk_rope_splits(std::int64_t rows, std::int64_t in, std::int64_t out, int sms, int stage_k,
                         int tile_n);

/// Whether the kernel computes this GEMM with `tile_n` columns per block (64 or 128): 1 <= rows
/// <= kWgmmaRowsLimit, in a positive multiple of 64, out a positive multiple of tile_n, x and w
/// 16-byte aligned (the tensor maps' rule), y (fp32, or the SwiGLU epilogue's bf16) 16-byte
/// aligned.
bool wgmma_gemm_fits(std::int64_t rows, std::int64_t in, std::int64_t out, int tile_n,
                     const void* x, const void* w, const void* y);

/// The most split counts that may run `in` with `stage_k` k a stage: min(kWgmmaMaxSplits,
/// in / stage_k), so every split has a stage; 0 (none) when stage_k is not 64 or 128 or does not
/// divide `in`. The one place the kernel's k constraints live: launch() and
/// max_active_clusters() take 1..this many splits, the split rule picks among them, Gemm takes a
/// shape when there is one. No default `stage_k` here or in the rules below: a split count is
/// only valid with the stage k it was chosen for (launch's default is kWgmmaStageK).
int wgmma_max_splits(std::int64_t in, int stage_k);

/// The split counts 1..wgmma_max_splits(in, stage_k) as a list (empty when there is none), for
/// callers that try each (tests, timings). Each split count gives its own (deterministic) bits.
std::vector<int> wgmma_split_options(std::int64_t in, int stage_k);

/// The split count of the rule: the fewest splits of 1..wgmma_max_splits(in, stage_k) whose
/// blocks (out / tile_n column tiles x splits) number at least 15/16 of `sms`, else the most (1
/// when there is none). A fixed rule, not a timing, since the split count changes the bits.
/// Measured at 32 and 64 rows on the SDAR layer shapes (bench/results/2026-11-25-wgmma-gemm-h100).
int wgmma_default_splits(std::int64_t in, std::int64_t out, int tile_n, int sms, int stage_k);

/// The k (elements of `in`) each block streams under the split rule: in / wgmma_default_splits.
/// A block's fixed cost (first copies, cluster barriers, epilogue) is paid once per this much k,
/// so short blocks lose to cuBLASLt (Gemm::set_wgmma's `min_block_k`).
std::int64_t wgmma_block_k(std::int64_t in, std::int64_t out, int tile_n, int sms, int stage_k);

/// Seconds of weight streaming a block must have for the wgmma kernel to be worth its fixed cost
/// (wgmma_auto_min_block_k): 7.5 us, which on an H100 rounds up to blocks of 1,536 k (below).
inline constexpr double kWgmmaMinBlockSeconds = 7.5e-6;

/// The device's default of CudaBackendOptions::wgmma_min_block_k: the least multiple of
/// kWgmmaTileK whose block of kWgmmaTileN bf16 columns streams for kWgmmaMinBlockSeconds at one
/// SM's share of the peak bandwidth (block_k x kWgmmaTileN x 2 bytes x `sms` / `peak_bytes_per_s`
/// >= kWgmmaMinBlockSeconds). The fixed cost of a launch is time, and a faster memory streams a
/// block sooner, so the limit in k grows with the bandwidth per SM.
/// - H100 (132 SMs, 3.35e12 bytes/s): 1,536, the SDAR MLP projections and the 64-row lm_head;
///   +1.4-2.9% (SDAR-4B) and -0.1 to +2.7% (SDAR-1.7B) at 16 x 1,024 against cuBLASLt
///   (bench/results/2026-11-27-wgmma-min-block-k-h100).
/// - H200 (132 SMs, 4.8-4.9e12): 2,176 from the attributes the H200s of
///   bench/results/2026-11-28-host-time report (2,240 at the spec's 3,201 MHz), SDAR-4B's MLP
///   projections and lm_head, none of SDAR-1.7B's: 1.016 / 1.005 against cuBLASLt there (at
///   1,536: 1.001 / 0.975, bench/results/2026-11-27-wgmma-min-block-k-h200).
/// INT64_MAX (no shape) when `peak_bytes_per_s` is not a positive finite number or `sms` is not
/// positive.
std::int64_t wgmma_auto_min_block_k(double peak_bytes_per_s, int sms);

/// The shared-memory stages of a launch of `blocks` blocks over `sms` SMs of `shared_per_sm`
/// bytes: as many (2..8) as fit two blocks a SM up to 2 x sms blocks, three above (H100, tile_n
/// 64: 6 or 4 stages of 16 KiB). Two at least, since a cluster's blocks need room on SMs of one
/// GPC; three for large grids, so that they run in one wave (SDAR-4B's gate/up projection at 64
/// rows, 304 blocks, took 45.3 us at 6 stages, two blocks a SM, against 40.0 at 4).
/// `stage_k` (64 or 128): the k a stage holds (kWgmmaStageK); 128 k stages take twice the bytes.
int wgmma_stages(int tile_n, std::int64_t blocks, int sms, int shared_per_sm, int stage_k);

/// Whether the current device runs the wgmma kernels: compute capability 9.x (they are built
/// for sm_90a only). Throws dice::Error when the device cannot be queried.
bool wgmma_gemm_supported();

/// The wgmma GEMM's launcher on the current device. Made once (Gemm owns one): it looks up
/// cuTensorMapEncodeTiled, reads the SM count and shared memory per SM, and raises the kernels'
/// dynamic shared-memory limit to the most any stage count takes, so that a launch only encodes
/// its two tensor maps and launches. Throws dice::Error when the device is not sm_90 (the kernels
/// exist for sm_90a only, wgmma_gemm_supported) or the driver has no cuTensorMapEncodeTiled.
class WgmmaGemm {
 public:
  WgmmaGemm();

  /// Launches y = x w^T (+ y with `accumulate`) as (out / tile_n) x splits blocks of 128 threads,
  /// clusters of `splits` along k, wgmma_stages stages. Capture-safe (tensor maps are encoded on
  /// the host per launch and passed by value). `pdl`: programmatic dependent launch
  /// (launch.cuh); with `early_weights` the blocks request their first stages' weights before they
  /// wait for the kernel before them. `swiglu_act`: y is not written; w's rows alternate gate and
  /// up (swiglu.cuh) and the blocks write swiglu_act [rows, out / 2] (bf16) = silu(gate) * up of
  /// each summed output pair (not with `accumulate`). Throws dice::Error for a shape it does not
  /// take (wgmma_gemm_fits), a split count outside 1..wgmma_max_splits(in, stage_k), accumulate
  /// with swiglu_act, or a failed encode or launch. `stage_k`: 64, or 128 (each stage two 64-k
  /// boxes of x and of w: one barrier wait, block barrier and refill per 128 k). `fold`: the
  /// RMSNorm folds (WgmmaNormFold); throws dice::Error for an output side with swiglu_act, an
  /// input side without it or with in above 4,096, a side with a null buffer, or a width (out,
  /// resp. in) that 64 does not divide. `qk` (WgmmaQkRope, `meta` set): y is not written; needs
  /// tile_n 64 (clusters of 2 tiles x splits) or 128, stage_k 128, no accumulate, SwiGLU or
  /// fold, head_dim 128, out = (heads + 2 kv_heads) 128, ceil(rows / (splits x 128 / tile_n))
  /// <= kWgmmaQkRowsPerBlock, splits <= kWgmmaQkMaxSplits,
  /// every pointer set (square_sums with fold_width a multiple of 64 up to 4,096), 8-byte aligned
  /// outputs; else dice::Error.
  void launch(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
              std::int64_t out, bool accumulate, int tile_n, int splits, cudaStream_t stream,
              bool pdl = false, bool early_weights = false, void* swiglu_act = nullptr,
              int stage_k = kWgmmaStageK, const WgmmaNormFold& fold = {},
              const WgmmaQkRope& qk = {}) const;

  /// How many clusters of launch()'s configuration for this shape (tile_n 64 or 128, `splits`
  /// blocks a cluster, wgmma_stages stages, no SwiGLU) can be resident on the device at once
  /// (cudaOccupancyMaxActiveClusters): a launch of more than out / tile_n clusters runs in more
  /// than one wave (CudaOps.SkinnyGemmTimings prints it; every SDAR shape fits in one,
  /// bench/results/2026-11-28-wgmma-balanced-h200). Throws dice::Error for a tile width, or a
  /// split count outside 1..wgmma_max_splits(in, stage_k), or a failed query.
  int max_active_clusters(std::int64_t in, std::int64_t out, int tile_n, int splits,
                          int stage_k = kWgmmaStageK) const;

 private:
  void* encode_ = nullptr;  ///< PFN_cuTensorMapEncodeTiled_v12000 (cudaTypedefs.h)
  int sms_ = 0;
  int shared_per_sm_ = 0;  ///< bytes
};

}  // namespace dice::engine::cuda
