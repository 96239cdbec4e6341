"""Code extraction from raw model output: the last complete python code block."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
