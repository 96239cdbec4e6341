"""Capture: run a candidate module on the CPU with ``load_inline`` recorded instead of compiled,
so that the orchestrator can build the extensions itself (PROTOCOL.md, ``capture``)."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import json
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from torch.utils import cpp_extension

from .extract import extract_to_file
from .loader import exec_module

_REAL_LOAD_INLINE = cpp_extension.load_inline
_SIGNATURE = inspect.signature(_REAL_LOAD_INLINE)


def _joined(sources: Any) -> str:
    if sources is None:
        return ""
    if isinstance(sources, str):
        return sources
    return "\n".join(str(s) for s in sources)


def _flags(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _functions(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    return [str(v) for v in value]


def normalize_call(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """The recorded fields of one ``load_inline(...)`` call (arguments bound as torch binds them),
    with its ``digest``: SHA-256 of the canonical JSON of the other fields. Raises TypeError on
    arguments ``load_inline`` would reject."""
    bound = _SIGNATURE.bind(*args, **kwargs)
    a = bound.arguments
    cuda_sources = _joined(a.get("cuda_sources"))
    with_cuda = a.get("with_cuda")
    record: dict[str, Any] = {
        "name": str(a["name"]),
        "cpp_sources": _joined(a.get("cpp_sources")),
        "cuda_sources": cuda_sources,
        "functions": _functions(a.get("functions")),
        "extra_cflags": _flags(a.get("extra_cflags")),
        "extra_cuda_cflags": _flags(a.get("extra_cuda_cflags")),
        "extra_ldflags": _flags(a.get("extra_ldflags")),
        "extra_include_paths": _flags(a.get("extra_include_paths")),
        "with_cuda": bool(cuda_sources) if with_cuda is None else bool(with_cuda),
    }
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"))
    record["digest"] = hashlib.sha256(canonical.encode()).hexdigest()
    return record


class _StandIn:
    """What the recorder returns instead of a compiled module: calling any of its functions at
    import time is an error (the real module does not exist yet)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Callable[..., Any]:
        def unavailable(*_args: Any, **_kwargs: Any) -> Any:
            raise RuntimeError(
                f"{self._name}.{attr} was called while the module was being imported; "
                "extension functions may only be called from ModelNew"
            )

        return unavailable


@contextlib.contextmanager
def replaced_load_inline(fn: Callable[..., Any]) -> Iterator[None]:
    """Replaces ``torch.utils.cpp_extension.load_inline`` with ``fn`` for the duration (then
    restores what was there)."""
    previous = cpp_extension.load_inline
    cpp_extension.load_inline = fn
    try:
        yield
    finally:
        cpp_extension.load_inline = previous


def _tail(text: str, limit: int = 4000) -> str:
    return text[-limit:]


def capture(raw_path: Path, code_path: Path) -> dict[str, Any]:
    """Extracts the code of ``raw_path`` into ``code_path`` and records its load_inline calls.
    Returns the capture record of PROTOCOL.md; never raises for a bad candidate."""
    _, result = extract_to_file(raw_path, code_path)
    if result.get("ok") is False:
        return result
    return {**result, **capture_code(code_path)}


def capture_code(code_path: Path) -> dict[str, Any]:
    """Executes the extracted program ``code_path`` with load_inline recorded: ``{ok: true,
    extensions}``, or ``{ok: false, verdict, error, log_tail}``. Never raises for a bad candidate.
    Its output is the candidate's to forge (it runs candidate code): the worker builds nothing it
    was not given and refuses uncaptured builds under the strict policy (RULES.md)."""
    code = code_path.read_text(encoding="utf-8", errors="replace")
    try:
        ast.parse(code, filename=str(code_path))
    except SyntaxError as e:
        return {"ok": False, "verdict": "parse_error", "error": f"SyntaxError: {e}"}
    calls: list[dict[str, Any]] = []

    def recorder(*args: Any, **kwargs: Any) -> _StandIn:
        record = normalize_call(*args, **kwargs)
        calls.append(record)
        return _StandIn(record["name"])

    try:
        with replaced_load_inline(recorder):
            module = exec_module(code_path, "dice_capture_candidate")
    except BaseException as e:  # noqa: BLE001 - any failure of the candidate is a verdict
        return {
            "ok": False,
            "verdict": "import_error",
            "error": f"{type(e).__name__}: {e}"[:2000],
            "log_tail": _tail(traceback.format_exc()),
        }
    if not hasattr(module, "ModelNew"):
        return {"ok": False, "verdict": "no_model_new", "error": "no ModelNew defined"}
    return {"ok": True, "extensions": calls}
