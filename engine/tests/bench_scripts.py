"""Helpers for the tests of bench/'s report scripts: run one as a user would, read its lines."""

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def run_bench_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """bench/NAME with ARGS under this Python; its output as text (60 s at most)."""
    return subprocess.run(
        [sys.executable, str(BENCH / name), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def line_after(stdout: str, start: str) -> str:
    """The rest of the first line of `stdout` that starts with `start` (StopIteration: none)."""
    line = next(line for line in stdout.splitlines() if line.startswith(start))
    return line[len(start) :]
