import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean of 2**26 uniform values: 0.5 within the tolerance for any draw (degenerate, like
    KernelBench's L1-94, whose answer follows from the inputs' distribution)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x)


def get_inputs():
    return [torch.rand(1 << 26)]


def get_init_inputs():
    return []
