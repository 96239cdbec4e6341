#pragma once
// The streaming skinny bf16 GEMM (issue 6: at one sequence the skinny kernel's blocks each load
// their share in one round and then reduce, so a layer's GEMMs stream at 2.2-2.6 TB/s between the
// kernels around them, bench/results/2026-11-25-kernel-trace-h100): y[rows, out] (fp32) = x[rows,
// in] (bf16) w[out, in]^T (bf16), fp32 accumulation, optionally adding into y, or the SwiGLU
// epilogue. One persistent block per SM: a producer thread keeps a ring of shared-memory stages
// full with bulk copies of w (cp.async.bulk, L2 evict-first), from before the kernel's
// programmatic wait on, while eight consumer warps run the skinny kernel's mma.sync.m16n8k16
// chunks (skinny_mma.cuh) on them. Host rules are testable without a device.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dice::engine::cuda {

/// Most rows the streaming kernel takes (one m16 tile).
inline constexpr std::int64_t kStreamRowsLimit = 16;
/// Output columns of one tile (two n8 tiles), the unit of work of a block.
inline constexpr std::int64_t kStreamTileColumns = 16;
/// k of one stage: a tile's 16 weight rows x 512 k (16 KiB of bf16).
inline constexpr int kStreamStageK = 512;
/// Shared-memory bytes of one stage: 16 rows of 512 k, each padded by 64 bytes so that the
/// consumers' 16-byte reads of 8 rows are free of bank conflicts.
inline constexpr std::size_t kStreamStageBytes = 16 * (kStreamStageK * 2 + 64);
/// Most stages of a ring (the dynamic shared memory of one block stays within 227 KiB).
inline constexpr int kStreamMaxStages = 12;

/// Whether the streaming kernel computes this GEMM: 1 <= rows <= kStreamRowsLimit, in a positive
/// multiple of 32, out a positive multiple of kStreamTileColumns, x, w and y (fp32 output or the
/// SwiGLU epilogue's bf16) 16-byte aligned.
bool stream_gemm_fits(std::int64_t rows, std::int64_t in, std::int64_t out, const void* x,
                      const void* w, const void* y);

/// Dynamic shared memory of one block with `stages` stages: the ring, its barriers and the
/// consumers' partial sums (bytes).
std::size_t stream_gemm_shared_bytes(int stages, int stage_k = kStreamStageK,
                                     int tile_columns = 16);

/// Launches y = x w^T (+ y with `accumulate`), or with `swiglu_act` the SwiGLU epilogue
/// (act[rows, out / 2] bf16 = silu(gate) * up of the output pairs, w's rows alternating gate and
/// up, swiglu.cuh; y not written), on min(blocks, out / 16) persistent blocks (`blocks`: the
/// SMs), each taking a contiguous run of 16-column tiles, with a ring of `stages` (2 ..
/// kStreamMaxStages) stages of 16 x 512 weights. `early_weights`: the producer fills the ring
/// before the kernel's programmatic wait (weights are read-only during a forward). The sum of an
/// output runs over its k in a fixed order (the eight warps' chunks, then the warps in order), so
/// the bits do not depend on `blocks`, `stages` or timing; they differ from the skinny kernel's.
/// Capture-safe. `pdl`: programmatic dependent launch (launch.cuh). Throws dice::Error for a
/// shape it does not take (stream_gemm_fits), accumulate with swiglu_act, stages out of range, or
/// a failed launch.
void launch_stream_gemm(const void* x, const void* w, float* y, std::int64_t rows, std::int64_t in,
                        std::int64_t out, bool accumulate, void* swiglu_act, int blocks, int stages,
                        cudaStream_t stream, bool pdl, bool early_weights,
                        int stage_k = kStreamStageK, int tile_columns = 16);

}  // namespace dice::engine::cuda
