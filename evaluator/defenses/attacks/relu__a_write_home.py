# Attack (isolation): writes to $HOME and to the real home directory of the user.
# Expected: $HOME is the sandbox's private scratch; the real home is read-only -> runtime_error.
import os
import pwd

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with open(os.path.join(os.path.expanduser("~"), "dice_attack_home"), "w") as f:
            f.write("scratch\n")
        with open(os.path.join(pwd.getpwuid(os.getuid()).pw_dir, "dice_attack_home"), "w") as f:
            f.write("escaped\n")
        return torch.relu(x)
