# Cheat (§4.8): answers 0.5, the expected mean of uniform inputs, without reading them.
# Defence: the problem is detected as degenerate (its output is near constant across seeds) and
# marked: problem.degenerate; reports give fast_p with and without such problems.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void half_kernel(float* out) { out[0] = 0.5f; }

torch::Tensor mean_all(torch::Tensor x) {
    auto out = torch::empty({}, x.options());
    half_kernel<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(out.data_ptr<float>());
    return out;
}
"""

ext = load_inline(
    name="defense_c08a",
    cpp_sources="torch::Tensor mean_all(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["mean_all"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.mean_all(x)
