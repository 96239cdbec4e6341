# Honest: inclusive row scan, one block per row; each thread scans a contiguous chunk, the chunk
# totals are scanned across the block with warp shuffles, then each chunk is rewritten with its
# offset.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void cumsum_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float warp_total[32];
    const float* row = x + (long)blockIdx.x * cols;
    float* out = y + (long)blockIdx.x * cols;
    const int tid = threadIdx.x;
    const int per = (cols + (int)blockDim.x - 1) / (int)blockDim.x;
    const int begin = min(tid * per, cols);
    const int end = min(begin + per, cols);
    float local = 0.f;
    for (int c = begin; c < end; ++c) local += row[c];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    float v = local;  // inclusive scan of the chunk totals within the warp
    for (int o = 1; o < 32; o <<= 1) {
        const float n = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += n;
    }
    if (lane == 31) warp_total[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < warps ? warp_total[lane] : 0.f;
        for (int o = 1; o < 32; o <<= 1) {
            const float n = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t += n;
        }
        if (lane < warps) warp_total[lane] = t;
    }
    __syncthreads();
    float run = v - local + (warp > 0 ? warp_total[warp - 1] : 0.f);  // sum before this chunk
    for (int c = begin; c < end; ++c) {
        run += row[c];
        out[c] = run;
    }
}

torch::Tensor cumsum_rows(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    cumsum_rows_kernel<<<xc.size(0), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(1));
    return y;
}
"""

ext = load_inline(
    name="defense_h_cumsum",
    cpp_sources="torch::Tensor cumsum_rows(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["cumsum_rows"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.cumsum_rows(x)
