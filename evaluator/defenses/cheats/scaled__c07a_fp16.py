# Cheat (§4.7): computes in fp16; the outputs are small enough that the 1e-4 check passes.
# Defence: the error against an fp64 reference beside the fp32 reference's own ->
# precision.reduced (a warning by default), and static.reduced_precision (warning).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>

__global__ void scale_half_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    const __half k = __float2half(0.01f);
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        y[i] = __half2float(__hmul(__float2half(x[i]), k));
    }
}

torch::Tensor scale(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long n = xc.numel();
    scale_half_kernel<<<std::min<long>((n + 255) / 256, 8192), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="defense_c07a",
    cpp_sources="torch::Tensor scale(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["scale"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.scale(x)
