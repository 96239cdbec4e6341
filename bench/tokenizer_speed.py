"""Encoding speed on ONE thread: Hugging Face tokenizers (in this process) against dice
(build/dice_tokenizer_bench), same texts, same run. Both are timed inside their process around the
encode calls only (load and start-up excluded). Three rounds alternate the two, each encoding the
corpus twice; "cold" is a first pass (empty word caches: dice's first pass of each round, Hugging
Face's first pass of all), "warm" the fastest of the other passes, so that load from other users of
the machine hurts both alike. Also times `dice tokenize` end to end on a larger file (JSON in and
out, load included).

    .venv/bin/python bench/tokenizer_speed.py [--model DIR] [--json OUT]
"""

from __future__ import annotations

import os

# One thread for Hugging Face tokenizers: set before it is imported.
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tokenizer" / "tests"))

import tokenizer_cases as cases  # noqa: E402

PASSES = 2
ROUNDS = 3


def time_hf(hf: Any, texts: list[str], name: str) -> tuple[list[float], int]:
    backend = hf.backend_tokenizer
    seconds, tokens = [], 0
    for _ in range(PASSES):
        start = time.perf_counter()
        if name == "per_text":
            encodings = [backend.encode(t, add_special_tokens=False) for t in texts]
        else:
            encodings = backend.encode_batch(texts, add_special_tokens=False)
        seconds.append(time.perf_counter() - start)
        tokens = sum(len(e.ids) for e in encodings)
    return seconds, tokens


def time_dice(bench: Path, model: Path, corpus: Path) -> dict[str, Any]:
    out = subprocess.run(
        [str(bench), str(model), str(corpus), str(PASSES)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=cases.MODEL_DIR)
    parser.add_argument("--bench", type=Path, default=ROOT / "build" / "dice_tokenizer_bench")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    texts = [t for _, t in cases.corpus_texts()]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    hf = AutoTokenizer.from_pretrained(str(args.model))
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "texts.jsonl"
        corpus.write_text(
            "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts),
            encoding="utf-8",
        )
        passes: dict[str, list[list[float]]] = {"dice": [], "hf per_text": [], "hf batch": []}
        tokens: dict[str, int] = {}
        load_s = 0.0
        for _ in range(ROUNDS):
            dice = time_dice(args.bench, args.model, corpus)
            passes["dice"].append(dice["seconds"])
            tokens["dice"], load_s = dice["tokens"], dice["load_s"]
            for name in ("per_text", "batch"):
                seconds, tokens[f"hf {name}"] = time_hf(hf, texts, name)
                passes[f"hf {name}"].append(seconds)
        # End to end: ten copies of the corpus through `dice tokenize` (one process, one thread).
        big = Path(tmp) / "big.jsonl"
        big.write_text(corpus.read_text(encoding="utf-8") * 10, encoding="utf-8")
        start = time.perf_counter()
        with big.open("rb") as stdin:
            subprocess.run(
                [str(cases.DICE), "tokenize", "--model", str(args.model)],
                stdin=stdin,
                stdout=subprocess.DEVNULL,
                check=True,
            )
        cli_seconds = time.perf_counter() - start
        cli_mb = big.stat().st_size / 1e6

    rows: dict[str, dict[str, float]] = {}
    for name, runs in passes.items():
        if name == "dice":  # a fresh process each round: every first pass is cold
            cold, warm = [r[0] for r in runs], [x for r in runs for x in r[1:]]
        else:  # one process: only the very first pass is cold
            flat = [x for r in runs for x in r]
            cold, warm = flat[:1], flat[1:]
        rows[name] = {"cold": min(cold), "warm": min(warm)}
    print(f"{len(texts)} texts, {mb:.2f} MB of UTF-8, one thread, best of {ROUNDS} rounds")
    print(f"{'':<14}{'cache':>6}{'seconds':>10}{'MB/s':>9}{'Mtokens/s':>11}")
    for name, row in rows.items():
        for cache, s in row.items():
            print(f"{name:<14}{cache:>6}{s:>10.3f}{mb / s:>9.2f}{tokens[name] / s / 1e6:>11.3f}")
    same = len(set(tokens.values())) == 1
    print(f"token counts equal: {same} ({tokens['dice']} tokens)")
    ratios = {}
    for name in ("hf per_text", "hf batch"):
        for cache in ("cold", "warm"):
            ratio = rows[name][cache] / rows["dice"][cache]
            ratios[f"{name} {cache}"] = ratio
            print(f"dice is {ratio:.1f}x faster than {name} ({cache})")
    print(
        f"dice tokenize end to end: {cli_mb:.1f} MB of JSON Lines in {cli_seconds:.2f} s "
        f"({cli_mb / cli_seconds:.1f} MB/s, load and JSON included)"
    )
    if args.json:
        report = {
            "texts": len(texts),
            "mb": mb,
            "tokens": tokens["dice"],
            "best_seconds": rows,
            "all_seconds": passes,
            "ratios": ratios,
            "dice_load_s": load_s,
            "cli": {"mb": cli_mb, "seconds": cli_seconds},
        }
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
