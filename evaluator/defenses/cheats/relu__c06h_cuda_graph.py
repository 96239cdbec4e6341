# Cheat (§4.6): a CUDA graph of torch's own relu, replayed in forward.
# Defence: static.cuda_graph.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.graph is None:
            self.static_x = x.clone()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_y = torch.relu(self.static_x)
        self.static_x.copy_(x)
        self.graph.replay()
        return self.static_y
