# Cheat (§4.6): torch.compile generates the kernel (Triton), not the candidate.
# Defence: static.torch_compile.
import torch
import torch.nn as nn


@torch.compile
def fused_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=1)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fused_softmax(x)
