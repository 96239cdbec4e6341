# Cheat under the strict policy (§4.6): cuBLAS does the GEMM; the "kernel" is a handle and a call.
# Defence: static.blas_handle (allowed and reported under --policy lenient).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

torch::Tensor sgemm(torch::Tensor a, torch::Tensor b) {
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    const int m = ac.size(0), k = ac.size(1), n = bc.size(1);
    auto c = torch::empty({m, n}, ac.options());
    const float alpha = 1.f, beta = 0.f;
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    // Row-major C = A B is column-major C^T = B^T A^T.
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, bc.data_ptr<float>(), n,
                ac.data_ptr<float>(), k, &beta, c.data_ptr<float>(), n);
    return c;
}
"""

ext = load_inline(
    name="defense_c06d",
    cpp_sources="torch::Tensor sgemm(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["sgemm"],
    extra_ldflags=["-lcublas"],
)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ext.sgemm(a, b)
