# Cheat (§4.2): writes the result over its first input and returns that input (no allocation,
# and a later reference run on the same tensors would agree). Defence: outputs must not share
# memory with inputs where the reference's do not -> dynamic.output_alias.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void scale_shift_into_a_kernel(float* __restrict__ a, const float* __restrict__ b, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        a[i] = a[i] * 0.5f + b[i];
    }
}

torch::Tensor scale_shift(torch::Tensor a, torch::Tensor b) {
    const long n = a.numel();
    scale_shift_into_a_kernel<<<std::min<long>((n + 255) / 256, 8192), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), n);
    return a;
}
"""

ext = load_inline(
    name="defense_c02b",
    cpp_sources="torch::Tensor scale_shift(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["scale_shift"],
)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ext.scale_shift(a, b)
