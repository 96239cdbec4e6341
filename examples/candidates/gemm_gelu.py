import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The GEMM stays with cuBLAS (at::addmm); the bias is already fused there, and GELU (tanh form)
# runs as one custom element-wise kernel in place on the GEMM's output.
cuda_source = r"""
__global__ void gelu_tanh_inplace_kernel(float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) {
        const float x = y[i];
        const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
        const float inner = k0 * (x + 0.044715f * x * x * x);
        y[i] = 0.5f * x * (1.f + tanhf(inner));
    }
}

torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto y = at::addmm(bias, x, weight.t());
    long n = y.numel();
    gelu_tanh_inplace_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="example_linear_gelu",
    cpp_sources="torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=cuda_source,
    functions=["linear_gelu"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.linear_gelu(x, self.linear.weight, self.linear.bias)
