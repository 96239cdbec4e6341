# Attack (isolation): rewrites its own code file while being captured, so that the worker would
# load code the static rules never saw. Expected: the file system is read-only in the sandbox
# (import_error); without the sandbox the worker notices the changed file (sandbox.code_changed).
import torch
import torch.nn as nn

with open(__file__, "a") as f:
    f.write("\nModelNew.forward = lambda self, x: torch.relu(x)\n")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
