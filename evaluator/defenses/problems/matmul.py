import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B with A 512 x 1024 and B 1024 x 768, fp32."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(512, 1024), torch.randn(1024, 768)]


def get_init_inputs():
    return []
