"""`dice tokenize` against Hugging Face's tokenizer on the SDAR tokenizer: encode, pieces and
decode on a few hundred texts, both folder layouts, and tokenizer_config.json variants. The full
comparison (every code point, the whole corpus) is bench/tokenizer_compare.py."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
import tokenizer_cases as cases

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

pytestmark = pytest.mark.skipif(
    not cases.MODEL_DIR.exists() or not cases.DICE.exists(),
    reason=f"needs {cases.MODEL_DIR} (../shared) and {cases.DICE} (scripts/build.sh)",
)


def load_hf(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


@pytest.fixture(scope="module")
def hf() -> Any:
    return load_hf(cases.MODEL_DIR)


def texts() -> list[str]:
    rng = random.Random(4)
    corpus = [t for _, t in cases.corpus_texts()] if (cases.SHARED / "data").exists() else []
    sample = rng.sample(corpus, min(60, len(corpus)))
    sweep_points = sorted(rng.sample(range(0x110000), 3000))
    sweep = [
        text
        for cp in sweep_points
        if not 0xD800 <= cp <= 0xDFFF
        for text in cases.sweep_texts(cp, cp + 1, 1)
    ]
    sweep = ["<|endoftext|>".join(sweep[i : i + 30]) for i in range(0, len(sweep), 30)]
    return (
        cases.edge_cases()
        + cases.random_texts(rng, 300)
        + sample
        + sweep
        + cases.composite_texts(256)[:4]
    )


def encode(folder: Path, items: list[str]) -> list[list[int]]:
    return [
        r["ids"] for r in cases.run_dice(["--model", str(folder)], [{"text": t} for t in items])
    ]


def test_encode_equals_hugging_face(hf: Any) -> None:
    items = texts()
    want = hf(items, add_special_tokens=False)["input_ids"]
    got = encode(cases.MODEL_DIR, items)
    bad = [repr(t)[:80] for t, g, w in zip(items, got, want, strict=True) if g != w]
    assert not bad, f"{len(bad)} of {len(items)} differ, e.g. {bad[:3]}"


def test_pieces_equal_hugging_face(hf: Any) -> None:
    items = cases.random_texts(random.Random(6), 300, specials=False) + cases.sweep_texts(
        0, 0x3000, 64, "\n"
    )
    got = cases.run_dice(
        ["--model", str(cases.MODEL_DIR), "--pieces"], [{"text": t} for t in items]
    )
    for text, g in zip(items, got, strict=True):
        assert g["pieces"] == cases.hf_pieces(hf, text), repr(text)[:80]


def test_decode_equals_hugging_face(hf: Any) -> None:
    items = cases.edge_cases() + cases.random_texts(random.Random(8), 200)
    id_lists = hf(items, add_special_tokens=False)["input_ids"]
    symbols = cases.byte_symbols()
    byte_ids = [hf.convert_tokens_to_ids(symbols[b]) for b in range(0x80, 0x100)]
    id_lists += cases.random_id_sequences(random.Random(9), len(hf), byte_ids, 200)
    for skip in (False, True):
        args = ["--model", str(cases.MODEL_DIR), "--decode"] + (["--skip-special"] if skip else [])
        got = cases.run_dice(args, [{"ids": ids} for ids in id_lists])
        for ids, g in zip(id_lists, got, strict=True):
            assert g["text"] == hf.decode(ids, skip_special_tokens=skip), ids[:10]


def test_tokenizer_json_layout_gives_the_same_ids(hf: Any, tmp_path: Path) -> None:
    # What transformers saves: tokenizer.json next to tokenizer_config.json.
    hf.save_pretrained(str(tmp_path))
    (tmp_path / "vocab.json").unlink(missing_ok=True)
    (tmp_path / "merges.txt").unlink(missing_ok=True)
    assert (tmp_path / "tokenizer.json").exists()
    items = cases.edge_cases() + cases.random_texts(random.Random(10), 200)
    assert encode(tmp_path, items) == hf(items, add_special_tokens=False)["input_ids"]


def edited_folder(tmp_path: Path, edit: Any) -> Path:
    folder = tmp_path / "tok"
    shutil.copytree(cases.MODEL_DIR, folder)
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    edit(config)
    config_file.write_text(json.dumps(config), encoding="utf-8")
    return folder


def flags(config: dict[str, Any]) -> None:
    decoder = config["added_tokens_decoder"]
    decoder["151645"]["lstrip"] = True  # <|im_end|>: named special, transformers resets its flags
    decoder["151667"]["lstrip"] = True  # <think>
    decoder["151668"]["rstrip"] = True  # </think>
    decoder["151666"]["single_word"] = True  # </tool_response>
    decoder["151665"]["normalized"] = True  # <tool_response>


def new_mask(config: dict[str, Any]) -> None:
    config["mask_token"] = "<MASKX>"  # not in the vocabulary: transformers adds it


def legacy(config: dict[str, Any]) -> None:
    del config["added_tokens_decoder"]  # added_tokens.json and special_tokens_map.json instead


@pytest.mark.parametrize("edit", [flags, new_mask, legacy])
def test_config_variants_equal_hugging_face(edit: Any, tmp_path: Path) -> None:
    folder = edited_folder(tmp_path, edit)
    hf = load_hf(folder)
    items = [
        "a  <|im_end|>b",
        "a  <think>  b",
        "x</think>  y",
        "a</tool_response>b",
        " </tool_response> ",
        "e\u0301<tool_response>",
        "a<MASKX>b<MASK>c<|MASK|>",
        "a<MASK>b<|MASK|><|im_end|><think>",
    ] + cases.random_texts(random.Random(12), 100)
    assert encode(folder, items) == hf(items, add_special_tokens=False)["input_ids"]
    ids = list(range(151640, len(hf)))
    got = cases.run_dice(["--model", str(folder), "--decode", "--skip-special"], [{"ids": ids}])
    assert got[0]["text"] == hf.decode(ids, skip_special_tokens=True)
