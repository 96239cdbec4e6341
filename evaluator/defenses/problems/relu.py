import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU of a 2048 x 4096 fp32 tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(2048, 4096)]


def get_init_inputs():
    return []
