#pragma once
// Device helpers shared by the kernels: element conversion, vector stores, warp and block
// reductions.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace dice::engine::cuda {

__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// Stores 4 values at dst (16-byte aligned for float, 8-byte for bf16, rounded to nearest) in one
/// vector store.
__device__ __forceinline__ void store4(float* dst, float a, float b, float c, float d) {
  *reinterpret_cast<float4*>(dst) = make_float4(a, b, c, d);
}
__device__ __forceinline__ void store4(__nv_bfloat16* dst, float a, float b, float c, float d) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(c, d);
  uint2 bits;
  bits.x = *reinterpret_cast<const unsigned*>(&lo);
  bits.y = *reinterpret_cast<const unsigned*>(&hi);
  *reinterpret_cast<uint2*>(dst) = bits;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// The cross-warp step of block_sum, for warp 0 (every lane calls it; the sum comes back to all):
/// lane i < warps takes per_warp[i], the others 0, then warp_sum. Kernels that sum several
/// values per block in block_sum's order (the skinny GEMM's fused norm) call warp_sum and this.
template <typename T>
__device__ __forceinline__ T sum_of_warps(const T* per_warp, int warps) {
  const int lane = threadIdx.x & 31;
  return warp_sum(lane < warps ? per_warp[lane] : T(0));
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024), the same value returned to
/// every thread; deterministic (fixed order). `scratch` holds 32 values; it is reused after a
/// barrier, so consecutive calls are safe.
template <typename T>
__device__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch free (a previous call may still read it)
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const T total = sum_of_warps(scratch, warps);
    if (lane == 0) scratch[0] = total;
  }
  __syncthreads();
  return scratch[0];
}

}  // namespace dice::engine::cuda
