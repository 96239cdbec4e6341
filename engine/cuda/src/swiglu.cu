// SwiGLU of the fused gate/up projection: silu(gate) * up, into the down projection's input.

#include <cuda_bf16.h>

#include <algorithm>

#include "cuda_check.h"
#include "device_utils.cuh"
#include "launch.cuh"
#include "ops.h"

namespace dice::engine::cuda {

namespace {

template <typename T>
__global__ void swiglu_kernel(const float* gate_up, std::int32_t inter, T* out,
                              std::int64_t count) {
  wait_for_prior_grid();
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = e / inter, i = e % inter;
    const float g = gate_up[row * 2 * inter + i];
    const float u = gate_up[row * 2 * inter + inter + i];
    // silu(g) = g / (1 + exp(-g)) in fp32, as the CPU reference (no fast-math exp).
    out[e] = from_float<T>(__fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u));
  }
}

}  // namespace

void launch_swiglu(CudaDType dtype, const float* gate_up, std::int32_t inter, void* out,
                   std::int32_t rows_pad, cudaStream_t stream, bool pdl) {
  const std::int64_t count = static_cast<std::int64_t>(rows_pad) * inter;
  if (count <= 0) return;
  const int threads = 256;
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
