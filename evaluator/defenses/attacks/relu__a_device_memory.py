# Attack (isolation): asks for 100 GB on the device. Expected: out_of_memory, worker reused.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hoard = torch.empty(100 << 30, dtype=torch.uint8, device=x.device)
        return torch.relu(x) + hoard[:1].float() * 0
