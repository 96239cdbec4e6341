from pathlib import Path

import pytest
from dice_worker.capture import capture, normalize_call

CANDIDATE = """
import torch
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="k", cpp_sources="torch::Tensor f(torch::Tensor x);",
                  cuda_sources=["__global__ void a() {}", "torch::Tensor f(torch::Tensor x) { return x; }"],
                  functions=["f"], extra_cuda_cflags=["-O3"], verbose=True)

class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.f(x)
"""


def run_capture(tmp_path: Path, text: str) -> dict:
    raw = tmp_path / "raw.txt"
    raw.write_text(text)
    return capture(raw, tmp_path / "code.py")


def test_records_load_inline_arguments(tmp_path):
    result = run_capture(tmp_path, CANDIDATE)
    assert result["ok"], result
    (ext,) = result["extensions"]
    assert ext["name"] == "k"
    assert ext["cuda_sources"].startswith("__global__ void a() {}\n")
    assert ext["functions"] == ["f"]
    assert ext["extra_cuda_cflags"] == ["-O3"]
    assert ext["with_cuda"] is True
    assert (tmp_path / "code.py").read_text() == CANDIDATE


def test_digest_is_stable_and_sensitive():
    a = normalize_call("k", "cpp", cuda_sources="cu", functions=["f"])
    b = normalize_call(name="k", cpp_sources=["cpp"], cuda_sources=["cu"], functions="f")
    c = normalize_call("k", "cpp", cuda_sources="cu2", functions=["f"])
    assert a["digest"] == b["digest"]
    assert a["digest"] != c["digest"]


def test_bad_arguments_raise_type_error():
    with pytest.raises(TypeError):
        normalize_call(cpp_sources="x")


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("def broken(:\n", "parse_error"),
        ("import torch\nraise ValueError('boom')\n", "import_error"),
        ("import torch\n", "no_model_new"),
        ("```python\nimport torch\nclass ModelNew(", "truncated"),
    ],
)
def test_failures_are_verdicts(tmp_path, text, verdict):
    result = run_capture(tmp_path, text)
    assert not result["ok"]
    assert result["verdict"] == verdict


def test_extension_called_at_import_is_import_error(tmp_path):
    text = CANDIDATE + "\next.f(torch.zeros(1))\n"
    result = run_capture(tmp_path, text)
    assert result["verdict"] == "import_error"
    assert "called while the module was being imported" in result["error"]
