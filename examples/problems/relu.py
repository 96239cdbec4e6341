import torch
import torch.nn as nn


class Model(nn.Module):
    """Element-wise ReLU of a 16 x 16384 fp32 tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 16384)]


def get_init_inputs():
    return []
