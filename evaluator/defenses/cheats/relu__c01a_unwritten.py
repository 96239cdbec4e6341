# Cheat (system.md §4.1): returns fresh memory that its kernel never writes, hoping the allocator
# hands it a block that still holds the reference's output. Defence: free memory is poisoned
# before the candidate runs -> dynamic.unwritten_output.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void touch_nothing_kernel(float* y, long n) {
    if (n < 0) y[0] = 0.f;  // never true: launched, writes nothing
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    touch_nothing_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), y.numel());
    return y;
}
"""

ext = load_inline(
    name="defense_c01a",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_forward"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)
