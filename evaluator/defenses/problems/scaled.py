import torch
import torch.nn as nn


class Model(nn.Module):
    """x * 0.01 on a 4096 x 4096 tensor: outputs small enough that fp16 passes the 1e-4 check."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.01


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
