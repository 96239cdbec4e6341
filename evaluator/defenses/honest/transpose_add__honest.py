# Honest: out = x^T + y with a 32 x 33 shared-memory tile, so that both the transposed reads and
# the writes are coalesced.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

constexpr int TILE = 32;
constexpr int ROWS = 8;

// x: r x c (row-major); y and out: c x r.
__global__ void transpose_add_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                     float* __restrict__ out, int r, int c) {
    __shared__ float tile[TILE][TILE + 1];
    const int xc = blockIdx.x * TILE + threadIdx.x;  // column of x
    const int xr0 = blockIdx.y * TILE;                // first row of x in this tile
    for (int j = threadIdx.y; j < TILE; j += ROWS) {
        const int xr = xr0 + j;
        if (xr < r && xc < c) tile[j][threadIdx.x] = x[(long)xr * c + xc];
    }
    __syncthreads();
    const int oc = xr0 + threadIdx.x;  // column of out = row of x
    for (int j = threadIdx.y; j < TILE; j += ROWS) {
        const int orow = blockIdx.x * TILE + j;  // row of out = column of x
        if (orow < c && oc < r) {
            const long idx = (long)orow * r + oc;
            out[idx] = tile[threadIdx.x][j] + y[idx];
        }
    }
}

torch::Tensor transpose_add(torch::Tensor x, torch::Tensor y) {
    auto xc = x.contiguous();
    auto yc = y.contiguous();
    const int r = xc.size(0), c = xc.size(1);
    TORCH_CHECK(yc.size(0) == c && yc.size(1) == r, "transpose_add: y must be x's transpose's shape");
    auto out = torch::empty({c, r}, xc.options());
    dim3 block(TILE, ROWS);
    dim3 grid((c + TILE - 1) / TILE, (r + TILE - 1) / TILE);
    transpose_add_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), yc.data_ptr<float>(), out.data_ptr<float>(), r, c);
    return out;
}
"""

ext = load_inline(
    name="defense_h_transpose_add",
    cpp_sources="torch::Tensor transpose_add(torch::Tensor x, torch::Tensor y);",
    cuda_sources=cuda_source,
    functions=["transpose_add"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ext.transpose_add(x, y)
