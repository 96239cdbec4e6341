# Attack (isolation): a fork bomb while the module is imported, i.e. during the capture on the
# CPU. Expected: rejected (sandbox.processes) before anything is built.
import os

import torch.nn as nn

while True:
    try:
        os.fork()
    except OSError:
        pass


class ModelNew(nn.Module):
    pass
