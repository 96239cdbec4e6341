import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU of 16 values: the kernel launch is all there is to time."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []
