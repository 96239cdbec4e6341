"""Summarise a dice eval records.jsonl: verdicts, reasons, speedup distribution.

Usage: records_report.py RECORDS [--expect-by-name] [--table FILE]

--table writes a Markdown table of every record (problem, verdict, speedup with its 95% interval,
medians of reference and candidate in ms, wall seconds, first reason) to FILE.

--expect-by-name checks each verdict against the candidate's file name (examples/candidates):
``<problem>.py`` and ``__model_output`` must be correct, ``__compile_error`` a compile_error,
``__wrong`` a mismatch; the exit status is 1 on any surprise.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path


def expected_verdict(candidate: str) -> str:
    """The verdict a bundled example's file name promises."""
    stem = Path(candidate).stem
    if "__compile_error" in stem:
        return "compile_error"
    if "__wrong" in stem:
        return "mismatch"
    return "correct"


def quantiles(values: list[float]) -> str:
    """Min, 5/25/50/75/95 % quantiles and max of ``values``, three decimals."""
    if len(values) < 2:
        return " ".join(f"{v:.3f}" for v in values)
    q = statistics.quantiles(values, n=20, method="inclusive")
    return (
        f"min {min(values):.3f}  p5 {q[0]:.3f}  p25 {q[4]:.3f}  median {statistics.median(values):.3f}"
        f"  p75 {q[14]:.3f}  p95 {q[18]:.3f}  max {max(values):.3f}"
    )


def _ms(r: dict, key: str) -> str:
    stats = (r.get("timing") or {}).get(key) or {}
    return f"{stats['median']:.4g}" if "median" in stats else ""


def table(records: list[dict]) -> str:
    """A Markdown table of ``records``, one row each, sorted by problem id."""
    rows = [
        "| problem | verdict | speedup | 95% interval | reference ms | candidate ms | seconds | reason |",
        "|---|---|---:|---|---:|---:|---:|---|",
    ]
    for r in sorted(records, key=lambda r: (r["problem_id"], r["candidate"])):
        sp = f"{r['speedup']:.3f}" if r.get("speedup") else ""
        ci = r.get("speedup_ci95")
        interval = f"{ci[0]:.3f} - {ci[1]:.3f}" if ci else ""
        reason = "" if r["verdict"] == "correct" else (r["reasons"] or [""])[-1][:100]
        if r.get("rules"):
            reason = f"[{', '.join(r['rules'])}] {reason}"
        reason = reason.replace("|", "/").replace("\n", " ")
        rows.append(
            f"| {r['problem_id']} {r.get('problem_name', '')} | {r['verdict']} | {sp} | {interval}"
            f" | {_ms(r, 'reference_ms')} | {_ms(r, 'candidate_ms')} | {float(r.get('seconds') or 0):.1f}"
            f" | {reason} |"
        )
    return "\n".join(rows) + "\n"


def rules_report(records: list[dict]) -> None:
    """Counts by rule id (evaluator/RULES.md), split by action, and the rejected records."""
    counts: Counter[tuple[str, str]] = Counter()
    for r in records:
        seen = set()
        for f in r.get("findings") or []:
            if (f["rule"], f["action"]) not in seen:
                seen.add((f["rule"], f["action"]))
                counts[(f["rule"], f["action"])] += 1
    if not counts:
        return
    print("rules (records per rule id and action):")
    for (rule, action), count in sorted(counts.items(), key=lambda x: (x[0][1] != "reject", -x[1])):
        print(f"  {count:3d}  {action:6s} {rule}")
    rejected = [r for r in records if r["verdict"] == "rejected"]
    if rejected:
        print(f"rejected ({len(rejected)}):")
        for r in sorted(rejected, key=lambda r: r["problem_id"]):
            first: dict[str, str] = {}
            for f in r["findings"]:
                if f["action"] == "reject":
                    first.setdefault(f["rule"], f["message"][:90])
            why = "; ".join(f"{rule}: {message}" for rule, message in first.items())
            print(f"  {r['problem_id']}: {why}")
    degenerate = sum(
        any(f["rule"] == "problem.degenerate" for f in r.get("findings") or []) for r in records
    )
    if degenerate:
        print(f"records on degenerate problems: {degenerate}")
    isolation = Counter((r.get("isolation") or "")[:70] for r in records)
    for line, count in isolation.most_common(3):
        print(f"isolation ({count}): {line}")


def main() -> int:
    """Prints the report; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path)
    parser.add_argument("--expect-by-name", action="store_true")
    parser.add_argument("--table", type=Path)
    args = parser.parse_args()
    if not args.records.exists():
        print(f"records: none ({args.records} does not exist)")
        return 1
    records = [json.loads(line) for line in args.records.read_text().splitlines() if line.strip()]
    if args.table:
        args.table.write_text(table(records))
    seconds = [float(r.get("seconds") or 0.0) for r in records]
    if seconds:
        print(f"wall seconds per candidate (compile to verdict): {quantiles(seconds)}")
    verdicts = Counter(r["verdict"] for r in records)
    print(f"records: {len(records)}")
    for verdict, count in verdicts.most_common():
        print(f"  {verdict:18s} {count}")
    reasons = Counter(
        (r["verdict"], (r["reasons"] or [""])[0][:120])
        for r in records
        if r["verdict"] not in ("correct", "rejected")
    )
    if reasons:
        print("reasons of the others:")
        for (verdict, reason), count in reasons.most_common(30):
            print(f"  {count:3d}  {verdict}: {reason}")
    rules_report(records)
    speedups = [r["speedup"] for r in records if r["verdict"] == "correct" and r.get("speedup")]
    if speedups:
        print(f"speedups of {len(speedups)} correct candidates: {quantiles(speedups)}")
        geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        print(
            f"  geometric mean {geo:.3f}; > 1.0: {sum(s > 1 for s in speedups)}; > 2.0: {sum(s > 2 for s in speedups)}"
        )
        for tol in (0.02, 0.05, 0.10):
            share = sum(abs(s - 1.0) <= tol for s in speedups) / len(speedups)
            print(f"  within {tol:.0%} of 1.0: {share:.1%}")
        widths = [
            (r["speedup_ci95"][1] - r["speedup_ci95"][0]) / r["speedup"]
            for r in records
            if r["verdict"] == "correct" and r.get("speedup")
        ]
        print(f"  relative width of the 95% interval: median {statistics.median(widths):.3f}")
    if not args.expect_by_name:
        return 0
    surprises = [
        (r["candidate"], expected_verdict(r["candidate"]), r["verdict"])
        for r in records
        if expected_verdict(r["candidate"]) != r["verdict"]
    ]
    for candidate, want, got in surprises:
        print(f"SURPRISE {candidate}: expected {want}, got {got}")
    print("gpu_check:", "FAILED" if surprises else "all verdicts as expected")
    return 1 if surprises else 0


if __name__ == "__main__":
    sys.exit(main())
