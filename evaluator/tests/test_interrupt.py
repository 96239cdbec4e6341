"""`dice eval` interrupted at any point continues with --resume: the orchestrator killed with
SIGKILL, a worker killed, SIGTERM, the whole process group killed (as a machine restart does).
Nothing finished is lost or recorded twice, and no worker outlives its orchestrator. CPU only:
slow candidates (every forward call sleeps) on --device cpu."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DICE = ROOT / "build" / "dice"
PYTHON = ROOT / ".venv" / "bin" / "python3"

pytestmark = pytest.mark.skipif(not DICE.exists(), reason="build/dice not built (scripts/build.sh)")

SLOW_PROBLEM = """import time
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        time.sleep(SLEEP)
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
"""


def workload(tmp: Path, n: int, sleep: float) -> list[str]:
    """A problem and `n` identical candidates of it (one capture serves all)."""
    code = SLOW_PROBLEM.replace("SLEEP", str(sleep))
    (tmp / "problems").mkdir()
    (tmp / "problems" / "slow.py").write_text(code)
    line = json.dumps({"problem": "slow", "candidate": code + "\nModelNew = Model\n"})
    (tmp / "candidates.jsonl").write_text((line + "\n") * n)
    return [str(tmp / "problems"), "--candidates", str(tmp / "candidates.jsonl")]


def dice(tmp: Path, *args: str) -> list[str]:
    return [
        str(DICE),
        "eval",
        *args,
        "--device",
        "cpu",
        "--out-dir",
        str(tmp / "out"),
        "--cache",
        str(tmp / "cache"),
        "--python",
        str(PYTHON),
        "--no-timing",
        "--policy",
        "kernelbench",  # the candidates are the reference itself: strict rejects them
        "--correct-trials",
        "1",
        "--progress",
        "lines",
        "-j",
        "1",
    ]


def start(tmp: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        dice(tmp, *args),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp / "dice.log", "a"),  # noqa: SIM115 - closed with the process
        text=True,
        start_new_session=True,
    )


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid`."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def items(tmp: Path) -> list[tuple[int, str, int]]:
    with sqlite3.connect(tmp / "out" / "results.db") as db:
        return list(db.execute("SELECT seq, state, attempts FROM items ORDER BY seq"))


def done(tmp: Path) -> int:
    if not (tmp / "out" / "results.db").exists():
        return 0
    try:
        return sum(1 for _, state, _ in items(tmp) if state == "done")
    except sqlite3.OperationalError:  # not created yet
        return 0


def worker_pids(dice_pid: int) -> list[int]:
    return [
        p
        for p in children(dice_pid)
        if b"dice_worker\x00serve" in Path(f"/proc/{p}/cmdline").read_bytes()
    ]


def check_complete(tmp: Path, n: int) -> list[dict]:
    records = [
        json.loads(line) for line in (tmp / "out" / "records.jsonl").read_text().splitlines()
    ]
    assert len(records) == n, records
    assert all(r["verdict"] == "correct" for r in records), [r["reasons"] for r in records]
    assert all(state == "done" for _, state, _ in items(tmp))
    summary = json.loads((tmp / "out" / "summary.json").read_text())
    assert summary["state"] == "finished" and summary["finished"] == n
    return records


def resume(tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*dice(tmp, "--resume")], capture_output=True, text=True, timeout=600, check=False
    )


def test_orchestrator_sigkill_then_resume(tmp_path):
    args = workload(tmp_path, 5, 0.6)
    p = start(tmp_path, *args)
    wait_for(lambda: done(tmp_path) >= 2, 300, "two finished records")
    workers = worker_pids(p.pid)
    assert workers, "a worker runs"
    before = {seq for seq, state, _ in items(tmp_path) if state == "done"}
    p.kill()
    p.wait()
    # The workers die with their orchestrator (no orphans left running candidates).
    wait_for(lambda: not any(alive(w) for w in workers), 10, "the workers to die")
    r = resume(tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"({len(before)} of 5 candidates finished)" in r.stderr
    check_complete(tmp_path, 5)


def test_worker_killed_mid_candidate_is_retried(tmp_path):
    args = workload(tmp_path, 3, 1.5)
    p = start(tmp_path, *args)
    wait_for(lambda: done(tmp_path) >= 1, 300, "one finished record")
    wait_for(lambda: bool(worker_pids(p.pid)), 60, "a worker")
    os.kill(worker_pids(p.pid)[0], signal.SIGKILL)  # mid-way through the second candidate
    assert p.wait(timeout=300) == 0
    check_complete(tmp_path, 3)
    assert max(attempts for _, _, attempts in items(tmp_path)) == 2  # one retry, one record


def test_sigterm_stops_cleanly_then_resume(tmp_path):
    args = workload(tmp_path, 4, 0.6)
    p = start(tmp_path, *args)
    wait_for(lambda: done(tmp_path) >= 1, 300, "one finished record")
    kids = children(p.pid)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == 128 + signal.SIGTERM
    assert not any(alive(k) for k in kids), "compilers, captures and workers were stopped"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["state"] == "interrupted"
    assert "--resume" in (tmp_path / "dice.log").read_text()
    r = resume(tmp_path)
    assert r.returncode == 0, r.stderr
    check_complete(tmp_path, 4)


def test_whole_group_killed_like_a_restart_then_resume(tmp_path):
    args = workload(tmp_path, 4, 0.6)
    p = start(tmp_path, *args)
    wait_for(lambda: done(tmp_path) >= 1, 300, "one finished record")
    os.killpg(p.pid, signal.SIGKILL)  # dice and, at once, everything in its session group
    for pid in children(p.pid):
        os.killpg(pid, signal.SIGKILL)
    p.wait()
    r = resume(tmp_path)
    assert r.returncode == 0, r.stderr
    records = check_complete(tmp_path, 4)
    assert len({r["candidate"] for r in records}) == 4  # every item once ("path:line" labels)
