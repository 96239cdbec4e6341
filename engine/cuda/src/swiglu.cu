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

/// Any inter: one element per thread, grid-stride.
template <typename T>
__global__ void swiglu_kernel(const float* gate_up, std::int32_t inter, T* out,
                              std::int64_t count) {
  wait_for_prior_grid();
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = e / inter, i = e % inter;
    const float* pair = gate_up + row * 2 * inter + 2 * i;
    out[e] = from_float<T>(silu_times(pair[0], pair[1]));
  }
}

/// inter % 4 == 0: four elements per thread (two float4 loads of (gate, up) pairs), row
/// blockIdx.y; the same values as swiglu_kernel, bit for bit.
template <typename T>
__global__ void swiglu_vec4_kernel(const float* gate_up, std::int32_t inter, T* out) {
  wait_for_prior_grid();
  const std::int32_t i = 4 * static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= inter) return;
  const std::int64_t row = blockIdx.y;
  const auto* src = reinterpret_cast<const float4*>(gate_up + row * 2 * inter + 2 * i);
  const float4 a = src[0], b = src[1];  // (g i, u i, g i+1, u i+1), (g i+2, u i+2, ...)
  store4(out + row * inter + i, silu_times(a.x, a.y), silu_times(a.z, a.w), silu_times(b.x, b.y),
         silu_times(b.z, b.w));
}

}  // namespace

void launch_swiglu(CudaDType dtype, const float* gate_up, std::int32_t inter, void* out,
                   std::int32_t rows_pad, cudaStream_t stream, bool pdl) {
  const std::int64_t count = static_cast<std::int64_t>(rows_pad) * inter;
  if (count <= 0) return;
  const int threads = 256;
  if (inter % 4 == 0 && rows_pad <= 65535) {  // rows on grid y (at most 65,535)
    const dim3 grid(static_cast<unsigned>((inter / 4 + threads - 1) / threads),
                    static_cast<unsigned>(rows_pad));
    if (dtype == CudaDType::kBF16)
      launch_kernel("swiglu_vec4_kernel", swiglu_vec4_kernel<__nv_bfloat16>, grid, threads, 0,
                    stream, pdl, gate_up, inter, static_cast<__nv_bfloat16*>(out));
    else
      launch_kernel("swiglu_vec4_kernel", swiglu_vec4_kernel<float>, grid, threads, 0, stream, pdl,
                    gate_up, inter, static_cast<float*>(out));
    return;
  }
  const auto blocks =
      static_cast<int>(std::min<std::int64_t>((count + threads - 1) / threads, 65536));
  const auto grid = static_cast<unsigned>(blocks);
  if (dtype == CudaDType::kBF16)
    launch_kernel("swiglu_kernel", swiglu_kernel<__nv_bfloat16>, grid, threads, 0, stream, pdl,
                  gate_up, inter, static_cast<__nv_bfloat16*>(out), count);
  else
    launch_kernel("swiglu_kernel", swiglu_kernel<float>, grid, threads, 0, stream, pdl, gate_up,
                  inter, static_cast<float*>(out), count);
}

}  // namespace dice::engine::cuda
