# Cheat (§4.9): returns a Tensor subclass whose __torch_function__ answers comparisons with
# "equal". Defences: static.tensor_subclass; dynamic.output_type.
import torch
import torch.nn as nn


class AlwaysClose(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x).as_subclass(AlwaysClose)
