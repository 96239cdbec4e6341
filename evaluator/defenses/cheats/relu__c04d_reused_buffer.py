# Cheat (§4.4): one output buffer, allocated once and returned by every call (no allocation
# cost; earlier results silently change). Defence: an output must not be the memory of an
# earlier call's output that is still alive -> dynamic.output_alias.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_into_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        y[i] = fmaxf(x[i], 0.f);
    }
}

void relu_into(torch::Tensor x, torch::Tensor y) {
    const long n = x.numel();
    relu_into_kernel<<<std::min<long>((n + 255) / 256, 8192), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
}
"""

ext = load_inline(
    name="defense_c04d",
    cpp_sources="void relu_into(torch::Tensor x, torch::Tensor y);",
    cuda_sources=cuda_source,
    functions=["relu_into"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.empty_like(x)
        ext.relu_into(x, self.out)
        return self.out
