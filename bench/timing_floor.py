"""The fixed cost of one timed call under each timing protocol (evaluator/PROTOCOL.md), on a GPU.

    python bench/timing_floor.py [--trials 200]

Times an empty call and a few tiny torch calls with the worker's own Timer (L2 flush, events,
device synchronisation for protocol ``dice``) and prints their medians in microseconds: the
empty call's median is the floor under every measured time, the input of `timing.launch_bound`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluator" / "worker"))
from dice_worker.timing import Timer  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no GPU: nothing to measure")
        return 1
    device = torch.device("cuda")
    small = torch.randn(256, device=device)
    large = torch.randn(1 << 20, device=device)
    calls = {
        "empty call": (lambda: None, []),
        "relu of 256 floats": (torch.relu, [small]),
        "relu of 1M floats": (torch.relu, [large]),
    }
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, {args.trials} trials")
    for protocol in ("dice", "kernelbench"):
        timer = Timer(device, protocol)
        for name, (fn, fn_args) in calls.items():
            for _ in range(5):
                fn(*fn_args)
            times = [timer.time_ms(fn, fn_args) * 1e3 for _ in range(args.trials)]
            q = statistics.quantiles(times, n=10)
            print(
                f"{protocol:12} {name:22} median {statistics.median(times):8.2f} us  p10 {q[0]:8.2f}  p90 {q[-1]:8.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
