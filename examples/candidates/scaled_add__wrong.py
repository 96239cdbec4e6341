import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Wrong on purpose: forgets alpha (computes x + y). The verdict must be mismatch.
cuda_source = r"""
__global__ void add_kernel(const float* x, const float* y, float* out, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}

torch::Tensor scaled_add(torch::Tensor x, torch::Tensor y, double alpha) {
    auto out = torch::empty_like(x);
    long n = x.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(
    name="example_scaled_add_wrong",
    cpp_sources="torch::Tensor scaled_add(torch::Tensor x, torch::Tensor y, double alpha);",
    cuda_sources=cuda_source,
    functions=["scaled_add"],
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ext.scaled_add(x, y, self.alpha)
