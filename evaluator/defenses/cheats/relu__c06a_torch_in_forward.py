# Cheat (§4.6): a decoy extension is built, but forward calls torch.
# Defence: static.torch_compute (and dynamic.no_own_kernel if it ever ran).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void relu_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
torch::Tensor unused(torch::Tensor x) { return x; }
"""

ext = load_inline(
    name="defense_c06a",
    cpp_sources="torch::Tensor unused(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["unused"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
