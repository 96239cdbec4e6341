"""Compares `dice tokenize` with Hugging Face's tokenizer (AutoTokenizer over the same folder),
record by record: encode ids over the real corpora, Unicode edge cases, random strings and a sweep of
every code point; decode of those ids and of random id sequences; the chat template against Jinja2
and transformers' apply_chat_template. Prints counts; exits 1 on any difference.

    .venv/bin/python bench/tokenizer_compare.py [--model DIR] [--dice build/dice] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tokenizer" / "tests"))

import tokenizer_cases as cases  # noqa: E402


class Tally:
    """Equal/total counts per category, with the first differences kept for the report."""

    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = {}
        self.examples: list[str] = []

    def add(self, category: str, equal: bool, detail: str) -> None:
        c = self.counts.setdefault(category, [0, 0])
        c[0] += int(equal)
        c[1] += 1
        if not equal and len(self.examples) < 20:
            self.examples.append(f"{category}: {detail}")

    def ok(self) -> bool:
        return all(e == t for e, t in self.counts.values())


def first_diff(a: list[int], b: list[int]) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"at {i}: dice {a[i : i + 6]} hf {b[i : i + 6]}"


def compare_encode(
    tally: Tally,
    category: str,
    texts: list[str],
    labels: list[str],
    hf: Any,
    dice: Path,
    model: Path,
) -> list[list[int]]:
    want = hf(texts, add_special_tokens=False)["input_ids"]
    got: list[list[int]] = []
    for chunk in cases.chunks([{"text": t} for t in texts], 20000):
        got += [r["ids"] for r in cases.run_dice(["--model", str(model)], chunk, dice)]
    for label, g, w in zip(labels, got, want, strict=True):
        tally.add(category, g == w, f"{label}: {first_diff(g, w)}")
    return want


def compare_pieces(
    tally: Tally, category: str, texts: list[str], hf: Any, dice: Path, model: Path
) -> None:
    got: list[list[str]] = []
    for chunk in cases.chunks([{"text": t} for t in texts], 20000):
        got += [
            r["pieces"] for r in cases.run_dice(["--model", str(model), "--pieces"], chunk, dice)
        ]
    for k, (text, g) in enumerate(zip(texts, got, strict=True)):
        want = cases.hf_pieces(hf, text)
        i = next((j for j, (x, y) in enumerate(zip(g, want, strict=False)) if x != y), 0)
        tally.add(
            category, g == want, f"text {k}: at piece {i}: dice {g[i : i + 3]} hf {want[i : i + 3]}"
        )


def compare_decode(
    tally: Tally, category: str, id_lists: list[list[int]], hf: Any, dice: Path, model: Path
) -> None:
    for skip in (False, True):
        args = ["--model", str(model), "--decode"] + (["--skip-special"] if skip else [])
        got = cases.run_dice(args, [{"ids": ids} for ids in id_lists], dice)
        for ids, g in zip(id_lists, got, strict=True):
            want = hf.decode(ids, skip_special_tokens=skip)
            tally.add(
                f"{category} (skip_special={skip})",
                g.get("text") == want,
                f"ids {ids[:12]}: dice {g.get('text', g)!r:.80} hf {want!r:.80}",
            )


def compare_chat(tally: Tally, hf: Any, dice: Path, model: Path, n: int) -> None:
    template = (model / "chat_template.jinja").read_text(encoding="utf-8")
    convs = cases.conversations(random.Random(7), n)
    for gen in (True, False):
        for thinking in (None, True, False):
            args = ["--model", str(model), "--chat"]
            kwargs: dict[str, Any] = {"add_generation_prompt": gen}
            if not gen:
                args.append("--no-generation-prompt")
            if thinking is not None:
                args += ["--enable-thinking", "true" if thinking else "false"]
                kwargs["enable_thinking"] = thinking
            got = cases.run_dice(args, [{"messages": m} for m in convs], dice)
            category = f"chat (generation_prompt={gen}, enable_thinking={thinking})"
            for k, (msgs, g) in enumerate(zip(convs, got, strict=True)):
                want = cases.render_jinja(template, msgs, **kwargs)
                tally.add(
                    category + " text vs Jinja2",
                    g.get("text") == want,
                    f"conversation {k}: dice {g.get('text', g)!r:.120} jinja {want!r:.120}",
                )
                if k < 100:  # transformers' own rendering agrees with plain Jinja2
                    hf_text = hf.apply_chat_template(msgs, tokenize=False, **kwargs)
                    tally.add(
                        category + " text vs transformers",
                        g.get("text") == hf_text,
                        f"conversation {k}",
                    )
                want_ids = hf(want, add_special_tokens=False)["input_ids"]
                tally.add(category + " ids", g.get("ids") == want_ids, f"conversation {k}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=cases.MODEL_DIR)
    parser.add_argument("--dice", type=Path, default=cases.DICE)
    parser.add_argument(
        "--sweep-stop",
        type=lambda s: int(s, 0),
        default=0x110000,
        help="sweep code points below this (default: all of Unicode)",
    )
    parser.add_argument("--json", type=Path, help="write the counts here")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(args.model))
    tally = Tally()
    start = time.time()

    corpus = cases.corpus_texts()
    corpus_ids = compare_encode(
        tally,
        "encode: corpus",
        [t for _, t in corpus],
        [label for label, _ in corpus],
        hf,
        args.dice,
        args.model,
    )
    edge = cases.edge_cases()
    edge_ids = compare_encode(
        tally, "encode: edge cases", edge, [repr(t)[:60] for t in edge], hf, args.dice, args.model
    )
    rnd = cases.random_texts(random.Random(1), 5000)
    rnd_ids = compare_encode(
        tally, "encode: random strings", rnd, [repr(t)[:60] for t in rnd], hf, args.dice, args.model
    )
    composites = cases.composite_texts()
    compare_encode(
        tally,
        "encode: canonical composites and their NFD",
        composites,
        [f"composites group {i}" for i in range(len(composites))],
        hf,
        args.dice,
        args.model,
    )
    sweep = cases.sweep_texts(0, args.sweep_stop)
    compare_encode(
        tally,
        "encode: code point sweep (256 code points per text)",
        sweep,
        [f"code points from {i * 256:#x}" for i in range(len(sweep))],
        hf,
        args.dice,
        args.model,
    )

    plain = cases.random_texts(random.Random(3), 5000, specials=False)
    compare_pieces(tally, "pieces: random strings", plain, hf, args.dice, args.model)
    compare_pieces(
        tally,
        "pieces: code point sweep (64 code points per text)",
        cases.sweep_texts(0, args.sweep_stop, 64, "\n"),
        hf,
        args.dice,
        args.model,
    )

    compare_decode(tally, "decode: corpus ids", corpus_ids, hf, args.dice, args.model)
    compare_decode(
        tally,
        "decode: edge-case and random-string ids",
        edge_ids + rnd_ids,
        hf,
        args.dice,
        args.model,
    )
    # Single-byte tokens: continuation and lead bytes of UTF-8, a few ASCII.
    symbols = cases.byte_symbols()
    byte_ids = [hf.convert_tokens_to_ids(symbols[b]) for b in [*range(0x80, 0x100), 0x41, 0x20]]
    seqs = cases.random_id_sequences(random.Random(2), len(hf), byte_ids, 3000)
    compare_decode(tally, "decode: random id sequences", seqs, hf, args.dice, args.model)
    compare_chat(tally, hf, args.dice, args.model, 400)

    width = max(len(k) for k in tally.counts)
    for category, (equal, total) in tally.counts.items():
        print(f"{category:<{width}}  {equal:>7} / {total:<7} equal")
    for example in tally.examples:
        print("DIFF", example)
    print(f"{'all equal' if tally.ok() else 'DIFFERENCES'} ({time.time() - start:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(tally.counts, indent=1) + "\n", encoding="utf-8")
    return 0 if tally.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
