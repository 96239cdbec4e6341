import torch
import torch.nn as nn


class Model(nn.Module):
    """x.t() + y: a 2048 x 1024 input transposed plus a 1024 x 2048 input (contiguous result)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.t() + y


def get_inputs():
    return [torch.randn(2048, 1024), torch.randn(1024, 2048)]


def get_init_inputs():
    return []
