"""Shared fixtures: a worker process on the CPU speaking the protocol of PROTOCOL.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

WORKER_PATH = Path(__file__).resolve().parents[1]

RELU_PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
"""


class Worker:
    """A ``dice_worker serve --device cpu`` subprocess; ``evaluate`` returns its events."""

    def __init__(self, tmp: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(WORKER_PATH)}
        self.tmp = tmp
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dice_worker", "serve", "--device", "cpu"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        ready = json.loads(self.proc.stdout.readline())
        assert ready["event"] == "ready"
        self.ready: dict[str, Any] = ready
        self.next_id = 1

    def send(self, candidate: str, problem: str = RELU_PROBLEM, **options: Any) -> int:
        """Writes problem and candidate files and sends a request; returns its id."""
        rid = self.next_id
        self.next_id += 1
        (self.tmp / f"problem{rid}.py").write_text(problem)
        (self.tmp / f"cand{rid}.py").write_text(candidate)
        opts = {
            "protocol": "dice",
            "seed": 42,
            "correct_trials": 3,
            "timing_trials": 4,
            "warmup": 1,
        }
        code_sha256 = options.pop("code_sha256_override", None)
        opts.update(options)
        request = {
            "op": "evaluate",
            "id": rid,
            "problem": {"id": "p", "path": str(self.tmp / f"problem{rid}.py")},
            "candidate": {"path": str(self.tmp / f"cand{rid}.py"), "extensions": {}},
            "options": opts,
        }
        if code_sha256 is not None:
            request["candidate"]["code_sha256"] = code_sha256
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return rid

    def events(self, rid: int) -> list[dict[str, Any]]:
        """Reads events of request ``rid`` until its result."""
        assert self.proc.stdout is not None
        out = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                return out
            event = json.loads(line)
            if event.get("id") == rid:
                out.append(event)
                if event["event"] == "result":
                    return out

    def evaluate(self, candidate: str, problem: str = RELU_PROBLEM, **options: Any) -> dict:
        """The result event of one request."""
        return self.events(self.send(candidate, problem, **options))[-1]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    w = Worker(tmp_path)
    yield w
    w.close()
