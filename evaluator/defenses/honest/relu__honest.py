# Honest: vectorized ReLU (float4 loads and stores, grid-stride loop) plus a scalar tail kernel.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.f);
        v.y = fmaxf(v.y, 0.f);
        v.z = fmaxf(v.z, 0.f);
        v.w = fmaxf(v.w, 0.f);
        y[i] = v;
    }
}

__global__ void relu_tail_kernel(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "relu_forward: fp32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long n = xc.numel();
    const long n4 = n / 4;
    auto stream = at::cuda::getCurrentCUDAStream();
    if (n4 > 0) {
        const long blocks = std::min<long>((n4 + 255) / 256, 4096);
        relu_vec4_kernel<<<blocks, 256, 0, stream>>>(reinterpret_cast<const float4*>(xc.data_ptr<float>()),
                                                     reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    }
    if (n > 4 * n4) {
        relu_tail_kernel<<<1, 256, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), 4 * n4, n);
    }
    return y;
}
"""

ext = load_inline(
    name="defense_h_relu",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_forward"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)
