"""Inputs that compare dice's tokenizer with Hugging Face's: real corpora, Unicode edge cases, a
code point sweep, random id sequences and chat conversations. Shared by the pytest suite and
bench/tokenizer_compare.py."""

from __future__ import annotations

import functools
import json
import random
import subprocess
import unicodedata
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
MODEL_DIR = SHARED / "models" / "sdar" / "tokenizer"
DICE = ROOT / "build" / "dice"


def corpus_texts(shared: Path = SHARED) -> list[tuple[str, str]]:
    """(label, text) for every KernelBench problem's code and every string field of the DICE
    data sets."""
    out: list[tuple[str, str]] = []
    kb = shared / "data" / "kernelbench" / "problems.jsonl"
    for line in kb.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out.append((f"kernelbench L{rec['level']}/{rec['problem_id']}", rec["code"]))
    for path in sorted((shared / "data" / "dice").glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            for key, value in json.loads(line).items():
                if isinstance(value, str):
                    out.append((f"{path.name}:{n + 1}:{key}", value))
    return out


_SPECIALS = [
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<MASK>",
    "<|MASK|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    "<|vision_pad|>",
]

_SAMPLES = [
    "Crème brûlée, café, naïve, Ångström, Việt Nam, Straße",
    "Ελληνικά και Кириллица: Привет, мир!",
    "日本語のテキスト、カタカナ、ひらがな。中文测试，标点符号。",
    "한국어 텍스트: 안녕하세요 세계",
    "مرحبا بالعالم ١٢٣ \u200fשלום עולם",
    "हिन्दी पाठ क़ ड़ ऩ",
    "ﬁnal ﬀ ① ² ½ Ⅻ ℌ ㎏ ＡＢＣ１２３",
]

# Characters random strings are drawn from: each class of the pre-tokenizer, marks, and bytes that
# the Unicode tables of different libraries might disagree on.
_POOL = (
    list("aZéß'sStTlLdDmMrReEvV0123456789 \t\n\r.,;:!?-_=+*/\\\"(){}[]<>|&^%$#@~`")
    + [
        "\u0301",
        "\u0308",
        "\u0323",
        "\u0345",
        "\u200d",
        "\ufe0f",
        "\u00a0",
        "\u1680",
        "\u180e",
        "\u2000",
        "\u2028",
        "\u2029",
        "\u202f",
        "\u205f",
        "\u3000",
        "\u0085",
        "\u000b",
        "\u000c",
        "\x00",
        "\x1c",
        "\x1f",
        "\x7f",
        "\u200b",
        "\ufeff",
        "\u017f",
        "\u212a",
        "\u212b",
        "\u0130",
        "\u0131",
        "\u1100",
        "\u1161",
        "\u11a8",
        "\uac00",
        "中",
        "ア",
        "٣",
        "١",
        "²",
        "½",
        "Ⅻ",
        "👍",
        "🏽",
        "🇺",
        "🇸",
        "\U000e0041",
        "\U0010fffd",
        "\ue000",
        "ﬁ",
        "ǅ",
    ]
    + _SPECIALS
)


def edge_cases() -> list[str]:
    """Hand-picked Unicode and pre-tokenizer edge cases, with their NFC/NFD/NFKC/NFKD forms."""
    cases = [
        "",
        "e\u0301",
        "a\u0308\u0323",
        "\u1e0b\u0323",
        "q\u0307\u0323",
        "\u212b \u212a \u2126",
        "\u0344 \u0f73 \u0929 \u09cb \u0b4b",
        "\u1100\u1161\u11a8 \uac00\u11a8 \u1100\u1161",
        "👨\u200d👩\u200d👧\u200d👦 🏳\ufe0f\u200d🌈 🇺🇸🇫🇷🇯🇵 👍🏽 1\ufe0f\u20e3",
        "\x00",
        "a\x00b",
        "\x01\x02\x03\x1b[31mred\x1b[0m\x7f",
        "\u0085next\u2028line\u2029para\u180evowel\u200bzw\ufeffbom\u00a0nb\u3000ideo",
        "a\rb",
        "\r",
        "\r\r\n",
        "a\r\n\r\nb",
        "\n\r",
        "  \r\n  x",
        "x \n\n \t\n",
        "\t\tdef f():\r\n\t\treturn 1\r\n",
        " " * 1000 + "x",
        "\t" * 300,
        " \t " * 100 + "\n",
        "a" * 5000,
        "ab" * 2000,
        "0123456789" * 300,
        "=" * 200,
        "3.14159 1,000,000 0x1F 1e-5 １２３ ٣٤٥ Ⅻ ½ ²",
        "'s 'S 't 'T 're 'RE 'Re 'rE 've 'VE 'm 'M 'll 'LL 'Ll 'lL 'd 'D",
        "don't DON'T I'M we'LL they'Re she'D it'S you'VE",
        "'\u017f '\u212a ''s ' s x'sy 's's",
        "<|im_end|>word word<|im_end|> <|im_end|> <MASK> a<MASK>b <|MASK|>x",
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
        "<|im_end <|im_end| <<|im_end|>> <|endoftext|><|endoftext|>",
        "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
        "<tool_call>\n{}\n</tool_call><tool_response>x</tool_response>",
    ]
    for sample in _SAMPLES:
        for form in ("NFC", "NFD", "NFKC", "NFKD"):
            cases.append(unicodedata.normalize(form, sample))
    cases += [s + t + s for s in ("", " ", "x", "\n") for t in _SPECIALS]
    return cases


def random_texts(rng: random.Random, n: int, max_len: int = 60, specials: bool = True) -> list[str]:
    """Random strings over _POOL (without the added tokens if not `specials`)."""
    pool = _POOL if specials else [c for c in _POOL if c not in _SPECIALS]
    return ["".join(rng.choices(pool, k=rng.randint(1, max_len))) for _ in range(n)]


def sweep_texts(start: int, stop: int, group: int = 256, sep: str = "<|endoftext|>") -> list[str]:
    """Every code point in [start, stop) (surrogates left out) in a few contexts that reveal its
    pre-tokenizer class and NFC behaviour; `group` code points per text, separated by `sep`
    (an added token keeps each probe on its own)."""
    texts = []
    cps = [c for c in range(start, stop) if not 0xD800 <= c <= 0xDFFF]
    for i in range(0, len(cps), group):
        probes = []
        for cp in cps[i : i + group]:
            c = chr(cp)
            probes.append(f"x{c}x {c}{c}1{c}1'{c} {c}\u0301\n{c}a\u0308{c}\u0334")
        texts.append(sep.join(probes))
    return texts


def byte_symbols() -> list[str]:
    """GPT-2's byte-to-unicode table: the symbol that stands for each byte in the vocabulary."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def composite_texts(group: int = 64) -> list[str]:
    """The canonical decomposition (NFD) of every character that has one, and the character itself,
    `group` per text: NFC must recompose exactly as Hugging Face's tables do."""
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    composites = [c for c in chars if unicodedata.decomposition(c)[:1] not in ("", "<")]
    texts = []
    for i in range(0, len(composites), group):
        part = composites[i : i + group]
        texts.append(" ".join(unicodedata.normalize("NFD", c) + "\u0334" + c for c in part))
    return texts


def random_id_sequences(rng: random.Random, vocab_size: int, byte_ids: Sequence[int], n: int):
    """Id sequences: uniform over the vocabulary (specials included), and sequences of single-byte
    tokens that split or break UTF-8 characters."""
    seqs = [[rng.randrange(vocab_size) for _ in range(rng.randint(1, 40))] for _ in range(n)]
    for _ in range(n):
        seqs.append([rng.choice(byte_ids) for _ in range(rng.randint(1, 12))])
    return seqs


def conversations(rng: random.Random, n: int) -> list[list[dict[str, Any]]]:
    """Random system/user/assistant conversations that exercise every branch of the Qwen3 template:
    thinking split on </think>, reasoning_content given/None/empty, tool-response user turns that
    move last_query_index, several assistant turns after the last query."""
    contents = [
        "Hello",
        "",
        "\n\nleading and trailing\n\n",
        "Write a CUDA kernel.\n```cpp\n__global__ void k() {}\n```",
        "<think>plan</think>answer",
        "<think>\nplan\n</think>\n\nanswer\n",
        "pre<think>a</think>mid</think>\n\npost",
        "no open tag</think>\nafter",
        "</think>",
        "<think></think>",
        "<tool_response>result</tool_response>",
        "<tool_response>\nx\n</tool_response>",
        "<tool_response>not closed",
        "ünïcödé 中文 👍",
    ]
    reasonings: list[Any] = [None, "", "thought", "\nthought\n\n", "multi\n\nline"]
    out = []
    for _ in range(n):
        messages: list[dict[str, Any]] = []
        if rng.random() < 0.5:
            messages.append({"role": "system", "content": rng.choice(contents)})
        for _ in range(rng.randint(1, 6)):
            role = rng.choice(["user", "assistant", "assistant", "user", "system"])
            message: dict[str, Any] = {"role": role, "content": rng.choice(contents)}
            if role == "assistant" and rng.random() < 0.4:
                message["reasoning_content"] = rng.choice(reasonings)
            messages.append(message)
        out.append(messages)
    return out


def hf_pieces(hf: Any, text: str) -> list[str]:
    """Hugging Face's pre-tokenized pieces of `text` (no added tokens in it), as UTF-8 strings."""
    backend = hf.backend_tokenizer
    normalized = backend.normalizer.normalize_str(text)
    to_byte = {s: b for b, s in enumerate(byte_symbols())}
    return [
        bytes(to_byte[ch] for ch in piece).decode("utf-8")
        for piece, _ in backend.pre_tokenizer.pre_tokenize_str(normalized)
    ]


def run_dice(
    args: Sequence[str], records: Sequence[dict[str, Any]], dice: Path = DICE
) -> list[Any]:
    """Runs `dice tokenize ARGS` over records (JSON Lines) and returns its output records."""
    payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    proc = subprocess.run(
        [str(dice), "tokenize", *args],
        input=payload.encode("utf-8"),
        capture_output=True,
        check=True,
    )
    # Split on "\n" only: str.splitlines() would also split inside U+2028, U+0085, ... in strings.
    return [json.loads(line) for line in proc.stdout.decode("utf-8").split("\n") if line]


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of at most `size` items."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


@functools.lru_cache(maxsize=4)
def _compiled(template: str) -> Any:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
    return env.from_string(template)


def render_jinja(template: str, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    """Renders a chat template the way transformers does (sandboxed Jinja2, trim_blocks,
    lstrip_blocks, loopcontrols)."""
    return _compiled(template).render(messages=messages, **kwargs)
