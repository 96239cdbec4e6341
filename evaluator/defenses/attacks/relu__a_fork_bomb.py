# Attack (isolation): a fork bomb in forward. Expected: the process limit stops it and the
# watchdog kills the tree -> rejected (sandbox.processes); the next candidate gets a new worker.
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while True:
            try:
                os.fork()
            except OSError:
                pass
