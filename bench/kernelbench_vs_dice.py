"""KernelBench's own evaluation against `dice eval` on the same candidates (issue 4's target: dice
at least 10x sooner, same verdicts on honest candidates).

Candidates: the 99 DICE PyTorch/CUDA pairs plus the bundled example (examples/ relu), 100 in all,
shuffled with --seed; each side takes the first --limit of that order, so the two sides overlap
on min(limits) candidates, where their verdicts are compared.

  kernelbench  KernelBench's `eval_kernel_against_ref` (from --kernelbench, a checkout with
               src/kernelbench; commit 423217d), one candidate after another in one Python process
               (a crash restarts the process at the next candidate): load_inline compile into a
               fresh build folder, 5 correctness trials, 100 timed trials of the candidate and the
               reference (its protocol). Stops starting candidates when --budget runs out.
  dice         `dice eval` on the same candidates with a fresh cache (cold: the precompiled header
               is built during the run), default protocol, every GPU.
  report       reads both sides' JSON (from earlier calls) and prints the comparison.

Writes OUT/<side>.json and prints per-candidate seconds, totals, the extrapolation to all 100
candidates (KernelBench is serial: its per-candidate mean times 100) and the ratio.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KB_PROTOCOL = {"num_correct_trials": 5, "num_perf_trials": 100, "seed_num": 42}


def load_candidates(pairs_path: Path) -> list[dict[str, Any]]:
    """The 99 pairs and the bundled example, as {"id", "pytorch_code", "cuda_code"}."""
    out = []
    for line in pairs_path.read_text().splitlines():
        if line.strip():
            p = json.loads(line)
            out.append(
                {"id": str(p["id"]), "pytorch_code": p["pytorch_code"], "cuda_code": p["cuda_code"]}
            )
    examples = ROOT / "examples"
    out.append(
        {
            "id": "example_relu",
            "pytorch_code": (examples / "problems" / "relu.py").read_text(),
            "cuda_code": (examples / "candidates" / "relu.py").read_text(),
        }
    )
    return out


def sample(candidates: list[dict[str, Any]], seed: int, limit: int) -> list[dict[str, Any]]:
    order = list(candidates)
    random.Random(seed).shuffle(order)
    return order[: max(0, limit)]


# ---------------------------------------------------------------- KernelBench side


def _stub_missing_modules() -> list[str]:
    """KernelBench's package imports API clients and helpers its evaluation never calls; stub the
    ones that are not installed (the device has no network) and say which."""
    stubbed = []

    def stub(name: str, **attrs: Any) -> None:
        try:
            importlib.import_module(name)
        except ImportError:
            module = types.ModuleType(name)
            for key, value in attrs.items():
                setattr(module, key, value)
            sys.modules[name] = module
            stubbed.append(name)

    class _Unavailable:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("stubbed: not installed on this machine")

    class _BaseModel:  # what KernelExecResult needs of pydantic: keyword construction
        def __init__(self, **kwargs: Any) -> None:
            for key, value in kwargs.items():
                setattr(self, key, value)

    stub("dotenv", load_dotenv=lambda *a, **k: None)
    stub("tqdm", tqdm=lambda it=None, *a, **k: it)
    stub("openai", OpenAI=_Unavailable)
    stub("litellm", completion=_Unavailable)
    stub("requests")
    stub("pydantic", BaseModel=_BaseModel)
    return stubbed


def kernelbench_child(args: argparse.Namespace) -> int:
    """Evaluates the candidates of --todo one after another; one JSON line per candidate."""
    sys.path.insert(0, str(args.kernelbench / "src"))
    stubbed = _stub_missing_modules()
    import torch
    from kernelbench.eval import eval_kernel_against_ref

    todo = [json.loads(line) for line in args.todo.read_text().splitlines() if line.strip()]
    with open(args.results, "a") as out:
        out.write(json.dumps({"event": "start", "stubbed": stubbed}) + "\n")
        out.flush()
        for c in todo:
            build = args.work / "kb_build" / c["id"]
            shutil.rmtree(build, ignore_errors=True)
            build.mkdir(parents=True)
            out.write(json.dumps({"event": "begin", "id": c["id"]}) + "\n")
            out.flush()
            start = time.monotonic()
            row: dict[str, Any] = {"event": "done", "id": c["id"]}
            try:
                r = eval_kernel_against_ref(
                    c["pytorch_code"],
                    c["cuda_code"],
                    measure_performance=True,
                    verbose=False,
                    build_dir=str(build),
                    device=torch.device("cuda:0"),
                    **KB_PROTOCOL,
                )
                if r is None:
                    row["error"] = "eval_kernel_against_ref returned None (lock file error)"
                else:
                    row.update(
                        compiled=bool(r.compiled),
                        correct=bool(r.correctness),
                        runtime_us=getattr(r, "runtime", -1.0),
                        ref_runtime_us=getattr(r, "ref_runtime", -1.0),
                        metadata={k: str(v)[:300] for k, v in (r.metadata or {}).items()},
                    )
            except Exception as e:  # noqa: BLE001 - a harness failure is a result here
                row["error"] = f"{type(e).__name__}: {e}"[:500]
            row["seconds"] = time.monotonic() - start
            out.write(json.dumps(row) + "\n")
            out.flush()
    return 0


def run_kernelbench(args: argparse.Namespace, todo: list[dict[str, Any]]) -> dict[str, Any]:
    kb_src = args.kernelbench / "src" / "kernelbench" / "eval.py"
    if not kb_src.exists():
        raise SystemExit(f"--kernelbench {args.kernelbench}: no src/kernelbench/eval.py there")
    results = args.work / "kb_results.jsonl"
    results.unlink(missing_ok=True)
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(args.work / "torch_extensions")}
    shutil.rmtree(args.work / "torch_extensions", ignore_errors=True)
    start = time.monotonic()
    rows: dict[str, dict[str, Any]] = {}
    stubbed: list[str] = []
    remaining = list(todo)
    while remaining:
        elapsed = time.monotonic() - start
        done_times = [r["seconds"] for r in rows.values() if "seconds" in r]
        mean = statistics.mean(done_times) if done_times else 0.0
        if args.budget and elapsed + mean > args.budget:
            print(f"kernelbench: budget of {args.budget} s reached; {len(remaining)} not started")
            break
        todo_file = args.work / "kb_todo.jsonl"
        todo_file.write_text("".join(json.dumps(c) + "\n" for c in remaining))
        child = [sys.executable, __file__, "_kb_child", "--kernelbench", str(args.kernelbench)]
        child += ["--todo", str(todo_file), "--results", str(results), "--work", str(args.work)]
        timeout = max(1.0, args.budget - elapsed) if args.budget else None
        try:
            subprocess.run(child, env=env, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            print("kernelbench: the budget ended during a candidate")
        begun = None
        for line in results.read_text().splitlines():
            event = json.loads(line)
            if event["event"] == "start":
                stubbed = event["stubbed"]
            elif event["event"] == "begin":
                begun = event["id"]
            elif event["event"] == "done":
                rows[event["id"]] = event
                begun = None
        if begun is not None and begun not in rows:  # the process died on this candidate
            rows[begun] = {"id": begun, "error": "the evaluation process died", "seconds": None}
            print(f"kernelbench: the process died on candidate {begun}; going on")
        remaining = [c for c in todo if c["id"] not in rows]
        if args.budget and time.monotonic() - start >= args.budget:
            break
    wall = time.monotonic() - start
    for c in todo:
        r = rows.get(c["id"])
        if r:
            print(
                f"kernelbench {c['id']:>14}: {fmt(r.get('seconds'))} s "
                f"correct={r.get('correct')} {r.get('error', '')}"
            )
    return {
        "side": "kernelbench",
        "wall_s": wall,
        "stubbed_modules": stubbed,
        "protocol": KB_PROTOCOL,
        "candidates": [rows[c["id"]] for c in todo if c["id"] in rows],
        "not_run": [c["id"] for c in todo if c["id"] not in rows],
    }


# ---------------------------------------------------------------- dice side


def run_dice(args: argparse.Namespace, todo: list[dict[str, Any]]) -> dict[str, Any]:
    pairs = args.work / "dice_pairs.jsonl"
    pairs.write_text("".join(json.dumps(c) + "\n" for c in todo))
    cache = args.work / "dice_cache"
    out = args.work / "dice_out"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    command = [str(args.dice), "eval", "--candidates", str(pairs), "--device", args.dice_device]
    command += ["--cache", str(cache), "--out-dir", str(out), "--progress", "lines"]
    command += args.dice_args
    start = time.monotonic()
    status = subprocess.run(command, timeout=args.budget or None, check=False).returncode
    wall = time.monotonic() - start
    records = []
    if (out / "records.jsonl").exists():
        records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    rows = []
    for r in records:
        cid = r["problem_id"].removeprefix("dice/")
        rows.append(
            {
                "id": cid,
                "verdict": r["verdict"],
                "correct": r["verdict"] == "correct",
                "seconds": r["seconds"],
                "compile_seconds": r["compile"]["seconds"],
                "speedup": r.get("speedup"),
            }
        )
        print(f"dice {cid:>14}: {r['seconds']:.1f} s {r['verdict']} speedup={r.get('speedup')}")
    return {"side": "dice", "wall_s": wall, "exit": status, "command": command, "candidates": rows}


# ---------------------------------------------------------------- report


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def report(kb: dict[str, Any], dice: dict[str, Any], total: int) -> dict[str, Any]:
    kb_times = [r["seconds"] for r in kb["candidates"] if r.get("seconds") is not None]
    kb_mean = statistics.mean(kb_times) if kb_times else None
    n_dice = len(dice["candidates"])
    kb_total = kb_mean * total if kb_mean else None
    dice_total = dice["wall_s"] * total / n_dice if n_dice else None
    by_id = {r["id"]: r for r in dice["candidates"]}
    agree, disagree, skipped = 0, [], []
    for r in kb["candidates"]:
        d = by_id.get(r["id"])
        if d is None or "correct" not in r:
            skipped.append(r["id"])
            continue
        if r["correct"] == d["correct"]:
            agree += 1
        else:
            disagree.append(
                {
                    "id": r["id"],
                    "kernelbench": r["correct"],
                    "dice": d["verdict"],
                    "kb_error": r.get("error"),
                    "kb_metadata": r.get("metadata"),
                }
            )
    out = {
        "kernelbench": {
            "candidates": len(kb["candidates"]),
            "wall_s": kb["wall_s"],
            "mean_s": kb_mean,
            "median_s": statistics.median(kb_times) if kb_times else None,
            "extrapolated_total_s": kb_total,
            "stubbed": kb.get("stubbed_modules"),
        },
        "dice": {
            "candidates": n_dice,
            "wall_s": dice["wall_s"],
            "per_candidate_s": dice["wall_s"] / n_dice if n_dice else None,
            "extrapolated_total_s": dice_total,
        },
        "ratio": kb_total / dice_total if kb_total and dice_total else None,
        "verdicts": {
            "compared": agree + len(disagree),
            "agree": agree,
            "disagree": disagree,
            "not_compared": skipped,
        },
    }
    print(
        f"\nKernelBench: {len(kb_times)} candidates, mean {fmt(kb_mean)} s each "
        f"(median {fmt(out['kernelbench']['median_s'])}); for {total}: {fmt(kb_total)} s"
    )
    print(
        f"dice:        {n_dice} candidates in {dice['wall_s']:.1f} s "
        f"({fmt(out['dice']['per_candidate_s'])} s each); for {total}: {fmt(dice_total)} s"
    )
    if out["ratio"]:
        print(f"ratio: dice is {out['ratio']:.1f}x sooner")
    print(
        f"verdicts: {agree} of {agree + len(disagree)} compared agree; "
        f"{len(disagree)} disagree: {[d['id'] for d in disagree]}"
    )
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_kb_child":
        p = argparse.ArgumentParser()
        for a in ("--kernelbench", "--todo", "--results", "--work"):
            p.add_argument(a, type=Path, required=True)
        return kernelbench_child(p.parse_args(sys.argv[2:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("side", choices=["kernelbench", "dice", "both", "report"])
    parser.add_argument("--kernelbench", type=Path, default=ROOT / ".device/kernelbench")
    parser.add_argument(
        "--pairs", type=Path, default=ROOT / "../shared/data/dice/infilling_eval_99.jsonl"
    )
    parser.add_argument("--dice", type=Path, default=ROOT / "build/dice")
    parser.add_argument(
        "--limit", type=int, default=100, help="candidates of this side (seeded sample)"
    )
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--budget", type=float, default=0, help="seconds this side may take (0: no limit)"
    )
    parser.add_argument(
        "--dice-device", default="cuda", help="dice's --device (none: compile only)"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/kb_vs_dice"))
    parser.add_argument("--out", type=Path, default=ROOT / "out/kb_vs_dice")
    parser.add_argument(
        "--dice-args",
        nargs=argparse.REMAINDER,
        default=[],
        help="more options for dice eval (last)",
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    candidates = load_candidates(args.pairs)
    todo = sample(candidates, args.seed, args.limit)
    print(
        f"{args.side}: {len(todo)} of {len(candidates)} candidates (seed {args.seed})", flush=True
    )
    if args.side in ("kernelbench", "both"):
        (args.out / "kernelbench.json").write_text(
            json.dumps(run_kernelbench(args, todo), indent=2)
        )
    if args.side in ("dice", "both"):
        (args.out / "dice.json").write_text(json.dumps(run_dice(args, todo), indent=2))
    kb_file, dice_file = args.out / "kernelbench.json", args.out / "dice.json"
    if kb_file.exists() and dice_file.exists() and args.side in ("both", "report"):
        result = report(
            json.loads(kb_file.read_text()), json.loads(dice_file.read_text()), len(candidates)
        )
        (args.out / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    elif args.side == "report":
        raise SystemExit(f"report: need {kb_file} and {dice_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
