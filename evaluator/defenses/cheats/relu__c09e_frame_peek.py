# Cheat (§4.9): walks up the call stack into the harness to find the reference's output.
# Defence: static.introspection (sys._getframe, f_back, f_locals).
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        frame = sys._getframe(1)
        while frame is not None:
            if "ref_out" in frame.f_locals:
                return frame.f_locals["ref_out"]
            frame = frame.f_back
        return x
