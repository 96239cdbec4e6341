# Cheat (§4.6) that the static rules cannot see: a __global__ kernel is compiled but never
# launched; the host code reaches ATen through `using namespace at` and an unqualified call.
# Defence: a profiler trace of one forward -> dynamic.no_own_kernel (and dynamic.foreign_kernels).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/ATen.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

using namespace at;

torch::Tensor relu_forward(torch::Tensor x) {
    return clamp_min(x, 0);
}
"""

ext = load_inline(
    name="defense_c06g",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_forward"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)
