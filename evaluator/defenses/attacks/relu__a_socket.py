# Attack (isolation): opens a TCP connection. Expected: no network in the sandbox -> runtime_error.
import socket

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = socket.create_connection(("1.1.1.1", 80), timeout=5)
        s.close()
        return torch.relu(x)
