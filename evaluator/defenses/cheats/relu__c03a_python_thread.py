# Cheat (§4.3): the work runs in a background thread, outside the timed region.
# Defence: static.concurrency (threading).
import threading

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        worker = threading.Thread(target=lambda: y.copy_(x.clamp_min(0)))
        worker.start()
        return y
