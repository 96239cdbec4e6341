# Honest: RMSNorm, one block per row: block sum of squares, then x * rsqrt(mean + eps) * weight.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                               float* __restrict__ y, int cols, float eps) {
    __shared__ float smem[33];
    const float* row = x + (long)blockIdx.x * cols;
    float* out = y + (long)blockIdx.x * cols;
    float q = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) q += row[c] * row[c];
    for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if (lane == 0) smem[warp] = q;
    __syncthreads();
    if (warp == 0) {
        q = lane < warps ? smem[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
        if (lane == 0) smem[32] = rsqrtf(q / cols + eps);
    }
    __syncthreads();
    const float scale = smem[32];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = row[c] * scale * w[c];
}

torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor weight, double eps) {
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    const int cols = xc.size(-1);
    auto y = torch::empty_like(xc);
    rmsnorm_kernel<<<xc.numel() / cols, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""

ext = load_inline(
    name="defense_h_rmsnorm",
    cpp_sources="torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor weight, double eps);",
    cuda_sources=cuda_source,
    functions=["rmsnorm"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(features) + 0.5)  # the reference's, same draw
        self.eps = 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.rmsnorm(x, self.weight, self.eps)
