"""The builder's slim headers (dice_torch_cuda.h, dice_torch_main.h) on real DICE candidates.

Builds two DICE pairs with `dice eval --device none` (the slim header must be enough for both),
one of them again with `--no-slim-header` (torch's headers), and a variant that calls
`torch::relu` in its CUDA half (not in the slim header: the builder must fall back to torch's
headers and succeed). The two objects of the same candidate must hold the same device code and
define the same host functions. Needs build/dice, nvcc and ../shared/data; skips without them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DICE = ROOT / "build" / "dice"
PAIRS = ROOT.parent / "shared" / "data" / "dice" / "infilling_eval_99.jsonl"
MARKER = "#include <torch/extension.h>"
BOTH_WAYS, SLIM_ONLY = 4185, 8645  # small pairs: log1p_isneginf, fmod_stack


def _nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.exists() else None


pytestmark = [
    pytest.mark.skipif(not DICE.exists(), reason="build/dice not built (scripts/build.sh)"),
    pytest.mark.skipif(_nvcc() is None, reason="nvcc not found: CUDA builds not tested"),
    pytest.mark.skipif(not PAIRS.exists(), reason=f"DICE pairs not found at {PAIRS}"),
]


def _pairs() -> dict[int, dict[str, Any]]:
    rows = [json.loads(line) for line in PAIRS.open()]
    return {row["id"]: row for row in rows if row["id"] in (BOTH_WAYS, SLIM_ONLY)}


def _needs_full(pair: dict[str, Any]) -> dict[str, Any]:
    """The pair with a host function in its CUDA half that only torch's headers declare."""
    extra = "\ntorch::Tensor dice_relu(torch::Tensor x) { return torch::relu(x); }\n"
    variant = dict(pair, id=f"{pair['id']}-relu")
    variant["cuda_code"] = pair["cuda_code"].replace(MARKER, MARKER + extra, 1)
    assert variant["cuda_code"] != pair["cuda_code"]
    return variant


def _eval(pairs: list[dict[str, Any]], work: Path, cache: Path, *flags: str) -> list[dict]:
    work.mkdir(parents=True)
    (work / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    command = [str(DICE), "eval", "--candidates", str(work / "pairs.jsonl"), "--device", "none"]
    command += ["--cache", str(cache), "--out-dir", str(work / "out"), "--jobs", "2"]
    command += ["--progress", "none", "--no-pch", "--main-compiler", "cxx", *flags]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in (work / "out" / "records.jsonl").open()]


def _cuda(record: dict[str, Any]) -> dict[str, Any]:
    assert record["verdict"] == "compiled", record["reasons"]
    (detail,) = record["compile"]["detail"]
    return detail["cuda"]


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _cuda_objects(cache: Path, kernel: str) -> dict[str, Path]:
    """header ("slim", "full") -> cuda object of the candidate whose source defines `kernel`."""
    found: dict[str, Path] = {}
    for result in (cache / "obj").glob("*/result.json"):
        info = json.loads(result.read_text())
        source = result.parent / "cuda.cu"
        if info["what"] == "cuda.cu" and info["ok"] and kernel in source.read_text():
            assert info["header"] not in found
            found[info["header"]] = result.parent / "object.o"
    return found


def _device_code(obj: Path) -> bytes:
    """The object's fatbinary, without the per-source hash nvcc puts in internal names."""
    out = obj.with_suffix(".fatbin")
    subprocess.run(
        ["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(obj), str(out)], check=True
    )
    return re.sub(rb"_[0-9a-f]{8}_[0-9]+_[A-Za-z0-9_]+?_cu_[0-9a-f]{8}", b"_X", out.read_bytes())


def _host_functions(obj: Path) -> list[str]:
    listing = subprocess.run(
        ["nm", "-g", "--defined-only", str(obj)], capture_output=True, text=True, check=True
    ).stdout
    return sorted(line.split()[2] for line in listing.splitlines() if line.split()[1] == "T")


def test_slim_header_on_real_candidates_and_fallback(tmp_path: Path) -> None:
    pairs = _pairs()
    assert set(pairs) == {BOTH_WAYS, SLIM_ONLY}
    cache = tmp_path / "cache"
    candidates = [pairs[BOTH_WAYS], pairs[SLIM_ONLY], _needs_full(pairs[SLIM_ONLY])]
    # torch::relu in a CUDA half is a finding of the static rules: off, the builder is tested here.
    first = _eval(candidates, tmp_path / "a", cache, "--rule", "static.torch_compute=off")
    assert len(first) == 3, [r["candidate"] for r in first]
    headers = sorted(_cuda(r)["header"] for r in first)
    assert headers == ["full", "slim", "slim"], headers
    assert all(_cuda(r)["status"] == "built" for r in first)
    # Their C++ halves (declarations and bindings) all compile with dice_torch_main.h.
    mains = [r["compile"]["detail"][0]["main"] for r in first]
    assert all(m["header"] == "slim" for m in mains if m["status"] == "built"), mains
    # The relu variant: the slim compile failed on torch::relu, torch's headers decided.
    (fallback,) = [d for d in (cache / "obj").iterdir() if "dice_relu" in _text(d / "cuda.cu")]
    assert json.loads((fallback / "result.json").read_text())["header"] == "full"
    assert "dice_relu" in (fallback / "cuda.slim.cu").read_text()
    log = (fallback / "build.log").read_text()
    assert "compiled again with torch's headers" in log
    assert re.search(r"error.*relu", log), log[-3000:]

    (again,) = _eval([pairs[BOTH_WAYS]], tmp_path / "b", cache, "--no-slim-header")
    assert (_cuda(again)["status"], _cuda(again)["header"]) == ("built", "full")
    main = again["compile"]["detail"][0]["main"]
    assert (main["status"], main["header"]) == ("built", "full")  # its own key: torch's headers

    objects = _cuda_objects(cache, "log1p_isneginf_kernel")
    assert set(objects) == {"slim", "full"}
    assert _device_code(objects["slim"]) == _device_code(objects["full"])
    functions = _host_functions(objects["slim"])
    assert any("log1p_isneginf_cuda" in f for f in functions), functions
    assert functions == _host_functions(objects["full"])
