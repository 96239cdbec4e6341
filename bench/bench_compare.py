"""Compares the verdicts of a `dice bench` run (its bench.db) with those of `dice eval` on the same
kernels (its records.jsonl), problem by problem: the infilling oracle's self-check.

Usage: bench_compare.py OUT/bench.db EVAL_OUT/records.jsonl
Prints one line per disagreement, then "agreement: N of M" and the speedups side by side.
Exit status 0 when every problem agrees, 1 otherwise.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path


def main(bench_db: Path, records: Path) -> int:
    with sqlite3.connect(bench_db) as db:
        bench = {
            pid: (verdict, speedup)
            for pid, verdict, speedup in db.execute(
                "SELECT problem_id, verdict, speedup FROM samples WHERE sample = 0"
            )
        }
    evaluated: dict[str, tuple[str, float | None]] = {}
    for line in records.read_text().splitlines():
        r = json.loads(line)
        evaluated[r["problem_id"]] = (r["verdict"], r.get("speedup"))
    ids = sorted(set(bench) | set(evaluated))
    agree = 0
    ratios: list[float] = []
    for pid in ids:
        b, e = bench.get(pid, ("absent", None)), evaluated.get(pid, ("absent", None))
        if b[0] == e[0]:
            agree += 1
        else:
            print(f"disagree {pid}: bench {b[0]}, eval {e[0]}")
        if b[1] and e[1]:
            ratios.append(b[1] / e[1])
    print(f"agreement: {agree} of {len(ids)} problems have the same verdict")
    if ratios:
        ratios.sort()
        mid = ratios[len(ratios) // 2]
        print(
            f"speedup bench/eval over {len(ratios)} correct kernels: min {ratios[0]:.3f}, "
            f"median {mid:.3f}, max {ratios[-1]:.3f} (timing noise; verdicts decide agreement)"
        )
    return 0 if agree == len(ids) else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
