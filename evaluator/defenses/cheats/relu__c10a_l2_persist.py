# Cheat (§4.10): pins the input in L2 with an access policy window so the timing's L2 flush
# does not evict it. Defence: static.l2_persist.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto stream = at::cuda::getCurrentCUDAStream();
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 32 << 20);
    cudaStreamAttrValue attr = {};
    attr.accessPolicyWindow.base_ptr = x.data_ptr();
    attr.accessPolicyWindow.num_bytes = x.numel() * sizeof(float);
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr);
    auto y = torch::empty_like(x);
    const long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="defense_c10a",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_forward"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)
