"""`dice bench` as a user runs it, on the CPU: a tiny random checkpoint end to end, resume after
SIGKILL, the infilling oracle, re-reporting, and an OpenAI-compatible endpoint on loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DICE = Path(os.environ.get("DICE_BIN", ROOT / "build" / "dice"))
SHARED = ROOT.parent / "shared"
KERNELBENCH = SHARED / "data" / "kernelbench" / "problems.jsonl"
INFILL = SHARED / "data" / "dice" / "infilling_eval_99.jsonl"

pytestmark = [
    pytest.mark.skipif(not DICE.exists(), reason=f"{DICE} not built (scripts/build.sh)"),
    pytest.mark.skipif(not KERNELBENCH.exists(), reason=f"{KERNELBENCH} absent (shared data)"),
]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(DICE), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def samples(out: Path) -> list[dict]:
    with sqlite3.connect(out / "bench.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM samples ORDER BY id")]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bench") / "tiny"
    done = run("model", "random", "--config", "tiny", "--out", str(path), "--init-std", "2.0")
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


def test_tiny_checkpoint_end_to_end_on_cpu(model: Path, cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = run("bench", "--model", str(model), "--problems", "kernelbench:L1", "--limit", "2",
               "--max-new-tokens", "12", "--threads", "1", "--device", "none", "--jobs", "1",
               "--cache", str(cache), "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "correctness and timing need a GPU" in done.stdout
    assert "| L1 | 2 | 2 |" in done.stdout
    rows = samples(out)
    assert len(rows) == 2 and all(r["status"] in ("generated", "truncated") for r in rows)
    assert all(r["verdict"] for r in rows)  # evaluated: compiled or a CPU-stage verdict
    assert all(r["prompt"].startswith("<|im_start|>user\n") for r in rows)
    assert all("def get_inputs" in r["prompt"] and 0 < r["output_tokens"] <= 12 for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert {"load", "generation"} <= set(summary["stages_seconds"])
    html = (out / "report.html").read_text()
    assert "<svg" in html and "<style>" in html and "<script" not in html
    assert not re.search(r"<[a-z]+[^>]*\s(src|href)=", html)  # nothing fetched
    # The store is enough to re-report; a second run into the same folder is refused.
    again = run("bench", "report", "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert "| L1 | 2 | 2 |" in again.stdout
    refused = run("bench", "--model", str(model), "--out", str(out))
    assert refused.returncode == 2 and "--resume" in refused.stderr


def test_sigkill_then_resume_redoes_only_unfinished(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [str(DICE), "bench", "--model", str(model), "--problems", "kernelbench:L1",
            "--limit", "3", "--samples", "2", "--max-active", "1", "--max-new-tokens", "1024",
            "--threads", "1", "--no-eval", "--progress", "lines", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("generated [2/"):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    before = {r["id"]: r for r in samples(out) if r["status"] != "pending"}
    assert 2 <= len(before) < 6
    done = run("bench", "--resume", "--no-eval", "--out", str(out), "--progress", "lines")
    assert done.returncode == 0, done.stderr
    assert f"({len(before)} generated" in done.stderr
    assert done.stderr.count("generated [") == 6 - len(before)
    after = samples(out)
    assert all(r["status"] in ("generated", "truncated") for r in after)
    for r in after:  # finished samples were kept as they were
        if r["id"] in before:
            assert r["output"] == before[r["id"]]["output"]
    # Samples j of a problem use seed + j: the two samples of a problem differ in seed.
    assert {r["seed"] for r in after} == {0, 1}


@pytest.mark.skipif(not INFILL.exists(), reason=f"{INFILL} absent (shared data)")
def test_infill_oracle_rebuilds_the_reference_solution(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = run("bench", "--mode", "infill", "--oracle-middle", "--limit", "2", "--no-eval",
               "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in INFILL.read_text().splitlines()[:2]]
    rows = samples(out)
    assert [r["problem_id"] for r in rows] == [f"dice/{r['id']}" for r in records]
    for row, rec in zip(rows, records, strict=True):
        assert row["candidate"] == rec["cuda_code"]  # prefix + true middle + suffix
        assert row["code"] == rec["middle"] and row["status"] == "generated"
        assert rec["prefix"] in row["prompt"] and rec["suffix"] in row["prompt"]


class _ChatServer(BaseHTTPRequestHandler):
    """Speaks /v1/chat/completions; each sample's first request gets a 503 (to be retried)."""

    answer = ""
    seen: list[dict] = []
    failed_once: set[str] = set()

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _ChatServer.seen.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                 "body": body})  # fmt: skip
        key = f"{body['messages'][0]['content']}#{body.get('seed')}"
        if key not in _ChatServer.failed_once:
            _ChatServer.failed_once.add(key)
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b"busy")
            return
        if body.get("model") == "nope":
            self._send(404, {"error": {"message": "model nope does not exist"}})
            return
        self._send(200, {
            "choices": [{"message": {"role": "assistant", "content": _ChatServer.answer},
                         "finish_reason": "stop"}],
            "usage": {"completion_tokens": 42},
        })  # fmt: skip

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def server() -> Iterator[str]:
    _ChatServer.answer = "Here you go.\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
    _ChatServer.answer += "    def forward(self, x):\n        return torch.relu(x)\n```\n"
    _ChatServer.seen = []
    _ChatServer.failed_once = set()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _ChatServer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_endpoint_on_loopback(server: str, cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    start = time.monotonic()
    done = run("bench", "--endpoint", server, "--endpoint-model", "m", "--api-key-env", "DICE_K",
               "--problems", "kernelbench:L1/19", "--samples", "2", "--device", "none",
               "--cache", str(cache), "--jobs", "1", "--out", str(out), "--policy", "lenient",
               env={"DICE_K": "secret"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 120
    rows = samples(out)
    assert len(rows) == 2
    assert all(r["code"].startswith("import torch\nclass ModelNew") for r in rows)
    assert all(r["output_tokens"] == 42 and r["verdict"] == "compiled" for r in rows)
    ok = [s for s in _ChatServer.seen if s["body"].get("model") == "m"]
    assert len(ok) == 4  # each sample: a 503, then retried
    assert {s["path"] for s in ok} == {"/v1/chat/completions"}
    assert {s["auth"] for s in ok} == {"Bearer secret"}
    assert sorted(s["body"]["seed"] for s in ok) == [0, 0, 1, 1]


def test_endpoint_errors_are_clear(server: str, tmp_path: Path) -> None:
    done = run("bench", "--endpoint", server, "--endpoint-model", "nope", "--problems",
               "kernelbench:L1/19", "--no-eval", "--retries", "1", "--out",
               str(tmp_path / "a"))  # fmt: skip
    assert done.returncode == 1
    assert "HTTP 404" in done.stdout + done.stderr and "does not exist" in done.stderr
    unset = run("bench", "--endpoint", server, "--api-key-env", "DICE_UNSET_VAR", "--problems",
                "kernelbench:L1/19", "--no-eval", "--out", str(tmp_path / "b"))  # fmt: skip
    assert unset.returncode == 2 and "DICE_UNSET_VAR" in unset.stderr
    dead = run("bench", "--endpoint", "http://127.0.0.1:9", "--problems", "kernelbench:L1/19",
               "--no-eval", "--retries", "0", "--out", str(tmp_path / "c"))  # fmt: skip
    assert dead.returncode == 1 and "127.0.0.1:9" in dead.stderr


class _PerSeedServer(_ChatServer):
    """Speaks /v1/chat/completions; the answer depends on the request's seed (the sample)."""

    answers: dict[int, str] = {}

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._send(200, {
            "choices": [{"message": {"role": "assistant",
                                     "content": _PerSeedServer.answers[body["seed"]]},
                         "finish_reason": "stop"}],
            "usage": {"completion_tokens": 7},
        })  # fmt: skip


def test_outputs_without_code_get_parse_error_without_the_evaluator(tmp_path: Path) -> None:
    _PerSeedServer.answers = {
        0: "I would write a fused kernel here, with shared memory.",  # prose: not Python
        1: "Here it is:\n```python\nimport torch\nclass ModelNew(torch.nn.",  # ends inside a block
        2: "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x)\n```\n",
    }
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _PerSeedServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    out, cache = tmp_path / "run", tmp_path / "cache"
    try:
        done = run("bench", "--endpoint", f"http://127.0.0.1:{httpd.server_address[1]}",
                   "--problems", "kernelbench:L1/19", "--samples", "3", "--device", "none",
                   "--jobs", "1", "--cache", str(cache), "--out", str(out),
                   "--progress", "lines")  # fmt: skip
    finally:
        httpd.shutdown()
    assert done.returncode == 0, done.stderr
    rows = samples(out)
    assert [r["verdict"] for r in rows] == ["parse_error", "truncated", "rejected"]
    # Only the sample with code reached the evaluator's CPU stage (its content-addressed folder;
    # strict policy: torch.relu alone is rejected).
    assert len(list((cache / "candidates").iterdir())) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdicts"] == {"parse_error": 1, "rejected": 1, "truncated": 1}
    # The early records are the ones `dice eval` writes for the same outputs.
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text("".join(
        json.dumps({"problem": "L1/19", "candidate": _PerSeedServer.answers[s]}) + "\n"
        for s in (0, 1)))  # fmt: skip
    evaluated = run("eval", "--problems", "kernelbench:L1/19", "--candidates", str(candidates),
                    "--device", "none", "--jobs", "1", "--cache", str(tmp_path / "cache2"),
                    "--out-dir", str(tmp_path / "eval"))  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    records = [
        json.loads(x) for x in (tmp_path / "eval" / "records.jsonl").read_text().splitlines()
    ]
    keys = ("verdict", "reasons", "candidate_hash", "compile", "policy", "isolation", "problem_id")
    by_hash = {r["candidate_hash"]: {k: r[k] for k in keys} for r in records}
    for row in rows[:2]:
        record = json.loads(row["record"])
        assert by_hash[record["candidate_hash"]] == {k: record[k] for k in keys}
    assert json.loads(rows[0]["record"])["reasons"][0].startswith("SyntaxError: invalid syntax")
    # Re-reporting counts them the same way.
    again = run("bench", "report", "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "summary.json").read_text())["verdicts"] == summary["verdicts"]


def test_decoding_options_are_those_of_generate(tmp_path: Path) -> None:
    def decoding_lines(command: str) -> set[str]:
        done = run(command, "--help")
        assert done.returncode == 0, done.stderr
        names = ("--block-length", "--steps", "--strategy", "--threshold", "--entropy-bound",
                 "--temperature", "--top-k", "--top-p", "--seed", "--max-new-tokens",
                 "--stop-ids", "--vocab-limit", "--no-fused-store", "--no-chat-template",
                 "--enable-thinking", "--max-active")  # fmt: skip
        text = re.sub(r"\n {20,}", " ", done.stdout)  # help continued on the next line
        lines = {" ".join(x.split()) for x in text.splitlines() if x.strip().startswith(names)}
        assert len(lines) == len(names), lines
        return lines

    assert decoding_lines("bench") == decoding_lines("generate")
    out = tmp_path / "run"
    bad = run("bench", "--model", "/nonexistent", "--strategy", "fastest", "--out", str(out))
    assert bad.returncode == 2 and "--strategy fastest" in bad.stderr
    assert not out.exists()  # refused before anything was stored


def _options(out: Path) -> dict:
    with sqlite3.connect(out / "bench.db") as db:
        return json.loads(db.execute("SELECT value FROM meta WHERE key = 'options'").fetchone()[0])


def _set_options(out: Path, options: dict) -> None:
    with sqlite3.connect(out / "bench.db") as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'options'", (json.dumps(options),))


def test_stored_eval_options_are_the_evaluators_and_old_runs_resume(tmp_path: Path) -> None:
    _PerSeedServer.answers = {0: "no code, just words", 1: "```python\nimport torch\nx = ("}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _PerSeedServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    out, cache = tmp_path / "run", tmp_path / "cache"
    try:
        done = run("bench", "--endpoint", f"http://127.0.0.1:{httpd.server_address[1]}",
                   "--problems", "kernelbench:L1/19", "--samples", "2", "--no-eval",
                   "--eval-seed", "7", "--out", str(out))  # fmt: skip
    finally:
        httpd.shutdown()
    assert done.returncode == 0, done.stderr
    # What `dice eval` stores with its runs (eval::run_options_json), the problem set included.
    stored = _options(out)["eval"]
    assert set(stored) == {"protocol", "seed", "correct_trials", "timing_trials", "warmup",
                           "measure_timing", "arch", "problems", "candidates",
                           "reference_as_candidate", "policy", "rule_overrides",
                           "static_only"}  # fmt: skip
    assert stored["seed"] == 7 and stored["problems"] == "kernelbench:L1/19"
    # A run stored by an older dice bench (its own shorter list) resumes; the outputs generated
    # with --no-eval get their early verdicts without the evaluator.
    old = {k: stored[k] for k in ("protocol", "seed", "correct_trials", "timing_trials", "warmup",
                                  "measure_timing", "policy", "rule_overrides", "arch")}  # fmt: skip
    _set_options(out, {**_options(out), "eval": old})
    resumed = run("bench", "--resume", "--device", "none", "--jobs", "1", "--cache", str(cache),
                  "--out", str(out))  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert [r["verdict"] for r in samples(out)] == ["parse_error", "truncated"]
    assert not (cache / "candidates").exists()
    with sqlite3.connect(out / "eval" / "results.db") as db:
        runs = [json.loads(o) for (o,) in db.execute("SELECT options FROM runs")]
    assert runs == [old, old]
    # Options that are not a bench run's are refused, naming the file.
    _set_options(out, {k: v for k, v in _options(out).items() if k != "eval"})
    refused = run("bench", "--resume", "--device", "none", "--out", str(out))
    assert refused.returncode == 2 and str(out / "bench.db") in refused.stderr
