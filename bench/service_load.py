"""Load test of `dice eval serve` on loopback: a bounded client keeps N requests in flight, each a
batch of candidates whose verdicts it reads back from the NDJSON stream; prints latency
percentiles (submission to last verdict of a batch, and to first verdict) and throughput, and
checks that every submitted candidate came back exactly once (and that the server's counts agree).

Starts its own server (`--dice`, CPU workers by default) unless `--url` names a running one.
Candidates: KernelBench-format CPU problems with honest, wrong and broken candidates, so that
every verdict path of the service is exercised."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.OP(x)

def get_inputs():
    return [torch.randn(16, 64)]

def get_init_inputs():
    return []
"""

OPS = ("relu", "sigmoid", "tanh", "abs", "exp", "neg")


def make_item(rng: random.Random, index: int) -> dict[str, Any]:
    """One candidate: mostly honest (a distinct program each time), some wrong, some broken."""
    op = rng.choice(OPS)
    problem = PROBLEM.replace("OP", op)
    kind = rng.choices(["honest", "wrong", "syntax"], weights=[8, 1, 1])[0]
    if kind == "honest":
        candidate = problem + f"\nModelNew = Model  # candidate {index}\n"
    elif kind == "wrong":
        candidate = (
            "import torch\nclass ModelNew(torch.nn.Module):\n"
            f"    def forward(self, x):  # candidate {index}\n        return torch.{op}(x) + 1\n"
        )
    else:
        candidate = f"def broken(:  # candidate {index}\n"
    return {
        "problem": {"code": problem, "id": f"cpu/{op}"},
        "candidate": candidate,
        "label": f"c{index}",
        "kind": kind,
    }


class Client:
    """One HTTP connection per call (the service streams on the connection it answers)."""

    def __init__(self, url: str) -> None:
        u = urlparse(url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80

    def request(self, method: str, path: str, body: Any = None) -> Any:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
        try:
            data = None if body is None else json.dumps(body)
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            text = response.read().decode()
            if response.status >= 300:
                raise RuntimeError(f"{method} {path}: {response.status} {text}")
            return json.loads(text)
        finally:
            conn.close()

    def stream(self, path: str) -> list[tuple[float, dict[str, Any]]]:
        """(arrival time, line) for every NDJSON line until the stream ends."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            if response.status != 200:
                raise RuntimeError(f"GET {path}: {response.status} {response.read()!r}")
            out = []
            for raw in response:
                if raw.strip():
                    out.append((time.monotonic(), json.loads(raw)))
            return out
        finally:
            conn.close()


def one_request(client: Client, items: list[dict[str, Any]], options: dict[str, Any]) -> dict:
    start = time.monotonic()
    body = {"items": [{k: v for k, v in i.items() if k != "kind"} for i in items]}
    body["options"] = options
    made = client.request("POST", "/v1/batches", body)
    lines = client.stream(made["results"])
    status = client.request("GET", made["status"])
    return {
        "batch": made["batch"],
        "submitted": len(items),
        "lines": [line for _, line in lines],
        "first_s": lines[0][0] - start if lines else None,
        "last_s": lines[-1][0] - start if lines else None,
        "status": status,
        "kinds": [i["kind"] for i in items],
    }


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    command = [
        str(args.dice),
        "eval",
        "serve",
        "--port",
        "0",
        "--store",
        str(args.store),
        "--device",
        args.device,
        "--gpus",
        str(args.workers),
        "--cache",
        str(args.cache),
        "--jobs",
        str(args.jobs),
        "--correct-trials",
        "2",
        "--timing-trials",
        "10",
        "--warmup",
        "2",
    ]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        sys.stderr.write("server: " + line)
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, m.group(1)
    raise SystemExit(f"the server did not start (exit {proc.wait()})")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running server; default: start one")
    parser.add_argument("--dice", type=Path, default=root / "build/dice")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workers", type=int, default=2, help="--gpus of the server")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--store", type=Path, default=root / "out/service_load/store")
    parser.add_argument("--cache", type=Path, default=root / "out/service_load/cache")
    parser.add_argument("--requests", type=int, default=40, help="batches to submit")
    parser.add_argument("--batch", type=int, default=4, help="candidates per batch")
    parser.add_argument("--in-flight", type=int, default=8, help="requests in flight at most")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()

    server = None
    url = args.url
    if url is None:
        server, url = start_server(args)
    client = Client(url)
    rng = random.Random(args.seed)
    batches = [
        [make_item(rng, r * args.batch + i) for i in range(args.batch)]
        for r in range(args.requests)
    ]
    options = {"correct_trials": 2, "timing_trials": 10, "warmup": 2}
    start = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=args.in_flight) as pool:
            results = list(pool.map(lambda b: one_request(client, b, options), batches))
        wall = time.monotonic() - start
        health = client.request("GET", "/v1/health")
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=120)

    problems = []
    finishes: list[int] = []
    verdicts: dict[str, int] = {}
    for r in results:
        seqs = sorted(line["seq"] for line in r["lines"])
        if seqs != list(range(r["submitted"])):
            problems.append(f"batch {r['batch']}: got seqs {seqs} for {r['submitted']} items")
        if r["status"]["done"] != r["submitted"] or r["status"]["state"] != "finished":
            problems.append(f"batch {r['batch']}: status {r['status']}")
        for line in r["lines"]:
            finishes.append(line["finish"])
            v = line["record"]["verdict"]
            verdicts[v] = verdicts.get(v, 0) + 1
            expected = {"honest": "correct", "wrong": "mismatch", "syntax": "parse_error"}
            if v != expected[r["kinds"][line["seq"]]]:
                problems.append(f"batch {r['batch']} seq {line['seq']}: {v}")
    if len(finishes) != len(set(finishes)):
        problems.append("a finish number came twice")
    total = args.requests * args.batch
    last = [r["last_s"] for r in results if r["last_s"] is not None]
    first = [r["first_s"] for r in results if r["first_s"] is not None]
    summary = {
        "url": url,
        "requests": args.requests,
        "batch": args.batch,
        "in_flight": args.in_flight,
        "candidates": total,
        "received": len(finishes),
        "unique": len(set(finishes)),
        "wall_s": wall,
        "candidates_per_s": total / wall,
        "latency_last_s": {q: percentile(last, q) for q in (50, 90, 99)} | {"max": max(last)},
        "latency_first_s": {q: percentile(first, q) for q in (50, 90, 99)},
        "mean_last_s": statistics.mean(last),
        "verdicts": verdicts,
        "server": {k: health.get(k) for k in ("devices", "submitted", "finished")},
        "problems": problems,
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    if problems or len(finishes) != total:
        print(f"FAILED: {len(problems)} problems, {len(finishes)} of {total} verdicts received")
        return 1
    print(f"ok: {total} candidates, each verdict received once")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
