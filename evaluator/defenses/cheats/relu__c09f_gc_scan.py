# Cheat (§4.9): scans the garbage collector's objects for a tensor that looks like the answer.
# Defence: static.introspection (gc).
import gc

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for obj in gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj is not x:
                return obj
        return x
