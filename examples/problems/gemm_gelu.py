import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer (1024 -> 1024, with bias) followed by tanh-approximated GELU, batch 256."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x), approximate="tanh")


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return [1024, 1024]
