#pragma once
// Tensor-core pieces shared by the skinny GEMM (skinny_gemm.cu) and the streaming skinny GEMM
// (stream_gemm.cu): x's 16-byte loads, mma.sync.m16n8k16 on bf16 with a fixed permutation of k
// (skinny_gemm.cu's header comment says which), the C register -> output mapping, and the
// warp-ordered sum of the warps' partial outputs.

#include <cuda_bf16.h>

#include <cstdint>

#include "skinny_gemm.h"

namespace dice::engine::cuda {

/// An L2 policy that evicts these lines first (weights read once per forward).
__device__ __forceinline__ std::uint64_t evict_first_policy() {
  std::uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

/// 16 bytes of x at p (16-byte aligned): read-only global memory (kShared false) or shared memory
/// (the fused norm's normalised rows).
template <bool kShared>
__device__ __forceinline__ uint4 load16(const __nv_bfloat16* p) {
  if constexpr (kShared)
    return *reinterpret_cast<const uint4*>(p);
  else
    return __ldg(reinterpret_cast<const uint4*>(p));
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], std::uint32_t a0, std::uint32_t a1,
                                         std::uint32_t a2, std::uint32_t a3, std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/// One 32-wide k chunk of one (m16, n8) tile: two MMAs over skinny_gemm.cu's permutation of k.
__device__ __forceinline__ void mma_chunk(float (&c)[4], const uint4& xl, const uint4& xh,
                                          const uint4& b) {
  mma_bf16(c, xl.x, xh.x, xl.y, xh.y, b.x, b.y);
  mma_bf16(c, xl.z, xh.z, xl.w, xh.w, b.z, b.w);
}

/// C register `reg` (of MT x NT x 4) of lane `l`, with (m, j, r) = (reg / (4 NT), reg / 4 % NT,
/// reg % 4): its output row m * 16 + l / 4 + 8 (r / 2) (x) and column n0 + 8 j + 2 (l % 4) +
/// r % 2 less the block's first column n0 (y).
template <int NT>
__device__ __forceinline__ int2 output_of(int reg, int l) {
  const int m = reg / (NT * 4), j = (reg / 4) % NT, r = reg % 4;
  return make_int2(m * 16 + l / 4 + 8 * (r / 2), j * 8 + 2 * (l % 4) + r % 2);
}

/// Register `reg` of lane `l` summed over the block's warps in warp order: the one sum order of
/// both epilogues, so an output's bits depend on neither n_tiles nor the epilogue.
template <int kRegs>
__device__ __forceinline__ float warps_total(const float (&partial)[kSkinnyWarps][kRegs][32],
                                             int reg, int l) {
  float sum = partial[0][reg][l];
#pragma unroll
  for (int v = 1; v < kSkinnyWarps; ++v) sum += partial[v][reg][l];
  return sum;
}

}  // namespace dice::engine::cuda
