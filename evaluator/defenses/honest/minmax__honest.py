# Honest, two outputs: one pass over each row computes both its maximum and its minimum.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <tuple>

__global__ void row_minmax_kernel(const float* __restrict__ x, float* __restrict__ mx,
                                  float* __restrict__ mn, int cols) {
    __shared__ float smax[32];
    __shared__ float smin[32];
    const float* row = x + (long)blockIdx.x * cols;
    float hi = -INFINITY, lo = INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = row[c];
        hi = fmaxf(hi, v);
        lo = fminf(lo, v);
    }
    for (int o = 16; o > 0; o >>= 1) {
        hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, o));
        lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, o));
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if (lane == 0) {
        smax[warp] = hi;
        smin[warp] = lo;
    }
    __syncthreads();
    if (warp == 0) {
        hi = lane < warps ? smax[lane] : -INFINITY;
        lo = lane < warps ? smin[lane] : INFINITY;
        for (int o = 16; o > 0; o >>= 1) {
            hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, o));
            lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, o));
        }
        if (lane == 0) {
            mx[blockIdx.x] = hi;
            mn[blockIdx.x] = lo;
        }
    }
}

std::tuple<torch::Tensor, torch::Tensor> row_minmax(torch::Tensor x) {
    auto xc = x.contiguous();
    const int rows = xc.size(0), cols = xc.size(1);
    auto mx = torch::empty({rows}, xc.options());
    auto mn = torch::empty({rows}, xc.options());
    row_minmax_kernel<<<rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), mx.data_ptr<float>(), mn.data_ptr<float>(), cols);
    return {mx, mn};
}
"""

ext = load_inline(
    name="defense_h_minmax",
    cpp_sources="#include <tuple>\nstd::tuple<torch::Tensor, torch::Tensor> row_minmax(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["row_minmax"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor):
        return ext.row_minmax(x)
