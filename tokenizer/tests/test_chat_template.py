"""`dice tokenize --chat` against the Qwen3 chat template rendered with Jinja2 (as transformers
renders it), over random conversations and every add_generation_prompt / enable_thinking
setting."""

from __future__ import annotations

import random
from typing import Any

import pytest
import tokenizer_cases as cases

TEMPLATE = cases.MODEL_DIR / "chat_template.jinja"

pytestmark = pytest.mark.skipif(
    not TEMPLATE.exists() or not cases.DICE.exists(),
    reason=f"needs {TEMPLATE} (../shared) and {cases.DICE} (scripts/build.sh)",
)

CONVERSATIONS = cases.conversations(random.Random(3), 300)


@pytest.mark.parametrize("generation_prompt", [True, False])
@pytest.mark.parametrize("enable_thinking", [None, True, False])
def test_chat_template_equals_jinja2(generation_prompt: bool, enable_thinking: Any) -> None:
    template = TEMPLATE.read_text(encoding="utf-8")
    args = ["--model", str(cases.MODEL_DIR), "--chat"]
    kwargs: dict[str, Any] = {"add_generation_prompt": generation_prompt}
    if not generation_prompt:
        args.append("--no-generation-prompt")
    if enable_thinking is not None:
        args += ["--enable-thinking", "true" if enable_thinking else "false"]
        kwargs["enable_thinking"] = enable_thinking
    got = cases.run_dice(args, [{"messages": m} for m in CONVERSATIONS])
    for messages, record in zip(CONVERSATIONS, got, strict=True):
        assert record["text"] == cases.render_jinja(template, messages, **kwargs), messages


def test_chat_ids_are_the_encoded_text() -> None:
    got = cases.run_dice(
        ["--model", str(cases.MODEL_DIR), "--chat"], [{"messages": m} for m in CONVERSATIONS[:50]]
    )
    encoded = cases.run_dice(["--model", str(cases.MODEL_DIR)], [{"text": r["text"]} for r in got])
    assert [r["ids"] for r in got] == [r["ids"] for r in encoded]


def test_tools_and_unknown_roles_are_errors() -> None:
    records = [
        {"messages": [{"role": "tool", "content": "x"}]},
        {"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}]},
        {"messages": [{"role": "assistant", "content": "", "tool_calls": [{}]}]},
        {"messages": [{"role": "narrator", "content": "x"}]},
        {"messages": []},
    ]
    got = cases.run_dice(["--model", str(cases.MODEL_DIR), "--chat"], records)
    assert len(got) == len(records)
    for i, record in enumerate(got):
        assert record["error"].startswith(f"line {i + 1}: "), record
        assert "text" not in record and "ids" not in record
