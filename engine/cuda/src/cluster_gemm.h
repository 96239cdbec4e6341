#pragma once
// The "cluster" bf16 GEMM for 17-128 rows (issue 6: at 16 sequences cuBLASLt streams the layer
// weights at 0.43-0.82 of the copy bandwidth, bench/results/2026-11-24-panel-gemm-h100):
// y[rows, out] (fp32) = x[rows, in] (bf16) w[out, in]^T (bf16), fp32 accumulation, optionally
// adding into y, or a SwiGLU epilogue (swiglu.cuh) writing bf16.
//
// A block owns 128 output columns (w rows) and one of `splits` contiguous ranges of k. Its 8
// warps stream w's tile and x's rows through a multi-stage cp.async pipeline in shared memory
// (64 k per stage) and run mma.sync.m16n8k16 on ldmatrix fragments (warp w: columns 16w..16w+15,
// every row). The `splits` blocks of one column tile form a thread block cluster; after the
// k loop each puts its partial tile in shared memory and the cluster adds them in rank order
// through distributed shared memory (CUDA C++ Programming Guide, "Distributed Shared Memory"):
// deterministic, no workspace, no atomics. With programmatic dependent launch each block loads
// its first stages of weights before it waits for the kernel before it (launch.cuh, "Early
// start"). The dispatch rule (shapes, split count) is host-only and tested without a device.

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

namespace dice::engine::cuda {

/// Output columns (w rows) per block.
inline constexpr std::int64_t kClusterGemmColumns = 128;
/// k per pipeline stage; `in` must be a multiple of it.
inline constexpr std::int64_t kClusterGemmStageK = 64;
/// Most rows the kernel takes (two row tiles: 64 and 128).
inline constexpr std::int64_t kClusterGemmRowsLimit = 128;
/// Most blocks per cluster (k splits of one column tile): the portable cluster size.
inline constexpr int kClusterGemmMaxSplits = 8;

/// Whether the cluster kernel computes this GEMM: bf16, 1 <= rows <= min(max_rows,
/// kClusterGemmRowsLimit), in a positive multiple of kClusterGemmStageK, out a positive multiple
/// of kClusterGemmColumns, and x, w and the output (fp32 y, or the SwiGLU epilogue's bf16) 16-byte
/// aligned. max_rows 0 turns the kernel off.
bool cluster_gemm_fits(bool bf16, std::int64_t rows, std::int64_t in, std::int64_t out,
                       std::int64_t max_rows, const void* x, const void* w, const void* y);

/// The split count (blocks per cluster, 1..kClusterGemmMaxSplits, at most in /
/// kClusterGemmStageK) for `tiles` = out / kClusterGemmColumns column tiles of `in` k on a
/// device where resident[s - 1] clusters of s blocks fit at once: the fewest splits that
/// minimise the estimated makespan ceil(tiles / resident) x ceil(stages / s) + (s > 1: one
/// stage for the merge), in units of one block's pipeline stage (stages = in / 64). Throws
/// dice::Error for tiles < 1, in not a positive multiple of kClusterGemmStageK, or no split
/// count with a resident cluster.
int cluster_gemm_splits(std::int64_t tiles, std::int64_t in, std::span<const int> resident);

/// Clusters of `splits` blocks of the kernel for `rows` rows that the device holds at once
/// (cudaOccupancyMaxActiveClusters; 0 when none fits). Throws dice::Error on a CUDA failure.
int cluster_gemm_resident(std::int64_t rows, int splits, bool swiglu);

/// Launches y = x w^T (+ y with `accumulate`) as out / 128 clusters of `splits` blocks (1..8; 0:
/// cluster_gemm_splits with this device's residency). The result depends on the split count,
/// never on timing. Capture-safe (no allocation, no synchronization). `pdl`: programmatic
/// dependent launch (launch.cuh); `early_weights`: each block loads its first weight stages
/// before it waits for the kernel before it (the same bits). `swiglu_act`: y is not written;
/// w's rows alternate gate and up (swiglu.cuh) and the blocks write swiglu_act [rows, out / 2]
/// (bf16) = silu(gate) * up of each output pair (the same bits as y then launch_swiglu; not
/// with `accumulate`). Throws dice::Error for a shape it does not take (cluster_gemm_fits),
/// a split count out of range, accumulate with swiglu_act, or a failed launch.
void launch_cluster_gemm(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                         std::int64_t out, bool accumulate, int splits, cudaStream_t stream,
                         bool pdl = false, void* swiglu_act = nullptr, bool early_weights = false);

}  // namespace dice::engine::cuda
