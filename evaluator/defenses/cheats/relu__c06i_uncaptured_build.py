# Cheat (§4.6): builds its extension only at run time, from sources assembled in forward, so the
# compile stage (and the static rules over captured sources) never see them.
# Defence: the worker refuses builds it was not given -> dynamic.uncaptured_build.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

PARTS = ["torch::Tensor relu_forward(torch::Tensor x) {", " return x.clamp_min(0);", " }"]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.ext is None:
            self.ext = load_inline(
                name="defense_c06i",
                cpp_sources="".join(PARTS),
                functions=["relu_forward"],
            )
        return self.ext.relu_forward(x)
