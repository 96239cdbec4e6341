"""The CPU engine against Hugging Face transformers, in one command.

Creates random checkpoints in a temporary folder with `dice model random`, then
- tiny part: logits of `dice engine logits` vs Qwen3ForCausalLM (block-causal mask, fp32) on tiny
  checkpoints (untied fp32, tied bf16), and decoding of `dice generate --json` vs
  engine/tests/reference_decoder.py for every strategy x greedy/sampled/top-k+top-p x fused/unfused;
- 1.7b part: the logits comparison on a full SDAR-1.7B-shaped random fp32 checkpoint (about 8 GB
  on disk; dice and then transformers each hold one fp32 copy, never both at once).
Writes OUT/results.json and OUT/summary.md; exits 1 if any comparison fails.

    .venv/bin/python bench/engine_cpu_vs_hf.py --part tiny --out bench/results/DATE-engine-cpu
    .venv/bin/python bench/engine_cpu_vs_hf.py --part 1.7b --out OUT   # ~16 GB RAM, ~10 min
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "engine" / "tests"))
import reference_decoder as ref  # noqa: E402

SHARED = ROOT.parent / "shared"
STRATEGIES = ["sequential", "low_confidence_static", "low_confidence_dynamic", "entropy_bounded"]
SAMPLING = {
    "greedy": {},
    "sampled": {"temperature": 1.0, "seed": 7},
    "top_k_top_p": {"temperature": 0.8, "top_k": 40, "top_p": 0.9, "seed": 11},
}
TOLERANCE = 1e-4


def dice(binary: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([str(binary), *args], input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"dice {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def random_ids(n: int, seed: int) -> list[int]:
    return [int(i) for i in np.random.default_rng(seed).integers(0, 151669, size=n)]


def compare_logits(
    binary: Path, path: Path, ids: list[int], prompt: int, fused: bool, threads: int
) -> dict:
    """dice's teacher-forced logits vs one full Hugging Face forward; the model is loaded after
    dice exits so that only one fp32 copy is in memory at a time."""
    out = path.parent / f"{path.name}-logits.f32"
    args = ["engine", "logits", "--model", str(path), "--out", str(out),
            "--prompt-length", str(prompt), "--threads", str(threads)]  # fmt: skip
    if not fused:
        args.append("--no-fused-store")
    start = time.time()
    meta = json.loads(dice(binary, *args, stdin=" ".join(map(str, ids))))
    dice_seconds = time.time() - start
    ours = np.fromfile(out, dtype=np.float32).reshape(meta["rows"], meta["vocab_rows"])
    out.unlink()
    start = time.time()
    model = ref.load_model(path)
    theirs = ref.logits(model, ids, 4, slice(meta["first_position"], len(ids)))
    hf_seconds = time.time() - start
    del model
    per_row = [ref.rel_l2(ours[r], theirs[r]) for r in range(meta["rows"])]
    return {
        "checkpoint": path.name,
        "tokens": len(ids),
        "prompt_length": prompt,
        "fused_store": fused,
        "rows": meta["rows"],
        "forwards": meta["forwards"],
        "max_rel_l2": max(per_row),
        "rel_l2": ref.rel_l2(ours, theirs),
        "dice_seconds": round(dice_seconds, 2),
        "hf_seconds": round(hf_seconds, 2),
        "ok": max(per_row) <= TOLERANCE,
    }


def decode_case(
    binary: Path, path: Path, model: ref.Qwen3ForCausalLM, o: ref.Options, prompt: list[int]
) -> dict:
    args = ["generate", "--model", str(path), "--prompt-ids", ",".join(map(str, prompt)),
            "--json", "--threads", "1", "--block-length", str(o.block_length),
            "--steps", str(o.steps), "--strategy", o.strategy, "--threshold", str(o.threshold),
            "--entropy-bound", str(o.entropy_bound), "--temperature", str(o.temperature),
            "--top-k", str(o.top_k), "--top-p", str(o.top_p), "--seed", str(o.seed),
            "--max-new-tokens", str(o.max_new_tokens)]  # fmt: skip
    if not o.fused_store:
        args.append("--no-fused-store")
    got = json.loads(dice(binary, *args))
    want = ref.generate(model, prompt, o)
    same_tokens = got["output_ids"] == want.output_ids
    same_trace = got["trace"]["step"] == want.steps and got["trace"]["forward"] == want.forwards
    return {
        "strategy": o.strategy,
        "temperature": o.temperature,
        "top_k": o.top_k,
        "top_p": o.top_p,
        "fused_store": o.fused_store,
        "block_length": o.block_length,
        "steps": o.steps,
        "tokens": len(got["output_ids"]),
        "forwards": got["counts"]["forwards"],
        "reference_forwards": want.forward_count,
        "multi_token_steps": len(want.forwards) - len(set(want.forwards)),
        "same_tokens": same_tokens,
        "same_trace": same_trace,
        "ok": same_tokens and same_trace and got["counts"]["forwards"] == want.forward_count,
    }


def tiny_part(binary: Path, work: Path) -> dict:
    untied = work / "tiny-f32"
    dice(binary, "model", "random", "--config", "tiny", "--out", str(untied), "--dtype", "f32",
         "--seed", "3", "--init-std", "0.5")  # fmt: skip
    tied = work / "tiny-bf16-tied"
    dice(binary, "model", "random", "--config", "tiny", "--out", str(tied), "--dtype", "bf16",
         "--tie", "--seed", "2", "--init-std", "0.5")  # fmt: skip
    logits = [
        compare_logits(binary, path, random_ids(31, prompt), prompt, fused, 1)
        for path in (untied, tied)
        for prompt in (8, 11)
        for fused in (True, False)
    ]
    peaky = work / "tiny-decode"
    dice(binary, "model", "random", "--config", "tiny", "--out", str(peaky), "--dtype", "f32",
         "--seed", "5", "--init-std", "2.0")  # fmt: skip
    model = ref.load_model(peaky)
    decoding = []
    for strategy in STRATEGIES:
        for name, sampling in SAMPLING.items():
            for fused in (True, False):
                o = ref.Options(strategy=strategy, fused_store=fused, max_new_tokens=40,
                                entropy_bound=1.0, **sampling)  # fmt: skip
                prompt = random_ids(9 if fused else 12, len(strategy) + len(name))
                decoding.append(decode_case(binary, peaky, model, o, prompt))
    for block_length, steps in ((8, 3), (4, 2), (2, 4)):
        o = ref.Options(strategy="low_confidence_dynamic", block_length=block_length, steps=steps,
                        max_new_tokens=40, temperature=1.0, seed=3)  # fmt: skip
        decoding.append(decode_case(binary, peaky, model, o, random_ids(13, block_length)))
    return {"logits": logits, "decoding": decoding}


def large_part(binary: Path, work: Path, threads: int) -> dict:
    config = SHARED / "models" / "sdar" / "configs" / "sdar-1.7b-chat.json"
    path = work / "sdar-1.7b-random-f32"
    start = time.time()
    dice(binary, "model", "random", "--config", str(config), "--out", str(path), "--dtype", "f32",
         "--seed", "1")  # fmt: skip
    created = time.time() - start
    logits = [
        compare_logits(binary, path, random_ids(29, 1), 13, True, threads),
        compare_logits(binary, path, random_ids(29, 2), 12, False, threads),
    ]
    return {"checkpoint_seconds": round(created, 1), "logits": logits}


def summary_md(results: dict) -> str:
    lines = [f"# engine CPU vs Hugging Face ({results['machine']})", ""]
    for part in ("tiny", "1.7b"):
        if part not in results:
            continue
        lines += [f"## {part}: logits (tolerance: max per-row relative L2 <= {TOLERANCE})", ""]
        lines += ["| checkpoint | tokens | P | fused | rows | forwards | max rel L2 | ok |"]
        lines += ["|---|---|---|---|---|---|---|---|"]
        for r in results[part]["logits"]:
            lines.append(
                f"| {r['checkpoint']} | {r['tokens']} | {r['prompt_length']} | {r['fused_store']} "
                f"| {r['rows']} | {r['forwards']} | {r['max_rel_l2']:.2e} | {r['ok']} |"
            )
        lines.append("")
        if "decoding" in results[part]:
            lines += ["## tiny: decoding vs reference_decoder.py", ""]
            lines += ["| strategy | T | top-k | top-p | fused | B/steps | tokens | forwards "
                      "| multi-token steps | same tokens | same trace |"]  # fmt: skip
            lines += ["|---|---|---|---|---|---|---|---|---|---|---|"]
            for r in results[part]["decoding"]:
                lines.append(
                    f"| {r['strategy']} | {r['temperature']} | {r['top_k']} | {r['top_p']} "
                    f"| {r['fused_store']} | {r['block_length']}/{r['steps']} | {r['tokens']} "
                    f"| {r['forwards']} | {r['multi_token_steps']} | {r['same_tokens']} "
                    f"| {r['same_trace']} |"
                )
            lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["tiny", "1.7b", "all"], default="tiny")
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for results.json, summary.md"
    )
    parser.add_argument("--dice", type=Path, default=ROOT / "build" / "dice")
    parser.add_argument("--threads", type=int, default=0, help="dice threads for the 1.7B part")
    parser.add_argument("--work", type=Path, default=None, help="temporary folder (default: /tmp)")
    parser.add_argument("--machine", default=platform.node(), help="machine, for the report")
    args = parser.parse_args()
    torch.set_num_threads(1 if args.part == "tiny" else max(torch.get_num_threads(), 1))
    results: dict = {"machine": args.machine, "part": args.part}
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = Path(tmp)
        if args.part in ("tiny", "all"):
            results["tiny"] = tiny_part(args.dice, work)
        if args.part in ("1.7b", "all"):
            results["1.7b"] = large_part(args.dice, work, args.threads)
    ok = all(r["ok"] for part in ("tiny", "1.7b") if part in results for k in ("logits", "decoding")
             for r in results[part].get(k, []))  # fmt: skip
    results["ok"] = ok
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "summary.md").write_text(summary_md(results) + "\n")
    print(summary_md(results))
    print("all comparisons passed" if ok else "SOME COMPARISONS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
