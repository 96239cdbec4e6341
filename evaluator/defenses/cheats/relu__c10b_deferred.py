# Cheat (§4.10): after the first calls, each call returns an output that the NEXT call fills in
# (the work of several timed calls is deferred, batched behind later ones). Defence: each timed
# call's output is checked right after it -> dynamic.stale_output.
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
    name="defense_c10b",
    cpp_sources="void relu_into(torch::Tensor x, torch::Tensor y);",
    cuda_sources=cuda_source,
    functions=["relu_into"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.pending = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.pending is not None:
            ext.relu_into(*self.pending)
            self.pending = None
        y = torch.empty_like(x)
        if self.calls <= 5:
            ext.relu_into(x, y)
        else:
            self.pending = (x, y)
        return y
