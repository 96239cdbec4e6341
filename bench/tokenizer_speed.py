"""Encoding speed on ONE thread: Hugging Face tokenizers (in this process) against dice
(build/dice_tokenizer_bench), same texts, same run. Both are timed inside their process around the
encode calls only (load and start-up excluded); each runs two passes (the first with a cold word
cache). Also times `dice tokenize` end to end on a larger file (JSON in and out, load included).

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


def time_hf(hf: Any, texts: list[str]) -> dict[str, Any]:
    backend = hf.backend_tokenizer
    out: dict[str, Any] = {}
    for name in ("per_text", "batch"):
        seconds, tokens = [], 0
        for _ in range(PASSES):
            start = time.perf_counter()
            if name == "per_text":
                encodings = [backend.encode(t, add_special_tokens=False) for t in texts]
            else:
                encodings = backend.encode_batch(texts, add_special_tokens=False)
            seconds.append(time.perf_counter() - start)
            tokens = sum(len(e.ids) for e in encodings)
        out[name] = {"seconds": seconds, "tokens": tokens}
    return out


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
        dice = json.loads(
            subprocess.run(
                [str(args.bench), str(args.model), str(corpus), str(PASSES)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        hf_times = time_hf(hf, texts)
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

    rows = {f"hf {name}": v for name, v in hf_times.items()}
    rows["dice"] = {"seconds": dice["seconds"], "tokens": dice["tokens"]}
    print(f"{len(texts)} texts, {mb:.2f} MB of UTF-8, one thread")
    print(f"{'':<14}{'pass':>5}{'seconds':>10}{'MB/s':>9}{'Mtokens/s':>11}")
    for name, row in rows.items():
        for k, s in enumerate(row["seconds"]):
            print(f"{name:<14}{k + 1:>5}{s:>10.3f}{mb / s:>9.2f}{row['tokens'] / s / 1e6:>11.3f}")
    same = all(row["tokens"] == dice["tokens"] for row in rows.values())
    print(f"token counts equal: {same} ({dice['tokens']} tokens)")
    ratios = {}
    for name, row in hf_times.items():
        for k in range(PASSES):
            ratio = row["seconds"][k] / dice["seconds"][k]
            ratios[f"{name} pass {k + 1}"] = ratio
            print(f"dice is {ratio:.1f}x faster than hf {name} (pass {k + 1})")
    print(
        f"dice tokenize end to end: {cli_mb:.1f} MB of JSON Lines in {cli_seconds:.2f} s "
        f"({cli_mb / cli_seconds:.1f} MB/s, load and JSON included)"
    )
    if args.json:
        report = {
            "texts": len(texts),
            "mb": mb,
            "rows": rows,
            "ratios": ratios,
            "dice_load_s": dice["load_s"],
            "cli": {"mb": cli_mb, "seconds": cli_seconds},
        }
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
