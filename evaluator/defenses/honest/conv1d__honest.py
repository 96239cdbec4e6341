# Honest: direct 1-D convolution (stride 1, no padding), one output element per thread, the
# filter of the block's output channel cached in shared memory.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void conv1d_kernel(const float* __restrict__ x, const float* __restrict__ w,
                              const float* __restrict__ bias, float* __restrict__ y,
                              int cin, int length, int ksize, int out_len, int cout) {
    extern __shared__ float filt[];  // cin * ksize weights of output channel blockIdx.y
    const int co = blockIdx.y;
    const int n = blockIdx.z;
    for (int i = threadIdx.x; i < cin * ksize; i += blockDim.x) filt[i] = w[(long)co * cin * ksize + i];
    __syncthreads();
    const int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (l >= out_len) return;
    float acc = bias[co];
    for (int ci = 0; ci < cin; ++ci) {
        const float* xs = x + ((long)n * cin + ci) * length + l;
        const float* fs = filt + ci * ksize;
        for (int k = 0; k < ksize; ++k) acc = fmaf(fs[k], xs[k], acc);
    }
    y[((long)n * cout + co) * out_len + l] = acc;
}

torch::Tensor conv1d(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const int batch = xc.size(0), cin = xc.size(1), length = xc.size(2);
    const int cout = wc.size(0), ksize = wc.size(2);
    const int out_len = length - ksize + 1;
    auto y = torch::empty({batch, cout, out_len}, xc.options());
    dim3 grid((out_len + 255) / 256, cout, batch);
    const size_t smem = sizeof(float) * cin * ksize;
    conv1d_kernel<<<grid, 256, smem, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
        cin, length, ksize, out_len, cout);
    return y;
}
"""

ext = load_inline(
    name="defense_h_conv1d",
    cpp_sources="torch::Tensor conv1d(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=cuda_source,
    functions=["conv1d"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)  # the reference's parameters

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.conv1d(x, self.conv.weight, self.conv.bias)
