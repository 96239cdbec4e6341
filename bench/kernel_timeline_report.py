"""Where a forward's time goes, from a kernel timeline (engine/cuda/tools/kernel_timeline.cpp's CSV).

    kernel_timeline_report.py TIMELINE.csv[.gz] [--passes N] [--bench RUN.jsonl]
                              [--by-pass OUT.csv]

The timeline holds every kernel's GPU start and end, as it ran: CUDA graphs and programmatic
dependent launch (PDL) included. A pass starts at its embedding kernel. Of the last N passes
(default 200) those with the most common kernel sequence are kept: the steady decoding passes.

Kernels of a pass run in launch order and each ends after the one before it, so a pass's time is
the sum of its kernels' steps: step = end - the previous kernel's end (the first kernel's: its
duration), which is the pass's span. A kernel's lead = the
previous kernel's end - its own start: how long it was on the GPU (reading weights or metadata
before its programmatic wait) before its predecessor ended; negative: a gap in which no kernel
of ours ran. Printed per kernel of one layer (the layers between the first and the last,
averaged), then per role summed over the pass, then the pass's span and the gaps between
passes. With --bench (the run's `engine bench --json` record), its tokens/s beside the run's
under the timeline.

With --by-pass, every pass of the run (not only the last N) as one CSV row: its kernels, span,
attention kernel (the pass's most common attention role), that kernel's launches, median and
summed duration, and the summed duration of the GEMMs (ours and cuBLASLt's). Passes differ as
the contexts grow and where a fused store pass adds commit rows; the report then also fits the
attention's median launch to the pass index over the passes of the most common kernel count and
attention kernel (least squares): us = a + b x pass, so that a launch's fixed cost (a) and its
cost per committed position (b) can be read apart.

Exit 1 with a message naming the file when it holds no complete pass.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import re
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

# (pattern on the mangled name, role); the first match names the kernel.
ROLES: list[tuple[str, str]] = [
    (r"embedding_kernel", "embedding"),
    (r"rms_norm", "rms_norm"),
    (r"qk_norm_rope", "qk_norm_rope"),
    (r"attention_combine", "attention_combine"),
    (r"attention", "attention"),
    (r"stream_gemm_kernel", "stream_gemm"),
    (r"skinny_gemm", "skinny_gemm"),
    (r"wgmma_gemm", "wgmma_gemm"),
    (r"swiglu", "swiglu"),
    (r"vocab_chunk_max", "vocab_max"),
    (r"vocab_chunk_sum", "vocab_sum"),
    (r"vocab_pass", "vocab_pass"),
    (r"splitKreduce", "cublaslt_reduce"),
]


@dataclass(frozen=True)
class Kernel:
    """One kernel execution: GPU timestamps (ns) and its role (role_of)."""

    start: int
    end: int
    role: str


def role_of(name: str) -> str:
    """A short name: the role and the template's integer and bool arguments in the mangled name
    (stream_gemm<0,0,1,...>), or cublaslt for a kernel that is not dice's."""
    for pattern, role in ROLES:
        if re.search(pattern, name):
            values = re.findall(r"L[ib](\d+)E", name)[:4]
            return f"{role}<{','.join(values)}>" if values else role
    return "cublaslt"


def read_kernels(path: Path) -> list[Kernel]:
    """The file's kernels by start time. Raises ValueError naming the file on a malformed row."""
    raw = path.read_bytes()
    text = gzip.decompress(raw).decode() if path.suffix == ".gz" else raw.decode()
    kernels = []
    for i, row in enumerate(csv.reader(io.StringIO(text))):
        if i == 0:
            continue
        if len(row) < 8:
            raise ValueError(f"{path}: line {i + 1} has {len(row)} fields, expected 8")
        name = ",".join(row[7:])
        kernels.append(Kernel(int(row[0]), int(row[1]), role_of(name)))
    kernels.sort(key=lambda k: k.start)
    return kernels


def passes_of(kernels: list[Kernel]) -> list[list[Kernel]]:
    """The kernels split at each embedding kernel; what precedes the first is dropped."""
    passes: list[list[Kernel]] = []
    for k in kernels:
        if k.role.startswith("embedding"):
            passes.append([])
        if passes:
            passes[-1].append(k)
    return passes[:-1]  # the last one may be cut off


def steady(passes: list[list[Kernel]], count: int) -> list[list[Kernel]]:
    """Of the last `count` passes, those with the most common role sequence."""
    recent = passes[-count:]
    common = Counter(tuple(k.role for k in p) for p in recent).most_common(1)[0][0]
    return [p for p in recent if tuple(k.role for k in p) == common]


def layer_windows(roles: tuple[str, ...]) -> list[int]:
    """Start indices of the layers in a pass's role sequence: each attention kernel starts one
    (a layer here runs from its attention to the next one's q/k kernel or projection)."""
    return [i for i, r in enumerate(roles) if r.startswith("attention")]


def us(ns: float) -> str:
    return f"{ns / 1000:8.2f}"


def report(passes: list[list[Kernel]]) -> str:
    """The tables of the module's doc for passes that share one role sequence."""
    roles = tuple(k.role for k in passes[0])
    starts = layer_windows(roles)
    lines = [f"{len(passes)} passes of {len(roles)} kernels, {len(starts)} layers"]
    steps = [
        [p[i].end - (p[i - 1].end if i else p[0].start) for i in range(len(p))] for p in passes
    ]
    leads = [[(p[i - 1].end - p[i].start) if i else 0 for i in range(len(p))] for p in passes]
    if len(starts) >= 3:
        width = starts[1] - starts[0]
        middle = [
            s for s in starts[1:-1] if roles[s : s + width] == roles[starts[1] : starts[1] + width]
        ]
        lines.append(f"\none layer (mean of {len(middle)} middle layers; us)")
        lines.append(f"{'kernel':<40} {'step':>8} {'duration':>8} {'lead':>8}")
        total = 0.0
        for j in range(width):
            idx = [s + j for s in middle]
            step = statistics.fmean(st[i] for st in steps for i in idx)
            dur = statistics.fmean(p[i].end - p[i].start for p in passes for i in idx)
            lead = statistics.fmean(ld[i] for ld in leads for i in idx)
            total += step
            lines.append(f"{roles[starts[1] + j]:<40} {us(step)} {us(dur)} {us(lead)}")
        lines.append(f"{'layer':<40} {us(total)}")
    per_role: dict[str, list[float]] = defaultdict(list)
    for st in steps:
        sums: dict[str, float] = defaultdict(float)
        for i, r in enumerate(roles):
            sums[r] += st[i]
        for r, v in sums.items():
            per_role[r].append(v)
    lines.append("\nper pass, by kernel (sum of steps; us)")
    for r, v in sorted(per_role.items(), key=lambda rv: -statistics.fmean(rv[1])):
        lines.append(f"{r:<40} {us(statistics.fmean(v))}  x{roles.count(r)}")
    spans = [p[-1].end - p[0].start for p in passes]
    lines.append(f"\npass span (first start to last end): {us(statistics.fmean(spans)).strip()} us")
    return "\n".join(lines)


def gaps_between(passes: list[list[Kernel]]) -> list[int]:
    """GPU time (ns) from each pass's last kernel's end to the next pass's first kernel's start."""
    return [b[0].start - a[-1].end for a, b in pairwise(passes)]


GEMM_ROLES = ("cublaslt", "stream_gemm", "skinny_gemm", "wgmma_gemm")


@dataclass(frozen=True)
class PassRow:
    """One pass's row of --by-pass; times in us."""

    index: int  # the pass's place in the run, from 0
    kernels: int
    span: float  # first kernel's start to last kernel's end
    attention: str  # the pass's most common attention role ("" for none)
    launches: int  # of that attention kernel
    attention_median: float  # one launch's duration, median over the pass
    attention_sum: float
    gemm_sum: float  # the GEMM_ROLES kernels' durations

    def cells(self) -> list[str]:
        """The CSV row, in BY_PASS_HEAD's order."""
        return [str(self.index), str(self.kernels), f"{self.span:.2f}", self.attention,
                str(self.launches), f"{self.attention_median:.2f}", f"{self.attention_sum:.2f}",
                f"{self.gemm_sum:.2f}"]  # fmt: skip


BY_PASS_HEAD = ["pass", "kernels", "span_us", "attention", "attention_launches",
                "attention_median_us", "attention_us", "gemm_us"]  # fmt: skip


def pass_row(index: int, p: list[Kernel]) -> PassRow:
    """The PassRow of pass `p` (its kernels in start order), the run's pass number `index`."""
    attention = [k for k in p if k.role.startswith("attention<")]
    role = Counter(k.role for k in attention).most_common(1)[0][0] if attention else ""
    times = [(k.end - k.start) / 1000 for k in attention if k.role == role]
    gemm = sum(k.end - k.start for k in p if k.role.startswith(GEMM_ROLES)) / 1000
    median = statistics.median(times) if times else 0.0
    span = (p[-1].end - p[0].start) / 1000
    return PassRow(index, len(p), span, role, len(times), median, sum(times), gemm)


def by_pass(passes: list[list[Kernel]], out: Path) -> str:
    """Writes --by-pass's CSV to `out` and returns the fit's line (module doc)."""
    rows = [pass_row(i, p) for i, p in enumerate(passes)]
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(BY_PASS_HEAD)
        w.writerows(r.cells() for r in rows)
    common = Counter((r.kernels, r.attention) for r in rows if r.attention).most_common(1)
    if not common:
        return "attention fit: no pass runs an attention kernel"
    (kernels, role), _ = common[0]
    fitted = [r for r in rows if (r.kernels, r.attention) == (kernels, role)]
    if len(fitted) < 2:
        return "attention fit: fewer than 2 passes to fit"
    fit = statistics.linear_regression(
        [r.index for r in fitted], [r.attention_median for r in fitted]
    )
    return (
        f"attention fit over {len(fitted)} passes of {kernels} kernels ({role}): "
        f"us a launch = {fit.intercept:.2f} + {fit.slope:.4f} x pass"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("timeline", type=Path)
    parser.add_argument("--passes", type=int, default=200)
    parser.add_argument("--bench", type=Path, help="the run's engine bench --json records")
    parser.add_argument("--by-pass", type=Path, help="write every pass's row here (module doc)")
    args = parser.parse_args()
    try:
        kernels = read_kernels(args.timeline)
    except (OSError, ValueError) as e:
        print(f"kernel_timeline_report: {e}", file=sys.stderr)
        return 1
    passes = passes_of(kernels)
    if not passes:
        print(f"kernel_timeline_report: {args.timeline}: no complete pass", file=sys.stderr)
        return 1
    print(report(steady(passes, args.passes)))
    gaps = gaps_between(passes[-args.passes :])
    if gaps:
        print(f"gap between passes: {us(statistics.median(gaps)).strip()} us (median)")
    if args.bench and args.bench.exists():
        runs = [json.loads(line) for line in args.bench.read_text().splitlines() if line.strip()]
        rates = ", ".join(f"{r['tokens_per_second']:.1f}" for r in runs)
        print(f"tokens/s (plain run, then under the timeline): {rates}")
    if args.by_pass:
        try:
            print(by_pass(passes, args.by_pass))
        except OSError as e:
            print(f"kernel_timeline_report: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
