# Cheat (§4.3): the kernel runs on a stream of its own, which timing on the current stream alone
# does not wait for. Defences: the whole device is synchronized before the end timestamp, and
# static.concurrency (cudaStreamCreate).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu_forward(torch::Tensor x) {
    static cudaStream_t side = nullptr;
    if (side == nullptr) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    auto y = torch::empty_like(x);
    const long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256, 0, side>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="defense_c03c",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_forward"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)
