# Honest on a degenerate problem (the output is 0 for every input): the kernel still computes
# each row's maximum and subtracts the mean over the size-1 dimension, as the reference does.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void max_minus_mean_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float smem[32];
    const float* row = x + (long)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if (lane == 0) smem[warp] = m;
    __syncthreads();
    if (warp == 0) {
        m = lane < warps ? smem[lane] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (lane == 0) {
            const float mean = m / 1.f;  // the mean over a dimension of size 1
            y[blockIdx.x] = m - mean;
        }
    }
}

torch::Tensor max_minus_mean(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty({xc.size(0), 1}, xc.options());
    max_minus_mean_kernel<<<xc.size(0), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(1));
    return y;
}
"""

ext = load_inline(
    name="defense_h_zero_out",
    cpp_sources="torch::Tensor max_minus_mean(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["max_minus_mean"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.max_minus_mean(x)
