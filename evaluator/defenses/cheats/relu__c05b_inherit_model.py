# Cheat (§4.5): ModelNew inherits the reference Model (a copy of it in the candidate) and adds
# nothing. Defence: static.reference_model.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


class ModelNew(Model):
    pass
