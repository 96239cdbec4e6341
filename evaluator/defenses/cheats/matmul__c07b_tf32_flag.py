# Cheat (§4.7): switches the harness's matmuls to TF32 so that a lower-precision kernel compares
# against a lower-precision reference. Defence: static.monkeypatch (and the worker resets the
# flags before every request).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True

cuda_source = r"""
__global__ void noop_kernel() {}
torch::Tensor sgemm(torch::Tensor a, torch::Tensor b) { return a; }
"""

ext = load_inline(
    name="defense_c07b",
    cpp_sources="torch::Tensor sgemm(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["sgemm"],
)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ext.sgemm(a, b)
