# Honest, truly in place: the reference itself overwrites and returns its input, and so does this
# kernel (allowed: the reference's outputs alias its inputs and it mutates them).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_inplace_kernel(float* __restrict__ x, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        x[i] = fmaxf(x[i], 0.f);
    }
}

torch::Tensor relu_inplace(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "relu_inplace: contiguous input expected");
    const long n = x.numel();
    const long blocks = std::min<long>((n + 255) / 256, 8192);
    relu_inplace_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), n);
    return x;
}
"""

ext = load_inline(
    name="defense_h_relu_inplace",
    cpp_sources="torch::Tensor relu_inplace(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_inplace"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_inplace(x)
