"""Issue 6's table over several runs of bench/device_engine_bench.sh: each configuration from the
last run given that has dice's record of it, beside the PyTorch record of that same run.

    engine_bench_merge.py RUN [RUN ...] [--markdown]

RUN is a run's tarball (the engine-bench-TAG.tar.gz that device_engine_bench.sh leaves, holding
engine-bench/dice.jsonl, torch.jsonl and clocks.csv) or a folder holding those files (directly or
in engine-bench/). Later RUN arguments win: give the runs oldest first. A configuration whose
later run has only PyTorch's record (dice stopped at its time limit) keeps the earlier run's dice
and PyTorch records. The table is engine_bench_report.py's with a last column "run" (the RUN as
given), and issue 6's targets are counted over the merged rows. Each record keeps the floor its
own run measured, so rows of different runs stand on different ceilings. A RUN that cannot be
read (missing, not a tarball, cut short), or that holds no dice.jsonl, is an error that names it
(exit status 2).
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from engine_bench_report import (
    ceiling_rates,
    clock_samples_of,
    collapse_repeats,
    key,
    records_of,
    run_ceilings,
    table,
)

RUN_FILES = ("dice.jsonl", "torch.jsonl", "clocks.csv")  # what a run leaves in engine-bench/


@dataclass
class Run:
    """One run's records: dice's and PyTorch's (JSON records) and the card's clock samples."""

    name: str
    dice: list[dict] = field(default_factory=list)
    torch: list[dict] = field(default_factory=list)
    samples: list[tuple[float, float, bool]] = field(default_factory=list)


class RunError(Exception):
    """A RUN argument that cannot be read; the message names it."""


def read_run(arg: str) -> Run:
    """The records of RUN `arg` (a tarball or a folder, see the module's doc). Raises RunError
    when it is missing, unreadable, or holds no dice.jsonl."""
    path = Path(arg)
    texts: dict[str, str] = {}
    if path.is_dir():
        for name in RUN_FILES:
            for candidate in (path / name, path / "engine-bench" / name):
                if candidate.is_file():
                    texts[name] = candidate.read_text()
                    break
    elif path.is_file():
        try:
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    name = Path(member.name).name
                    if member.isfile() and name in RUN_FILES:
                        data = tar.extractfile(member)
                        if data is not None:
                            texts[name] = data.read().decode()
        except (tarfile.TarError, OSError, EOFError, zlib.error, UnicodeDecodeError) as error:
            raise RunError(f"{arg}: not a readable run tarball ({error})") from error
    else:
        raise RunError(f"{arg}: no such file or folder")
    if "dice.jsonl" not in texts:
        raise RunError(f"{arg}: holds no dice.jsonl (a run of bench/device_engine_bench.sh)")
    return Run(
        name=arg,
        dice=records_of(texts["dice.jsonl"]),
        torch=records_of(texts.get("torch.jsonl", "")),
        samples=clock_samples_of(texts.get("clocks.csv", "")),
    )


def merge(runs: list[Run]) -> tuple[list[dict], list[dict], dict[tuple, str]]:
    """The merged dice and PyTorch records and each configuration's run name, by key(): for each
    configuration the last run with a dice record of it, with that run's PyTorch record; a
    configuration no run has dice's record of takes the last PyTorch record of it. A run's
    repeated rows are collapsed first (collapse_repeats: its median round). Rows keep the order in
    which their configuration first appears."""
    order: dict[tuple, None] = {}  # the configurations in order of first appearance
    dice: dict[tuple, dict] = {}
    torch: dict[tuple, dict] = {}
    sources: dict[tuple, str] = {}
    for run in runs:
        torch_of = {key(r): r for r in run.torch}
        for k in [key(r) for r in run.dice] + list(torch_of):
            order.setdefault(k)
        for r in collapse_repeats(run.dice):
            k = key(r)
            dice[k], sources[k] = r, run.name
            torch.pop(k, None)
            if k in torch_of:
                torch[k] = torch_of[k]
        for k, r in torch_of.items():
            if k not in dice:  # PyTorch ran where dice did not finish, in every run so far
                torch[k], sources[k] = r, run.name
    return [dice[k] for k in order if k in dice], [torch[k] for k in order if k in torch], sources


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run tarballs or folders, oldest first")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    try:
        runs = [read_run(arg) for arg in args.runs]
    except RunError as error:
        print(f"engine_bench_merge.py: {error}", file=sys.stderr)
        return 2
    dice, torch, sources = merge(runs)
    used = set(sources.values())
    for run in runs:
        if run.name in used:
            print(f"{'- ' if args.markdown else ''}{run.name}: {ceilings_of(run)}")
    print()
    samples = [s for run in runs for s in run.samples]
    print(table(dice, torch, args.markdown, samples, sources))
    return 0


def ceilings_of(run: Run) -> str:
    """The ceilings `run` measured, in words ("no ceilings" for a run without them)."""
    c = run_ceilings(run.dice)
    if c is None:
        return "no ceilings"
    copy, gemm, sustained = ceiling_rates(c)
    return f"{c['device']}: copy {copy:.0f} GB/s, bf16 GEMM {gemm:.0f} TFLOP/s" + (
        f" ({sustained:.0f} sustained)" if sustained else ""
    )


if __name__ == "__main__":
    sys.exit(main())
