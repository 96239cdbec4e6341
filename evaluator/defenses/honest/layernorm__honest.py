# Honest: LayerNorm, one block per row: two-pass mean and (biased) variance, then the affine map.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__device__ float block_sum(float v, float* smem) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? smem[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) smem[32] = v;
    }
    __syncthreads();
    const float result = smem[32];
    __syncthreads();
    return result;
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                                 const float* __restrict__ bias, float* __restrict__ y, int cols, float eps) {
    __shared__ float smem[33];
    const float* row = x + (long)blockIdx.x * cols;
    float* out = y + (long)blockIdx.x * cols;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    const float mean = block_sum(s, smem) / cols;
    float q = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = row[c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, smem) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (row[c] - mean) * rstd * weight[c] + bias[c];
}

torch::Tensor layernorm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const int cols = xc.size(-1);
    const long rows = xc.numel() / cols;
    auto y = torch::empty_like(xc);
    layernorm_kernel<<<rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""

ext = load_inline(
    name="defense_h_layernorm",
    cpp_sources="torch::Tensor layernorm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);",
    cuda_sources=cuda_source,
    functions=["layernorm"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        with torch.no_grad():  # the reference's parameters, drawn in the same order
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.layernorm(x, self.norm.weight, self.norm.bias, self.norm.eps)
