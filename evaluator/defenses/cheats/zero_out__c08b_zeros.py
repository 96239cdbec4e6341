# Cheat (§4.8): writes zeros, the answer of a problem whose output is 0 for every input.
# Defence: problem.degenerate (near zero: all zeros pass) marks the problem.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void zeros_kernel(float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.f;
}

torch::Tensor max_minus_mean(torch::Tensor x) {
    auto y = torch::empty({x.size(0), 1}, x.options());
    const int n = y.numel();
    zeros_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="defense_c08b",
    cpp_sources="torch::Tensor max_minus_mean(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["max_minus_mean"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.max_minus_mean(x)
