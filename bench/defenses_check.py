"""Checks a run of the defences suite against evaluator/defenses/manifest.json.

Usage: defenses_check.py MANIFEST RECORDS [RECORDS ...]

Each candidate's record must have one of the manifest's verdicts and carry every rule id the
manifest names (reject or warn). Prints one line per candidate and a summary; exit status 1 on
any surprise (a wrong verdict, a missing rule, a candidate without a record).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def main(argv: list[str]) -> int:
    """Prints the check; returns the exit status."""
    if len(argv) < 3:
        print(__doc__)
        return 2
    manifest = json.loads(Path(argv[1]).read_text())["candidates"]
    records: dict[str, dict] = {}
    for path in argv[2:]:
        if not Path(path).exists():
            print(f"records: none at {path}")
            continue
        for line in Path(path).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                records[Path(r["candidate"]).name] = r
    surprises = 0
    outcome: Counter[str] = Counter()
    for entry in manifest:
        name = Path(entry["file"]).name
        r = records.get(name)
        if r is None:
            print(f"MISSING  {entry['kind']:6s} {name}: no record")
            surprises += 1
            continue
        missing = [rule for rule in entry["rules"] if rule not in r.get("rules", [])]
        ok = r["verdict"] in entry["verdict"] and not missing
        surprises += not ok
        outcome[f"{entry['kind']} {'as expected' if ok else 'SURPRISE'}"] += 1
        detail = ", ".join(r.get("rules", [])) or "-"
        reason = (
            ""
            if ok
            else f"  expected {entry['verdict']} with {entry['rules']}; {(r['reasons'] or [''])[-1][:200]}"
        )
        print(
            f"{'ok      ' if ok else 'SURPRISE'} {entry['kind']:6s} §{entry['pattern']:9s} {name:42s} "
            f"{r['verdict']:14s} [{detail}]{reason}"
        )
    print()
    for key, count in sorted(outcome.items()):
        print(f"{key}: {count}")
    isolation = Counter(r.get("isolation", "")[:60] for r in records.values())
    for line, count in isolation.most_common():
        print(f"isolation ({count} records): {line}")
    print("defenses:", "FAILED" if surprises else "every verdict as expected")
    return 1 if surprises else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
