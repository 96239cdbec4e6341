# Honest: fused a * 0.5 + b, one element per thread in a grid-stride loop.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void scale_shift_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ out, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        out[i] = a[i] * 0.5f + b[i];
    }
}

torch::Tensor scale_shift(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "scale_shift: shapes differ");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto out = torch::empty_like(ac);
    const long n = ac.numel();
    const long blocks = std::min<long>((n + 255) / 256, 8192);
    scale_shift_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        ac.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(
    name="defense_h_scale_shift",
    cpp_sources="torch::Tensor scale_shift(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["scale_shift"],
)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ext.scale_shift(a, b)
