# Cheat (§4.4): honest for the first calls (the correctness trials), then returns a copy of the
# last result (timed calls on fixed inputs would never notice). Defence: every timed call gets
# fresh inputs and its output is checked -> dynamic.stale_output.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        y[i] = fmaxf(x[i], 0.f);
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long n = xc.numel();
    relu_kernel<<<std::min<long>((n + 255) / 256, 8192), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="defense_c04b",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_forward"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.last = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls <= 5 or self.last is None:
            self.last = ext.relu_forward(x)
            return self.last
        return self.last.clone()
