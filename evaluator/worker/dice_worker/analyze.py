"""``analyze`` and ``scan``: the static rules as commands of their own (PROTOCOL.md). Neither runs
candidate code, so their findings cannot be edited by the candidate they judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .extract import extract_to_file
from .static_rules import analyze_extensions, analyze_python


def analyze(raw_path: Path, code_path: Path) -> dict[str, Any]:
    """Extracts the code of ``raw_path`` into ``code_path``, parses it and runs the Python rules.
    Returns ``{ok, code_sha256, truncated, findings}`` or, when there is no usable code,
    ``{ok: false, verdict: parse_error|truncated, error}``. Never raises for a bad candidate."""
    code, result = extract_to_file(raw_path, code_path)
    if result.get("ok") is False:
        return result
    try:
        findings = analyze_python(code)
    except SyntaxError as e:
        return {**result, "ok": False, "verdict": "parse_error", "error": f"SyntaxError: {e}"}
    except RecursionError:
        return {**result, "ok": False, "verdict": "parse_error", "error": "code nested too deeply"}
    return {**result, "ok": True, "findings": [f.to_json() for f in findings]}


def scan(capture_path: Path) -> dict[str, Any]:
    """The CUDA/C++ rules over the ``extensions`` of a capture record (a JSON file): returns
    ``{findings, kernels}`` (kernels: the ``__global__`` names of all sources)."""
    record = json.loads(capture_path.read_text(encoding="utf-8"))
    findings, kernels = analyze_extensions(record.get("extensions") or [])
    return {"findings": [f.to_json() for f in findings], "kernels": kernels}
