"""Where a kernel's warps stall, by instruction, from Nsight Compute's source page.

    ncu_source_report.py SOURCE.csv[.gz] [--top N]

SOURCE.csv is `ncu -i REPORT.ncu-rep --page source --csv --print-source sass` of a report
profiled with `--section SourceCounters` (and WarpStateStats). Prints, for the first kernel in
the file, the warp stall samples by reason (share of all samples), by opcode, and the N
instructions with the most samples, each with its three largest reasons and its executed count.
A file without a source table is a named error (exit 1).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from pathlib import Path

from engine_profile_report import read_lines  # (bench/, beside this script)

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def number(text: str) -> float:
    """A cell of the source page as a number (thousands separators dropped; empty: 0)."""
    text = text.replace(",", "").strip()
    return float(text) if text else 0.0


def opcode(sass: str) -> str:
    """The SASS line's opcode without its predicate and modifiers (`@P1 LDG.E R1, ...` -> LDG)."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def main(path: Path, top: int) -> int:
    """Prints the stall report of the source page at `path` with its `top` instructions; returns
    0, or 1 after a message naming the file for an unreadable file, no source table or no stall
    samples."""
    try:
        lines = read_lines(path)
    except (OSError, EOFError) as e:
        print(f"{path}: cannot read the source page: {e}")
        return 1
    starts = [i for i, line in enumerate(lines) if line.startswith('"Kernel Name"')]
    if not starts or starts[0] + 1 >= len(lines):
        print(f"{path}: no source table (expected ncu --page source --csv output)")
        return 1
    kernel = next(csv.reader([lines[starts[0]]]))[1]
    end = starts[1] if len(starts) > 1 else len(lines)
    table = list(csv.reader(lines[starts[0] + 1 : end]))
    header, rows = table[0], table[1:]
    if SAMPLES not in header or "Source" not in header:
        print(f"{path}: the source table has no '{SAMPLES}' column (profile SourceCounters)")
        return 1
    reasons = [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]
    col = {h: header.index(h) for h in [SAMPLES, "Source", EXECUTED, *reasons] if h in header}
    by_reason: Counter[str] = Counter()
    by_opcode: Counter[str] = Counter()
    lines_out: list[tuple[float, str, list[tuple[float, str]], float]] = []
    for row in rows:
        if len(row) < len(header):
            continue
        samples = number(row[col[SAMPLES]])
        sass = row[col["Source"]]
        split = [(number(row[col[r]]), r.removeprefix("stall_")) for r in reasons]
        for value, reason in split:
            by_reason[reason] += value
        by_opcode[opcode(sass)] += samples
        executed = number(row[col[EXECUTED]]) if EXECUTED in col else float("nan")
        lines_out.append((samples, sass, sorted(split, reverse=True)[:3], executed))
    total = sum(by_reason.values())
    if total <= 0:
        print(f"{path}: no stall samples for {kernel}")
        return 1
    print(f"{kernel}\n{total:.0f} stall samples over {len(lines_out)} instructions")
    print("by reason: " + ", ".join(f"{r} {v / total:.1%}" for r, v in by_reason.most_common(10)))
    print("by opcode: " + ", ".join(f"{o} {v / total:.1%}" for o, v in by_opcode.most_common(10)))
    print(f"{'share':>6} {'executed':>9}  instruction (largest reasons)")
    for samples, sass, split, executed in sorted(lines_out, key=lambda x: -x[0])[:top]:
        why = ", ".join(f"{r} {v:.0f}" for v, r in split if v > 0)
        print(f"{samples / total:6.1%} {executed:9.0f}  {sass[:64]:64s} ({why})")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("csv", type=Path, help="ncu --page source --csv output, optionally .gz")
    parser.add_argument("--top", type=int, default=20, help="instructions to list (default 20)")
    args = parser.parse_args()
    sys.exit(main(args.csv, args.top))
