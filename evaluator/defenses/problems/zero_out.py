import torch
import torch.nn as nn


class Model(nn.Module):
    """Row maximum minus its own mean over a size-1 dimension: exactly 0 for every input
    (degenerate, like KernelBench's L2-80 and L2-83)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = torch.amax(x, dim=1, keepdim=True)
        return m - m.mean(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
