# §4.11: a problem so small that launch overhead is all a timing measures; any "speedup" here is
# noise. Defence: timing.launch_bound (a warning) on the record, and the speedup's 95% interval.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void relu16_kernel(const float* __restrict__ x, float* __restrict__ y) {
    y[threadIdx.x] = fmaxf(x[threadIdx.x], 0.f);
}

torch::Tensor relu16(torch::Tensor x) {
    TORCH_CHECK(x.numel() == 16, "relu16: 16 values expected");
    auto y = torch::empty_like(x);
    relu16_kernel<<<1, 16, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>());
    return y;
}
"""

ext = load_inline(
    name="defense_c11",
    cpp_sources="torch::Tensor relu16(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu16"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu16(x)
