import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void axpy_kernel(float alpha, const float* __restrict__ x, const float* __restrict__ y,
                            float* __restrict__ out, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        out[i] = fmaf(alpha, x[i], y[i]);
    }
}

torch::Tensor scaled_add(torch::Tensor x, torch::Tensor y, double alpha) {
    TORCH_CHECK(x.sizes() == y.sizes(), "scaled_add: shapes differ");
    auto xc = x.contiguous();
    auto yc = y.contiguous();
    auto out = torch::empty_like(xc);
    long n = xc.numel();
    int blocks = (int)std::min<long>((n + 255) / 256, 132L * 16);
    axpy_kernel<<<blocks, 256>>>((float)alpha, xc.data_ptr<float>(), yc.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(
    name="example_scaled_add",
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
