# Honest: shared-memory tiled SGEMM, 32 x 32 tiles of A and B, each thread one element of C.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

constexpr int TILE = 32;

__global__ void sgemm_tiled_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int m, int n, int k) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE + 1];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < k; t += TILE) {
        as[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? a[(long)row * k + t + threadIdx.x] : 0.f;
        bs[threadIdx.y][threadIdx.x] = (t + threadIdx.y < k && col < n) ? b[(long)(t + threadIdx.y) * n + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TILE; ++i) acc = fmaf(as[threadIdx.y][i], bs[i][threadIdx.x], acc);
        __syncthreads();
    }
    if (row < m && col < n) c[(long)row * n + col] = acc;
}

torch::Tensor sgemm(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "sgemm: shapes do not chain");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    const int m = ac.size(0), k = ac.size(1), n = bc.size(1);
    auto c = torch::empty({m, n}, ac.options());
    dim3 block(TILE, TILE);
    dim3 grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    sgemm_tiled_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), m, n, k);
    return c;
}
"""

ext = load_inline(
    name="defense_h_matmul",
    cpp_sources="torch::Tensor sgemm(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["sgemm"],
)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ext.sgemm(a, b)
