"""Compile-time benchmark of dice's builder on DICE pairs (compile only, `--device none`).

Passes, each on its own candidates so that every candidate is distinct where it should be:
  baseline  torch's way: gcc, no precompiled header, torch's headers in cuda.cu (--no-pch
            --main-compiler cxx --no-slim-header), fresh cache
  cold      dice's default (precompiled header, clang++ if present, cuda.cu with the slim header
            dice_torch_cuda.h), fresh cache: the precompiled header is built first
  warm      dice's default on other candidates, the cold pass's cache (header built, objects not)
  infill    the warm pass's problems again with another CUDA half and the same C++ half (RL
            infilling: every rollout of a problem shares main.cpp): main.o comes from the cache

Prints per pass: wall time, candidates per minute, and medians of per-candidate compile time
(capture + build), main.cpp, cuda.cu and link seconds; writes everything to OUT/compile.json.

`--headers slim,full` runs instead, for each way of compiling main.cpp and cuda.cu (slim: dice's
default, dice_torch_main.h and dice_torch_cuda.h; full: --no-slim-header, torch's headers), on a
fresh cache of its own and the same candidates:
  alone     `--alone` candidates one after another, each alone (`dice eval` on one candidate with
            `--jobs`): the first is cold (the precompiled header is built with it), the others warm
  batch     `--batch` other candidates at once (warm): the amortised time per candidate
and writes OUT/headers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

PASSES = ("baseline", "cold", "warm", "infill")


def rollout_variant(pair: dict[str, Any]) -> dict[str, Any]:
    """The pair with a changed CUDA half (a comment in its source) and the same C++ half."""
    middle = pair["middle"]
    marker = "#include <torch/extension.h>"
    if pair["prefix"] + middle + pair["suffix"] != pair["cuda_code"] or marker not in middle:
        raise ValueError(f"pair {pair['id']}: cannot make an infilling variant")
    variant = dict(pair)
    variant["cuda_code"] = pair["prefix"] + middle.replace(marker, marker + "\n// rollout 2", 1)
    variant["cuda_code"] += pair["suffix"]
    return variant


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def run_pass(
    name: str,
    pairs: list[dict[str, Any]],
    args: argparse.Namespace,
    cache: Path,
    flags: tuple[str, ...] = (),
) -> dict[str, Any]:
    work = args.out / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    candidates = work / "pairs.jsonl"
    candidates.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    command = [
        str(args.dice),
        "eval",
        "--candidates",
        str(candidates),
        "--device",
        "none",
        "--cache",
        str(cache),
        "--out-dir",
        str(work / "out"),
        "--jobs",
        str(args.jobs),
        "--progress",
        "lines",
    ]
    if name == "baseline":
        command += ["--no-pch", "--main-compiler", "cxx", "--no-slim-header"]
    command += flags
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    (work / "dice.log").write_text(result.stderr)
    if result.returncode != 0:
        raise SystemExit(
            f"{name}: dice eval failed ({result.returncode}):\n{result.stderr[-3000:]}"
        )
    records = [json.loads(line) for line in (work / "out" / "records.jsonl").open()]
    per: dict[str, list[float]] = {
        "candidate": [],
        "main": [],
        "cuda": [],
        "link": [],
        "main_cpu": [],
        "cuda_cpu": [],
        "link_cpu": [],
        "build_cpu": [],
    }
    main_status: dict[str, int] = {}
    cuda_headers: dict[str, int] = {}
    main_headers: dict[str, int] = {}
    pch_used = 0
    compilers: set[str] = set()
    for r in records:
        per["candidate"].append(r["compile"]["seconds"])
        cpu = 0.0
        for ext in r["compile"].get("detail", []):
            main_status[ext["main"]["status"]] = main_status.get(ext["main"]["status"], 0) + 1
            if ext["main"]["status"] == "built":
                per["main"].append(ext["main"]["seconds"])
                per["main_cpu"].append(ext["main"]["cpu_seconds"])
                pch_used += bool(ext["main"]["pch"])
                header = ext["main"].get("header", "")
                main_headers[header] = main_headers.get(header, 0) + 1
                compilers.add(ext["main"]["compiler"])
            if ext["cuda"]["status"] == "built":
                header = ext["cuda"].get("header", "")
                cuda_headers[header] = cuda_headers.get(header, 0) + 1
                per["cuda"].append(ext["cuda"]["seconds"])
                per["cuda_cpu"].append(ext["cuda"]["cpu_seconds"])
            if ext["link_seconds"] > 0:
                per["link"].append(ext["link_seconds"])
                per["link_cpu"].append(ext["link_cpu_seconds"])
            cpu += ext["main"]["cpu_seconds"] + ext["cuda"]["cpu_seconds"]
            cpu += ext["link_cpu_seconds"]
        per["build_cpu"].append(cpu)
    pch_builds = (
        [json.loads(f.read_text()) for f in sorted((cache / "pch").glob("*/result.json"))]
        if (cache / "pch").exists()
        else []
    )
    verdicts: dict[str, int] = {}
    for r in records:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    return {
        "pass": name,
        "candidates": len(records),
        "wall_s": wall,
        "per_minute": 60.0 * len(records) / wall if wall > 0 else None,
        "wall_per_candidate_s": wall / len(records) if records else None,
        "median_s": {k: median(v) for k, v in per.items()},
        "max_s": {k: (max(v) if v else None) for k, v in per.items()},
        "main_status": main_status,
        "main_with_pch": pch_used,
        "cuda_headers": cuda_headers,
        "main_headers": main_headers,
        "main_compilers": sorted(compilers),
        "pch_builds_in_cache": pch_builds,
        "verdicts": verdicts,
    }


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def header_passes(pairs: list[dict[str, Any]], args: argparse.Namespace) -> int:
    """Alone (cold, then warm) and batch compile times, for each way of compiling the halves."""
    need = args.alone + args.batch
    if len(pairs) < need:
        raise SystemExit(f"--alone {args.alone} --batch {args.batch}: only {len(pairs)} pairs")
    alone, batch = pairs[: args.alone], pairs[args.alone : need]
    results: dict[str, Any] = {}
    for header in args.headers.split(","):
        if header not in ("slim", "full"):
            raise SystemExit(f"unknown --headers {header}; expected slim and/or full")
        flags = ("--no-slim-header",) if header == "full" else ()
        cache = args.out / f"cache-{header}"
        shutil.rmtree(cache, ignore_errors=True)
        singles = [
            run_pass(f"{header}-alone-{i}", [pair], args, cache, flags)
            for i, pair in enumerate(alone)
        ]
        walls = [r["wall_s"] for r in singles]  # the whole `dice eval`: toolchain, capture, build
        builds = [r["median_s"]["candidate"] for r in singles]  # the record's compile seconds
        together = run_pass(f"{header}-batch", batch, args, cache, flags)
        entry = {
            "alone_cold_s": walls[0],
            "alone_warm_median_s": median(walls[1:]),
            "alone_warm_s": walls[1:],
            "alone_build_cold_s": builds[0],
            "alone_build_warm_median_s": median([b for b in builds[1:] if b is not None]),
            "batch_wall_s": together["wall_s"],
            "batch_per_candidate_s": together["wall_per_candidate_s"],
            "alone": singles,
            "batch": together,
        }
        results[header] = entry
        m = together["median_s"]
        print(
            f"{header:4} alone (dice eval wall): cold {fmt(walls[0])} s, warm median "
            f"{fmt(entry['alone_warm_median_s'])} s ({', '.join(fmt(w) for w in walls[1:])}); "
            f"alone (build only): cold {fmt(builds[0])} s, warm median "
            f"{fmt(entry['alone_build_warm_median_s'])} s; "
            f"batch of {together['candidates']}: {together['wall_s']:.1f} s, "
            f"{together['wall_per_candidate_s']:.2f} s per candidate; batch median CPU s: "
            f"main.cpp {fmt(m['main_cpu'])}, cuda.cu {fmt(m['cuda_cpu'])}, per candidate "
            f"{fmt(m['build_cpu'])}; main.cpp headers {together['main_headers']}; "
            f"cuda.cu headers {together['cuda_headers']}; "
            f"verdicts {together['verdicts']}",
            flush=True,
        )
    info = {
        "alone": args.alone,
        "batch": args.batch,
        "seed": args.seed,
        "jobs": args.jobs,
        "cpus": os.cpu_count(),
        "ids": {"alone": [p["id"] for p in alone], "batch": [p["id"] for p in batch]},
        "headers": results,
    }
    (args.out / "headers.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"wrote {args.out / 'headers.json'}")
    return 0


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pairs", type=Path, default=root / "../shared/data/dice/infilling_eval_99.jsonl"
    )
    parser.add_argument("--dice", type=Path, default=root / "build/dice")
    parser.add_argument("-n", type=int, default=4, help="candidates per pass")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=root / "out/compile_bench")
    parser.add_argument("--passes", default=",".join(PASSES))
    parser.add_argument(
        "--headers",
        default="",
        help="slim,full: alone and batch compile times per way of compiling cuda.cu instead",
    )
    parser.add_argument("--alone", type=int, default=3, help="--headers: candidates built alone")
    parser.add_argument("--batch", type=int, default=16, help="--headers: candidates at once")
    args = parser.parse_args()
    pairs = [json.loads(line) for line in args.pairs.open()]
    random.Random(args.seed).shuffle(pairs)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.headers:
        return header_passes(pairs, args)
    first, second = pairs[: args.n], pairs[args.n : 2 * args.n]
    if len(second) < args.n:
        raise SystemExit(f"-n {args.n}: the pairs file has only {len(pairs)} pairs")
    args.out.mkdir(parents=True, exist_ok=True)
    cache, baseline_cache = args.out / "cache", args.out / "cache-baseline"
    results = []
    for name in args.passes.split(","):
        if name not in PASSES:
            raise SystemExit(f"unknown pass {name}; expected {', '.join(PASSES)}")
        if name in ("baseline", "cold"):
            shutil.rmtree(baseline_cache if name == "baseline" else cache, ignore_errors=True)
        batch = {
            "baseline": first,
            "cold": first,
            "warm": second,
            "infill": [rollout_variant(p) for p in second],
        }[name]
        r = run_pass(name, batch, args, baseline_cache if name == "baseline" else cache)
        results.append(r)
        m = r["median_s"]
        print(
            f"{name:8} {r['candidates']} candidates in {r['wall_s']:.1f} s "
            f"({r['per_minute']:.2f}/min, {r['wall_per_candidate_s']:.1f} s each); median wall s: "
            f"candidate {fmt(m['candidate'])}, main.cpp {fmt(m['main'])}, cuda.cu "
            f"{fmt(m['cuda'])}, link {fmt(m['link'])}; median CPU s: main.cpp "
            f"{fmt(m['main_cpu'])}, cuda.cu {fmt(m['cuda_cpu'])}, link {fmt(m['link_cpu'])}, "
            f"per candidate {fmt(m['build_cpu'])}; main.o {r['main_status']}, "
            f"{r['main_with_pch']} with PCH ({', '.join(r['main_compilers'])}); "
            f"cuda.cu headers {r['cuda_headers']}; "
            f"verdicts {r['verdicts']}",
            flush=True,
        )
    info = {
        "n": args.n,
        "seed": args.seed,
        "jobs": args.jobs,
        "cpus": os.cpu_count(),
        "ids": {"first": [p["id"] for p in first], "second": [p["id"] for p in second]},
        "passes": results,
    }
    (args.out / "compile.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"wrote {args.out / 'compile.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
