# Attack (isolation): never returns. Expected: the stage's wall-clock limit -> timeout.
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            pass
