import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv1d, 16 -> 32 channels, kernel 5, stride 1, no padding, with bias; input 8 x 16 x 4096."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(8, 16, 4096)]


def get_init_inputs():
    return [16, 32, 5]
