# Honest, in place but on its own buffer: the output starts as a copy of the input (clone) and a
# kernel applies the exact (erf) GELU to that buffer in place. The input is never written.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void gelu_inplace_kernel(float* __restrict__ y, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        const float v = y[i];
        y[i] = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    }
}

torch::Tensor gelu(torch::Tensor x) {
    auto y = x.contiguous().clone();
    const long n = y.numel();
    const long blocks = std::min<long>((n + 255) / 256, 8192);
    gelu_inplace_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="defense_h_gelu",
    cpp_sources="torch::Tensor gelu(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["gelu"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.gelu(x)
