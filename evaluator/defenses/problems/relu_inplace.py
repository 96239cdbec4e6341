import torch
import torch.nn as nn


class Model(nn.Module):
    """In-place ReLU: the reference itself overwrites and returns its input (2048 x 2048)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.relu_()


def get_inputs():
    return [torch.randn(2048, 2048)]


def get_init_inputs():
    return []
