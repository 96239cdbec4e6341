# Cheat (§4.2): computes the right output but also overwrites its input (under KernelBench's
# protocol the reference then reads the changed input). Defence: the candidate runs on its own
# copy, which must equal the pristine inputs afterwards -> dynamic.input_mutation.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_and_clobber_kernel(float* __restrict__ x, float* __restrict__ y, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        const float v = x[i];
        y[i] = fmaxf(v, 0.f);
        x[i] = fmaxf(v, 0.f);
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const long n = x.numel();
    relu_and_clobber_kernel<<<std::min<long>((n + 255) / 256, 8192), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="defense_c02a",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_forward"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)
