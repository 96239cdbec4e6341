#pragma once
// The "skinny" bf16 GEMM for few rows (issue 6: at 1-16 sequences cuBLASLt streams the weights
// at about 64% of the copy bandwidth): y[rows, out] (fp32) = x[rows, in] (bf16) w[out, in]^T
// (bf16), fp32 accumulation, optionally adding into y. Tensor cores through
// mma.sync.m16n8k16.row.col (PTX ISA, "Matrix fragments for mma.m16n8k16"); each weight is
// read once, streamed past L1 and marked evict-first in L2; x (small, L2-resident) is re-read by
// every block. The dispatch rule and the tile choice are host-only (tested without a device).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dice/engine/cuda_options.h"

namespace dice::engine::cuda {

/// Most rows the kernel takes (four m16 tiles).
inline constexpr std::int64_t kSkinnyRowsLimit = 64;
/// Warps per block; each owns a fixed contiguous share of the k chunks (split-K inside the block,
/// summed through shared memory in warp order: deterministic).
inline constexpr int kSkinnyWarps = 8;

/// Most rows the fused RMSNorm (GemmNorm) takes, in either few-row kernel (one m16 tile).
inline constexpr std::int64_t kGemmNormRowsLimit = 16;
/// Most dynamic shared memory (bytes) of the fused norm's normalised rows: two blocks per SM fit.
inline constexpr std::size_t kSkinnyNormSharedLimit = 96 * 1024;

/// RMSNorm fused into a GEMM's prologue (the skinny and the streaming kernel's; Gemm::run_normed):
/// x = bf16(weight * (residual * scale)) with scale = 1 / sqrt(mean(residual^2) + eps) per row,
/// computed by every block with rms_norm_vec_kernel's layout and arithmetic (rms_norm.cuh): the
/// same bits as that kernel's output, so the same y. residual: fp32 [rows, in]; weight: fp32 [in];
/// both 16-byte aligned.
struct GemmNorm {
  const float* residual = nullptr;
  const float* weight = nullptr;
  float eps = 0.0f;
};

/// Dynamic shared memory (bytes) of the fused norm's normalised rows for `rows` x `in`: rows *
/// (in + 8) bf16 (0 for rows < 1). The streaming kernel's prologue keeps the same rows
/// (stream_norm_shared_bytes).
std::size_t gemm_norm_shared_bytes(std::int64_t rows, std::int64_t in);

/// What both few-row kernels' fused norm prologues (rms_norm.cuh's normalise_rows) ask of a GEMM:
/// 1 <= rows <= kGemmNormRowsLimit, in <= 4,096, eps > 0, residual and weight 16-byte aligned.
/// skinny_norm_fits and stream_norm_fits add their kernel's rule for in and its shared memory.
bool norm_prologue_fits(std::int64_t rows, std::int64_t in, const GemmNorm& norm);

/// Whether the fused norm takes this GEMM (on top of skinny_gemm_fits): 1 <= rows <=
/// kGemmNormRowsLimit, in <= 4,096 (a multiple of 32), its shared rows within
/// kSkinnyNormSharedLimit, eps > 0, residual and weight 16-byte aligned.
bool skinny_norm_fits(std::int64_t rows, std::int64_t in, const GemmNorm& norm);

/// Whether the skinny kernel computes this GEMM: bf16 weights and inputs, 1 <= rows <=
/// min(max_rows, kSkinnyRowsLimit), in a positive multiple of 32 (one k chunk of a warp), out a
/// positive multiple of 8 (one n8 tile), and x, w and the output y (fp32, or the SwiGLU
/// epilogue's bf16) 16-byte aligned. Otherwise cuBLASLt runs it. max_rows 0 turns the kernel off.
bool skinny_gemm_fits(bool bf16, std::int64_t rows, std::int64_t in, std::int64_t out,
                      std::int64_t max_rows, const void* x, const void* w, const void* y);

/// m16 tiles for `rows` rows: 1 (<= 16), 2 (<= 32) or 4 (<= 64).
int skinny_m_tiles(std::int64_t rows);

/// The n8 tiles per block (each warp computes all of them over its k share) that may run
/// `rows` x `out`: 1, 2 and 4 where out divides into them and registers allow (m tiles x n tiles
/// <= 8). In increasing order; never empty for a shape skinny_gemm_fits accepts.
std::vector<int> skinny_n_tile_options(std::int64_t rows, std::int64_t out);

/// The default n8 tiles per block before any timing: the most (fewer re-reads of x) that still
/// give at least two blocks per SM (out / (8 n) >= 2 sms), else 1 (the most blocks).
int skinny_default_n_tiles(std::int64_t rows, std::int64_t out, int sms);

/// Whether a skinny or streaming launch reads y's old values before its programmatic wait
/// (launch_skinny_gemm's and launch_stream_gemm's `y_ready`): it adds into y, the caller says y
/// is final when its blocks start, and it is a PDL launch with early weights. The one rule the
/// launchers and Gemm's count (Gemm::early_y_launches) share; the streaming launcher also needs
/// whole tiles (stream_reads_y_early).
inline bool reads_y_early(bool y_ready, bool accumulate, bool pdl, bool early_weights) {
  return y_ready && accumulate && pdl && early_weights;
}

/// How a skinny launch with early weights stages its weight share (launch_skinny_gemm).
struct SkinnyStaging {
  /// With `early_weights`, without `norm`: each warp also copies the rest of its weights
  /// (skinny_staged_chunks chunks) into shared memory before the wait.
  bool share = false;
  /// Rounds of those copies (one 32-k chunk per n8 tile each) a warp issues before it waits for
  /// them to land, then the next batch; 0: all at once. Fewer bytes in flight at a time leave
  /// the memory system's queues shorter for a latency-bound kernel running beside the staging
  /// (the attention). 0 to kStageBatchRoundsLimit.
  std::int32_t batch_rounds = 0;
};

/// Launches y = x w^T (+ y with `accumulate`) with `n_tiles` n8 tiles per block (one of
/// skinny_n_tile_options): grid out / (8 n_tiles) blocks of kSkinnyWarps warps. The result does
/// not depend on n_tiles (each output's sum runs over the same k order). Capture-safe (no
/// allocation, no synchronization). `pdl`: programmatic dependent launch (launch.cuh). `norm`:
/// x is not read; the blocks compute it as RMSNorm(norm->residual) (GemmNorm; one launch
/// instead of the norm kernel and this one, the same bits). `swiglu_act`: y is not written;
/// w's rows alternate gate and up (swiglu.cuh) and the blocks write swiglu_act [rows, out / 2]
/// (bf16) = silu(gate) * up of each output pair (the same bits as y then launch_swiglu; not with
/// `accumulate`). `early_weights`: each block loads its first weights before it waits for the
/// kernel before it (with `pdl`, they come while that kernel still runs when it let this one
/// start early: launch.cuh, "Early start"; the same bits). Throws dice::Error for a shape it does
/// not take (skinny_gemm_fits, and skinny_norm_fits with a norm), accumulate with swiglu_act, or a
/// failed launch, or batch_rounds outside 0..kStageBatchRoundsLimit. `staging.share` (with
/// `early_weights`, without `norm`): each warp also copies the rest of its weights
/// (skinny_staged_chunks chunks) into shared memory before the wait, `staging.batch_rounds` rounds
/// at a time, so that none is loaded after it (a remainder shorter than one iteration still is);
/// where they do not fit, nothing is staged. For a GEMM that follows a long, latency-bound kernel
/// which lets it start early (the o projection after the attention at few rows). The same bits (the
/// same values in the same order). `y_ready` (with accumulate, pdl and early_weights): the caller
/// guarantees that y's old values are final once this launch's blocks start (Gemm::run), so each
/// thread reads its outputs' old values before the programmatic wait, not after it; the same bits.
void launch_skinny_gemm(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                        std::int64_t out, bool accumulate, int n_tiles, cudaStream_t stream,
                        bool pdl = false, const GemmNorm* norm = nullptr,
                        void* swiglu_act = nullptr, bool early_weights = false,
                        SkinnyStaging staging = {}, bool y_ready = false);

/// Shared memory a staging launch may take per block (96 KiB: the whole share of SDAR-4B's o
/// projection at 2 n tiles; two such blocks still fit on an H100 SM).
inline constexpr std::size_t kSkinnyStageLimit = 96 * 1024;

/// The chunks of 32 k per warp that a launch with `staging.share` copies into shared memory: the
/// longest warp share of in / 32 chunks less the first iteration's (held in registers), rounded
/// down to whole iterations (the SDAR o projections' shares divide evenly: nothing is left); 0
/// when that would take more than kSkinnyStageLimit bytes (measured: staging part of a share
/// gains nothing, bench/results/2026-11-25-kernel-trace-h100).
std::int32_t skinny_staged_chunks(std::int64_t rows, std::int64_t in, int n_tiles);
/// The dynamic shared memory of `chunks` staged chunks per warp at `n_tiles` n8 tiles: bytes.
std::size_t skinny_stage_bytes(std::int32_t chunks, int n_tiles);

/// The chunks each warp of a skinny launch without a fused norm stages in shared memory before
/// its programmatic wait (launch_skinny_gemm): skinny_staged_chunks(rows, in, n_tiles) with
/// `early_weights` and staging.share, else 0 (none). The one rule the launcher and Gemm's count
/// (Gemm::staged_launches) share.
inline std::int32_t skinny_launch_staged_chunks(const SkinnyStaging& staging, bool early_weights,
                                                std::int64_t rows, std::int64_t in, int n_tiles) {
  return early_weights && staging.share ? skinny_staged_chunks(rows, in, n_tiles) : 0;
}

}  // namespace dice::engine::cuda
