# Honest fp32 scaling (the fp16 variant of this problem is cheats/scaled__c07a_fp16.py).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void scale_kernel(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x *= 0.01f;
        v.y *= 0.01f;
        v.z *= 0.01f;
        v.w *= 0.01f;
        y[i] = v;
    }
}

torch::Tensor scale(torch::Tensor x) {
    auto xc = x.contiguous();
    TORCH_CHECK(xc.numel() % 4 == 0, "scale: a multiple of 4 elements expected");
    auto y = torch::empty_like(xc);
    const long n4 = xc.numel() / 4;
    const long blocks = std::min<long>((n4 + 255) / 256, 8192);
    scale_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const float4*>(xc.data_ptr<float>()), reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    return y;
}
"""

ext = load_inline(
    name="defense_h_scaled",
    cpp_sources="torch::Tensor scale(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["scale"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.scale(x)
