"""`dice bench` on outputs without usable code, two dice binaries side by side: how long the
evaluation after generation takes when each such output goes through the evaluator (before) and
when it gets its verdict at extraction (after). An OpenAI-compatible endpoint double on loopback
answers every problem with prose (no code block) or with a code block cut short, as a random-weight
model does (each answer distinct, as the evaluator caches by content); evaluation is compile-only (--device none), so no GPU is needed.

    .venv/bin/python bench/early_verdict.py --before OLD/dice --after build/dice [--problems 16]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ANSWERS = (
    "I would fuse these operations into one kernel with shared-memory tiling.",
    "Here is the kernel:\n```python\nimport torch\nfrom torch.utils.cpp_extension import load_",
)


class _Endpoint(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        crc = zlib.crc32(body["messages"][0]["content"].encode())
        content = f"{ANSWERS[crc % 2]} ({crc})"  # distinct outputs: the evaluator caches by content
        data = json.dumps({
            "choices": [{"message": {"role": "assistant", "content": content},
                         "finish_reason": "length"}],
            "usage": {"completion_tokens": 256},
        }).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def bench(dice: Path, url: str, problems: int, jobs: int, work: Path) -> dict:
    """One `dice bench` call; its wall time, stage times and verdict counts."""
    out = work / "run"
    start = time.monotonic()
    done = subprocess.run(
        [str(dice), "bench", "--endpoint", url, "--problems", "kernelbench:L1,L2,L3",
         "--limit", str(problems), "--device", "none", "--jobs", str(jobs),
         "--cache", str(work / "cache"), "--out", str(out), "--progress", "none"],
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"{dice} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {"wall": wall, "stages": summary["stages_seconds"], "verdicts": summary["verdicts"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="dice without early verdicts")
    parser.add_argument("--after", type=Path, required=True, help="dice with early verdicts")
    parser.add_argument("--problems", type=int, default=16, help="KernelBench problems, 1 each")
    parser.add_argument("--jobs", type=int, default=2, help="evaluator CPU-stage jobs")
    args = parser.parse_args()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    results = {}
    try:
        for name in ("before", "after"):
            with tempfile.TemporaryDirectory(prefix=f"dice-early-{name}-") as work:
                results[name] = bench(
                    getattr(args, name), url, args.problems, args.jobs, Path(work)
                )
    finally:
        httpd.shutdown()
    stage = "evaluation after generation"
    print(f"{args.problems} outputs without usable code, --device none, --jobs {args.jobs}")
    print(f"| binary | {stage} (s) | whole call (s) | verdicts |\n|---|---:|---:|---|")
    for name, r in results.items():
        print(f"| {name} | {r['stages'][stage]:.2f} | {r['wall']:.2f} | {r['verdicts']} |")
    b, a = results["before"], results["after"]
    saved = b["stages"][stage] - a["stages"][stage]
    print(f"\n{stage}: {saved:.2f} s saved ({1e3 * saved / args.problems:.0f} ms per output); "
          f"whole call before/after = {b['wall'] / a['wall']:.2f}x")  # fmt: skip
    if b["verdicts"] != a["verdicts"]:
        raise SystemExit(f"verdicts differ: before {b['verdicts']}, after {a['verdicts']}")
    print("same verdicts")


if __name__ == "__main__":
    main()
