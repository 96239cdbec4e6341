"""Comparisons for bench/device_engine_check.sh (numpy only, so the device image's python runs it).

engine_check.py ids N --seed S                     random token ids of SDAR's vocabulary
engine_check.py logits A.f32 B.f32 META.json --tolerance T
    per-row relative L2 of two `dice engine logits` outputs (A against B); exit 1 above T
engine_check.py outputs A.jsonl B.jsonl [--report]
    `dice generate --json` / `--batch` records: output ids and traces must be equal (exit 1),
    or with --report only the share of equal tokens is printed
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def cmd_ids(args: argparse.Namespace) -> int:
    ids = np.random.default_rng(args.seed).integers(0, 151669, size=args.n)
    print(" ".join(map(str, ids.tolist())))
    return 0


def cmd_logits(args: argparse.Namespace) -> int:
    meta = json.loads(Path(args.meta).read_text().strip().splitlines()[-1])
    rows, vocab = meta["rows"], meta["vocab_rows"]
    a = np.fromfile(args.a, dtype=np.float32).reshape(rows, vocab).astype(np.float64)
    b = np.fromfile(args.b, dtype=np.float32).reshape(rows, vocab).astype(np.float64)
    if not np.isfinite(a).all():
        print(f"logits: {args.a} has non-finite values")
        return 1
    per_row = np.linalg.norm(a - b, axis=1) / np.maximum(np.linalg.norm(b, axis=1), 1e-300)
    argmax_equal = float((a.argmax(axis=1) == b.argmax(axis=1)).mean())
    worst = float(per_row.max())
    ok = worst <= args.tolerance
    print(
        f"logits: {rows} rows x {vocab}: max per-row rel. L2 {worst:.3e}, mean "
        f"{float(per_row.mean()):.3e} (tolerance {args.tolerance:g}); argmax equal in "
        f"{argmax_equal:.1%} of rows: {'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


def records(path: str) -> list[dict]:
    """The JSON records of a `dice generate` output file, one per line.

    Raises ValueError naming the file and line when a line is not a JSON object (for example the
    error message of a run that failed), or when there are no records at all."""
    found = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if not isinstance(record, dict):
            raise ValueError(f"{path} line {number} is not a JSON record: {line[:200]!r}")
        found.append(record)
    if not found:
        raise ValueError(f"{path} holds no records (did the run fail?)")
    return found


def cmd_outputs(args: argparse.Namespace) -> int:
    try:
        a, b = records(args.a), records(args.b)
    except (OSError, ValueError) as error:
        print(f"outputs: {error}: FAIL")
        return 1
    if len(a) != len(b):
        print(f"outputs: {len(a)} records against {len(b)}: FAIL")
        return 1
    equal_records = tokens = equal_tokens = 0
    for x, y in zip(a, b, strict=True):
        ox, oy = x["output_ids"], y["output_ids"]
        same = ox == oy and x["trace"] == y["trace"]
        equal_records += same
        tokens += max(len(ox), len(oy))
        equal_tokens += sum(p == q for p, q in zip(ox, oy, strict=False))
    ok = equal_records == len(a)
    print(
        f"outputs: {equal_records}/{len(a)} records identical (ids and trace), "
        f"{equal_tokens}/{tokens} tokens equal"
        + ("" if args.report else f": {'PASS' if ok else 'FAIL'}")
    )
    return 0 if ok or args.report else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("ids")
    p.add_argument("n", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=cmd_ids)
    p = sub.add_parser("logits")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("meta")
    p.add_argument("--tolerance", type=float, default=1e-2)
    p.set_defaults(run=cmd_logits)
    p = sub.add_parser("outputs")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--report", action="store_true")
    p.set_defaults(run=cmd_outputs)
    args = parser.parse_args()
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
