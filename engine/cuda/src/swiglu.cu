// SwiGLU of the fused gate/up projection: silu(gate) * up, into the down projection's input.
// The projection's columns alternate gate and up (swiglu.cuh): out[r, i] = silu(gu[r, 2i]) *
// gu[r, 2i + 1].

#include <cuda_bf16.h>

#include <algorithm>

#include "cuda_check.h"
#include "device_utils.cuh"
#include "launch.cuh"
#include "ops.h"
#include "swiglu.cuh"

namespace dice::engine::cuda {

namespace {

/// The 8 values (gate i, up i, ..., gate i + 3, up i + 3) at p (16-byte aligned for bf16, 32 for
/// fp32) as fp32.
__device__ __forceinline__ void load_pairs(const float* p, float (&v)[8]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void load_pairs(const __nv_bfloat16* p, float (&v)[8]) {
  const uint4 bits = *reinterpret_cast<const uint4*>(p);
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&bits);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 f = __bfloat1622float2(pairs[k]);
    v[2 * k] = f.x;
    v[2 * k + 1] = f.y;
  }
}

/// Any inter: one element per thread, grid-stride. TI: gate_up's storage (float or bf16).
template <typename TI, typename T>
__global__ void swiglu_kernel(const TI* gate_up, std::int32_t inter, T* out, std::int64_t count) {
  wait_for_prior_grid();
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = e / inter, i = e % inter;
    const std::int64_t pair = row * 2 * inter + 2 * i;
    out[e] = from_float<T>(silu_times(to_float(gate_up[pair]), to_float(gate_up[pair + 1])));
  }
}

/// inter % 4 == 0: four elements per thread (their four (gate, up) pairs in one or two vector
/// loads), row blockIdx.y; the same values as swiglu_kernel, bit for bit.
template <typename TI, typename T>
__global__ void swiglu_vec4_kernel(const TI* gate_up, std::int32_t inter, T* out) {
  wait_for_prior_grid();
  const std::int32_t i = 4 * static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= inter) return;
  const std::int64_t row = blockIdx.y;
  float v[8];
  load_pairs(gate_up + row * 2 * inter + 2 * i, v);
  store4(out + row * inter + i, silu_times(v[0], v[1]), silu_times(v[2], v[3]),
         silu_times(v[4], v[5]), silu_times(v[6], v[7]));
}

/// Launches the vec4 kernel (inter % 4 == 0, rows on grid y) or the grid-stride one.
template <typename TI, typename T>
void launch_typed(const TI* gate_up, std::int32_t inter, T* out, std::int32_t rows_pad,
                  cudaStream_t stream, bool pdl) {
  const std::int64_t count = static_cast<std::int64_t>(rows_pad) * inter;
  if (count <= 0) return;
  const int threads = 256;
  if (inter % 4 == 0 && rows_pad <= 65535) {  // rows on grid y (at most 65,535)
    const dim3 grid(static_cast<unsigned>((inter / 4 + threads - 1) / threads),
                    static_cast<unsigned>(rows_pad));
    launch_kernel("swiglu_vec4_kernel", swiglu_vec4_kernel<TI, T>, grid, threads, 0, stream, pdl,
                  gate_up, inter, out);
    return;
  }
  const auto blocks =
      static_cast<int>(std::min<std::int64_t>((count + threads - 1) / threads, 65536));
  launch_kernel("swiglu_kernel", swiglu_kernel<TI, T>, static_cast<unsigned>(blocks), threads, 0,
                stream, pdl, gate_up, inter, out, count);
}

}  // namespace

void launch_swiglu(CudaDType dtype, const float* gate_up, std::int32_t inter, void* out,
                   std::int32_t rows_pad, cudaStream_t stream, bool pdl) {
  if (dtype == CudaDType::kBF16)
    launch_typed(gate_up, inter, static_cast<__nv_bfloat16*>(out), rows_pad, stream, pdl);
  else
    launch_typed(gate_up, inter, static_cast<float*>(out), rows_pad, stream, pdl);
}

void launch_swiglu_bf16_input(const __nv_bfloat16* gate_up, std::int32_t inter, void* out,
                              std::int32_t rows_pad, cudaStream_t stream, bool pdl) {
  launch_typed(gate_up, inter, static_cast<__nv_bfloat16*>(out), rows_pad, stream, pdl);
}

}  // namespace dice::engine::cuda
