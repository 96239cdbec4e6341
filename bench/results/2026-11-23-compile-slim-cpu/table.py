"""Prints the table of README.md from raw/*.time and raw/*.nvtime."""

import csv
from pathlib import Path

raw = Path(__file__).parent / "raw"
PHASES = ("gcc (preprocessing 4)", "cudafe++", "gcc (preprocessing 1)", "cicc", "gcc (compiling)")
print("| pair | header | CPU s | wall s | " + " | ".join(PHASES) + " |")
print("|---|---|---:|---:|" + "---:|" * len(PHASES))
for time_file in sorted(raw.glob("*.time"), key=lambda p: (int(p.stem.split("_")[0]), p.stem)):
    pair, header = time_file.stem.split("_")
    user, system, wall = (float(x) for x in time_file.read_text().split()[-3:])
    rows = list(csv.reader(time_file.with_suffix(".nvtime").open()))[1:]
    phases = {r[1].strip(): float(r[6]) / 1000 for r in rows if len(r) > 6}
    cells = " | ".join(f"{phases.get(p, 0):.1f}" for p in PHASES)
    print(f"| {pair} | {header} | {user + system:.1f} | {wall:.0f} | {cells} |")
