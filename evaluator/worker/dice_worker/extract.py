"""Code extraction from raw model output: the last complete python code block."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[^\n]*$", re.MULTILINE)


@dataclass(frozen=True)
class Extracted:
    """The code taken from a candidate text; ``truncated``: the text ends inside an open block."""

    code: str
    truncated: bool
    from_block: bool


def extract_code(text: str) -> Extracted:
    """Returns the content of the last complete fenced block labeled python/py (else the last
    unlabeled one); the whole text when it has no fence. ``truncated`` is set when the text ends
    inside an open block (the code is then the last complete block, or empty if there is none)."""
    fences = list(_FENCE.finditer(text))
    if not fences:
        return Extracted(text, truncated=False, from_block=False)
    blocks: list[tuple[str, str]] = []
    unclosed = False
    i = 0
    while i < len(fences):
        opening = fences[i]
        if i + 1 >= len(fences):
            unclosed = True
            break
        closing = fences[i + 1]
        if closing.group(1):  # a labeled fence cannot close a block: it opens a new one
            i += 1
            continue
        blocks.append((opening.group(1).lower(), text[opening.end() + 1 : closing.start()]))
        i += 2
    python_blocks = [b for lang, b in blocks if lang in ("python", "py", "python3")]
    unlabeled = [b for lang, b in blocks if lang == ""]
    chosen = python_blocks or unlabeled
    return Extracted(chosen[-1] if chosen else "", truncated=unclosed, from_block=True)


def extract_to_file(raw_path: Path, code_path: Path) -> tuple[str, dict[str, Any]]:
    """Extracts the code of the model output ``raw_path`` (UTF-8, bad bytes replaced) into
    ``code_path``. Returns the code and the record fields every command shares:
    ``{code_sha256, truncated}``, plus ``{ok: false, verdict: parse_error|truncated, error}`` when
    there is no usable code (the caller returns the record as it is). Raises OSError when a
    file cannot be read or written."""
    extracted = extract_code(raw_path.read_text(encoding="utf-8", errors="replace"))
    code_path.write_text(extracted.code, encoding="utf-8")
    result: dict[str, Any] = {
        "code_sha256": hashlib.sha256(extracted.code.encode()).hexdigest(),
        "truncated": extracted.truncated,
    }
    if not extracted.code.strip():
        verdict = "truncated" if extracted.truncated else "parse_error"
        result.update(ok=False, verdict=verdict, error="no code found in candidate")
    return extracted.code, result
