# Attack (isolation): takes 100 GB of host memory, 1 GiB at a time (touched, so resident).
# Expected: the watchdog's memory limit -> out_of_memory.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hoard = []
        for _ in range(100):
            hoard.append(b"\x01" * (1 << 30))
        return torch.relu(x)
