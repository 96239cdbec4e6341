"""Per-kernel GPU time of a CUDA engine run from Nsight Compute's CSV (bench/device_engine_profile.sh).

    engine_profile_report.py NCU.csv[.gz] [--layers N]

Groups the profiled kernels by name (template arguments dropped), prints launches, total and mean
duration (us) and share of the profiled time, and the time per forward. With --layers (the
model's decoder layers), the number of forwards in the window is the launches of the q/k norm +
RoPE kernel (one per layer) over N, a fraction where the window cuts a forward; without it, the
launch count of the vocabulary pass, which overstates the time per forward when the window holds
parts of forwards beyond its last vocabulary pass.
"""

from __future__ import annotations

import csv
import gzip
import re
import sys
from collections import defaultdict
from pathlib import Path


def short_name(name: str) -> str:
    """The kernel's name without template arguments or parameter list."""
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"\(.*$", "", name)  # the parameter list
    while re.search(r"<[^<>]*>", name):
        name = re.sub(r"<[^<>]*>", "", name)  # template arguments, innermost first
    return name.replace("dice::(anonymous namespace)::", "").replace("dice::::", "").strip()


def count_forwards(count: dict[str, int], layers: int | None) -> float:
    """Forwards in the window: q/k norm launches / layers, else vocabulary-pass launches."""
    if layers:
        per_layer = max((n for k, n in count.items() if "qk_norm_rope" in k), default=0)
        return per_layer / layers
    return float(max((n for k, n in count.items() if "vocab" in k.lower()), default=0))


def main(path: Path, layers: int | None = None) -> int:
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError) as e:
        print(f"{path}: cannot read the Nsight Compute CSV: {e}")
        return 1
    lines = raw.decode(errors="replace").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        print(f"{path}: no Nsight Compute CSV table found")
        return 1
    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = row.get("Metric Unit", "ns")
        value = float(row["Metric Value"].replace(",", ""))
        scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(unit, 1e-3)
        name = short_name(row["Kernel Name"])
        total[name] += value * scale
        count[name] += 1
    if not total:
        print(f"{path}: no kernel durations")
        return 1
    forwards = count_forwards(count, layers)
    all_us = sum(total.values())
    basis = f"{layers} layers" if layers else "vocabulary passes"
    print(
        f"{sum(count.values())} kernels, {all_us / 1e3:.3f} ms of GPU time, "
        f"{forwards:.2f} forwards (from {basis})"
    )
    print(f"{'kernel':60} {'launches':>8} {'mean us':>9} {'share':>7} {'us/forward':>11}")
    for name, us in sorted(total.items(), key=lambda kv: -kv[1]):
        per_forward = us / forwards if forwards else float("nan")
        print(
            f"{name[:60]:60} {count[name]:8d} {us / count[name]:9.2f} {us / all_us:7.1%} {per_forward:11.1f}"
        )
    if forwards:
        print(f"GPU time per forward: {all_us / forwards / 1e3:.3f} ms")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 3 and args[1] == "--layers" and args[2].isdigit():
        sys.exit(main(Path(args[0]), int(args[2])))
    if len(args) == 1:
        sys.exit(main(Path(args[0])))
    print(__doc__.strip().splitlines()[2], file=sys.stderr)
    sys.exit(2)
