"""Per-kernel GPU time of a CUDA engine run from Nsight Compute's CSV (bench/device_engine_profile.sh).

    engine_profile_report.py NCU.csv[.gz] [--layers N] [--keep-templates] [--metric NAME ...]

Groups the profiled kernels by name (template arguments dropped unless --keep-templates, which
tells apart instantiations such as the attention kernel's), prints launches, total and mean
duration (us) and share of the profiled time, and the time per forward. With --layers (the
model's decoder layers), the number of forwards in the window is the launches of the q/k norm +
RoPE kernel (one per layer) over N, a fraction where the window cuts a forward; without it, the
launch count of the vocabulary pass, which overstates the time per forward when the window holds
parts of forwards beyond its last vocabulary pass. Each --metric (an ncu metric profiled beside
gpu__time_duration.sum, e.g. dram__throughput.avg.pct_of_peak_sustained_elapsed) adds a column:
its mean over the kernel's launches, in the CSV's unit.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

DURATION = "gpu__time_duration.sum"


def read_lines(path: Path) -> list[str]:
    """The lines of an Nsight Compute export, gunzipped when the name ends in .gz (undecodable
    bytes replaced). Raises OSError (unreadable) or EOFError (a cut gzip stream)."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode(errors="replace").splitlines()


def short_name(name: str, keep_templates: bool = False) -> str:
    """The kernel's name without its parameter list and, unless keep_templates, its template
    arguments."""
    name = re.sub(r"^void ", "", name).replace("dice::<unnamed>::", "")
    name = re.sub(r"\((?!anonymous namespace\)).*$", "", name)  # the parameter list
    while not keep_templates and re.search(r"<[^<>]*>", name):
        name = re.sub(r"<[^<>]*>", "", name)  # template arguments, innermost first
    return name.replace("dice::(anonymous namespace)::", "").replace("dice::::", "").strip()


def metric_labels(metrics: list[str]) -> list[str]:
    """Column labels for the metrics: each name without the longest prefix it shares with another
    of them and then the longest suffix it shares with one of those, both cut at a '_' or '.'
    (smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio and its siblings become
    barrier, long_scoreboard, not_selected, selected, ...), at most 24 characters, at least 10
    wide."""

    def shared(a: str, b: str) -> int:  # characters of a common prefix, up to a separator
        n = len(os.path.commonprefix([a, b]))
        while n > 0 and a[n - 1] not in "_.":
            n -= 1
        return n

    labels = []
    for m in metrics:
        others = [o for o in metrics if o != m]
        head = max((shared(m, o) for o in others), default=0)
        rest = m[head:]
        # the suffix, among the metrics with the same prefix (a name that ends another, such as
        # selected in not_selected, keeps its whole word)
        tail = max(
            (shared(rest[::-1], o[head:][::-1]) for o in others if o[:head] == m[:head]),
            default=0,
        )
        labels.append((rest[: len(rest) - tail] if tail < len(rest) else rest)[:24].rjust(10))
    return labels


def count_forwards(count: dict[str, int], layers: int | None) -> float:
    """Forwards in the window: q/k norm launches / layers, else vocabulary-pass launches."""
    if layers:
        per_layer = max((n for k, n in count.items() if "qk_norm_rope" in k), default=0)
        return per_layer / layers
    return float(max((n for k, n in count.items() if "vocab" in k.lower()), default=0))


def main(
    path: Path,
    layers: int | None = None,
    keep_templates: bool = False,
    metrics: list[str] | None = None,
) -> int:
    """Prints the per-kernel table of the CSV at `path` (see the module's doc); returns 0, or 1
    after a message naming the file for an unreadable file, no table, a value that is not a
    number, no durations or a --metric the CSV lacks."""
    metrics = metrics or []
    try:
        lines = read_lines(path)
    except (OSError, EOFError) as e:
        print(f"{path}: cannot read the Nsight Compute CSV: {e}")
        return 1
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        print(f"{path}: no Nsight Compute CSV table found")
        return 1
    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    sums: dict[tuple[str, str], float] = defaultdict(float)
    seen: dict[tuple[str, str], int] = defaultdict(int)
    for row in csv.DictReader(lines[start:]):
        metric = row.get("Metric Name")
        if metric != DURATION and metric not in metrics:
            continue
        name = short_name(row["Kernel Name"], keep_templates)
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            print(f"{path}: {metric} of {name}: not a number: {row['Metric Value']!r}")
            return 1
        if metric != DURATION:
            sums[(name, metric)] += value
            seen[(name, metric)] += 1
            continue
        unit = row.get("Metric Unit", "ns")
        scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(unit, 1e-3)
        total[name] += value * scale
        count[name] += 1
    if not total:
        print(f"{path}: no kernel durations")
        return 1
    missing = [m for m in metrics if not any(k[1] == m for k in seen)]
    if missing:
        print(f"{path}: metric not in the CSV: {', '.join(missing)}")
        return 1
    forwards = count_forwards(count, layers)
    all_us = sum(total.values())
    basis = f"{layers} layers" if layers else "vocabulary passes"
    print(
        f"{sum(count.values())} kernels, {all_us / 1e3:.3f} ms of GPU time, "
        f"{forwards:.2f} forwards (from {basis})"
    )
    width = 100 if keep_templates else 60
    labels = metric_labels(metrics)
    extra = "".join(f" {label:>{len(label)}}" for label in labels)
    print(
        f"{'kernel':{width}} {'launches':>8} {'mean us':>9} {'share':>7} {'us/forward':>11}{extra}"
    )
    for name, us in sorted(total.items(), key=lambda kv: -kv[1]):
        per_forward = us / forwards if forwards else float("nan")
        means = "".join(
            f" {sums[(name, m)] / seen[(name, m)]:{len(label)}.2f}"
            if seen[(name, m)]
            else f" {'-':>{len(label)}}"
            for m, label in zip(metrics, labels, strict=True)
        )
        print(
            f"{name[:width]:{width}} {count[name]:8d} {us / count[name]:9.2f} {us / all_us:7.1%}"
            f" {per_forward:11.1f}{means}"
        )
    if forwards:
        print(f"GPU time per forward: {all_us / forwards / 1e3:.3f} ms")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("csv", type=Path, help="Nsight Compute CSV (--csv), optionally .gz")
    parser.add_argument("--layers", type=int, help="the model's decoder layers")
    parser.add_argument(
        "--keep-templates", action="store_true", help="group by name with template arguments"
    )
    parser.add_argument(
        "--metric", action="append", default=[], help="another profiled metric to average"
    )
    args = parser.parse_args()
    sys.exit(main(args.csv, args.layers, args.keep_templates, args.metric))
