# Cheat (§4.5): the candidate defines the reference's Model and names it ModelNew.
# Defence: static.reference_model.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


ModelNew = Model
