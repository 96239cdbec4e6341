"""The static rules: snippets, the defences suite (evaluator/defenses/manifest.json) and, when the
shared data is present, the 99 DICE pairs (their expected rejections are committed in
bench/results/2026-11-22-defenses-static/rejections.json)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from dice_worker.analyze import analyze, scan
from dice_worker.static_rules import (
    analyze_cuda,
    analyze_extensions,
    analyze_python,
    blank_comments_and_strings,
    kernel_names,
)

ROOT = Path(__file__).resolve().parents[3]
DEFENSES = ROOT / "evaluator" / "defenses"
PAIRS = ROOT.parent / "shared" / "data" / "dice" / "infilling_eval_99.jsonl"
PAIRS_EXPECTED = ROOT / "bench" / "results" / "2026-11-22-defenses-static" / "rejections.json"


def strict_rejects() -> set[str]:
    """Rule ids whose strict action is reject, read from the table of evaluator/RULES.md."""
    rows = re.findall(
        r"^\| `([a-z0-9_.]+)` \|[^|]*\|[^|]*\| (\w+) \|",
        (ROOT / "evaluator" / "RULES.md").read_text(),
        re.M,
    )
    assert len(rows) > 25
    return {rule for rule, action in rows if action == "reject"}


STRICT = strict_rejects()


def captured_sources(code: str) -> list[dict]:
    """The load_inline calls of a program whose sources are string constants, found without
    running it (the real capture executes the module; these test files keep it simple)."""
    tree = ast.parse(code)
    constants = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        for t in n.targets
        if isinstance(t, ast.Name) and isinstance(n.value.value, str)
    }

    def value(node: ast.AST) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id, "")
        return ""

    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("load_inline"):
            kw = {k.arg: k.value for k in node.keywords}
            calls.append(
                {
                    "name": value(kw["name"]) if "name" in kw else "ext",
                    "cpp_sources": value(kw["cpp_sources"]) if "cpp_sources" in kw else "",
                    "cuda_sources": value(kw["cuda_sources"]) if "cuda_sources" in kw else "",
                }
            )
    return calls


def rules_of(code: str) -> tuple[set[str], set[str]]:
    """(all rule ids that fired, those that reject under strict)."""
    findings = analyze_python(code) + analyze_extensions(captured_sources(code))[0]
    fired = {f.rule for f in findings}
    return fired, fired & STRICT


def manifest() -> list[dict]:
    return json.loads((DEFENSES / "manifest.json").read_text())["candidates"]


@pytest.mark.parametrize("entry", manifest(), ids=lambda e: Path(e["file"]).stem)
def test_defenses_suite_static(entry):
    fired, rejecting = rules_of((DEFENSES / entry["file"]).read_text())
    expected = set(entry["rules"])
    if entry["kind"] == "honest":
        assert not rejecting, f"honest candidate rejected statically: {rejecting}"
    elif entry["kind"] == "cheat" and entry["static"]:
        assert expected <= rejecting, f"expected {expected}, fired {fired}"
    elif entry["kind"] == "cheat":
        # Left to the dynamic checks: the static rules must let it through, and report the
        # static warnings the manifest names.
        assert not rejecting, f"a dynamic cheat is already rejected statically: {rejecting}"
        assert {r for r in expected if r.startswith("static.")} <= fired


def test_suite_covers_every_pattern():
    entries = manifest()
    patterns = {e["pattern"] for e in entries if e["kind"] == "cheat"}
    assert patterns == {str(i) for i in range(1, 12)}
    assert sum(e["kind"] == "cheat" for e in entries) >= 25
    assert sum(e["kind"] == "honest" for e in entries) >= 15
    for e in entries:
        assert (DEFENSES / e["file"]).exists(), e["file"]
        problem = Path(e["file"]).stem.split("__")[0]
        assert (DEFENSES / "problems" / f"{problem}.py").exists(), problem


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ("y = torch.relu(x)\n        return y", "static.torch_compute"),
        ("return F.softmax(x, dim=1)", "static.torch_compute"),
        ("return x @ x", "static.torch_compute"),
        ("return ext.f(x) * 2", "static.torch_compute"),
        ("return x.sum(dim=1)", "static.torch_compute"),
        ("y = ext.f(x)\n        y[0] = 1\n        return y", "static.torch_compute"),
        ("return self.lin(x)", "static.nn_forward"),
        ("return nn.ReLU()(x)", "static.nn_forward"),
        (
            "try:\n            return ext.f(x)\n        except Exception:\n            return x",
            "static.try_except",
        ),
        ("return self.helper(x)", "static.torch_compute"),
        ("return Model()(x)", "static.reference_model"),
        ("return getattr(torch, 'rel' + 'u')(x)", "static.introspection"),
        ("open('/tmp/x', 'w').write('1')\n        return ext.f(x)", "static.io"),
        ("torch.cuda.synchronize = None\n        return ext.f(x)", "static.monkeypatch"),
        ("s = torch.cuda.Stream()\n        return ext.f(x)", "static.concurrency"),
        ("return ext.f(x.half())", "static.reduced_precision"),
    ],
)
def test_python_rules(body, rule):
    code = (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "from torch.utils.cpp_extension import load_inline\n"
        "ext = load_inline(name='e', cpp_sources='', functions=['f'])\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.lin = nn.Linear(4, 4)\n"
        "        self.w = nn.Parameter(torch.randn(4))\n"
        "    def helper(self, x):\n        return x.exp()\n"
        f"    def forward(self, x):\n        {body}\n"
    )
    assert rule in {f.rule for f in analyze_python(code)}


def test_allowed_python_is_clean():
    code = (
        "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
        "ext = load_inline(name='e', cpp_sources='', functions=['f'])\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, n: int):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 3, 3)\n        self.w = nn.Parameter(torch.randn(n) * 0.1)\n"
        "        nn.init.zeros_(self.conv.bias)\n"
        "    def forward(self, x, dim: int = 1):\n"
        "        if x.dim() == 2 and x.shape[0] > 1 and x is not None:\n"
        "            x = x.contiguous().view(x.size(0), -1)\n"
        "        out = torch.empty(x.shape[0], x.size(1) * 2, device=x.device, dtype=x.dtype)\n"
        "        stride = x.size(1) * x.size(0)\n"
        "        ext.f(x.float(), out, self.conv.weight, self.conv.bias, self.w.t(), stride, dim)\n"
        "        return out.reshape(-1, 2).permute(1, 0)\n"
        'if __name__ == "__main__":\n    print(Model()(torch.randn(2)))\n'
    )
    assert analyze_python(code) == []


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("auto y = torch::relu(x);", "static.torch_compute"),
        ("auto y = at::matmul(a, b);", "static.torch_compute"),
        ("auto y = x.sum(1);", "static.torch_compute"),
        ("cublasSgemm(h, a, b);", "static.blas_handle"),
        ("auto h = at::cuda::getCurrentCUDABlasLtHandle();", "static.blas_handle"),
        ("std::thread t(f);", "static.concurrency"),
        ("cudaStreamCreate(&s);", "static.concurrency"),
        ("cudaGraphLaunch(g, s);", "static.cuda_graph"),
        ('FILE* f = fopen("/x", "w");', "static.io"),
        ('void* h = dlopen("libcublas.so", 0);', "static.ctypes"),
        ("TORCH_LIBRARY_IMPL(aten, CUDA, m) {}", "static.monkeypatch"),
        ("attr.accessPolicyWindow.num_bytes = n;", "static.l2_persist"),
        (
            'asm volatile("ld.global.L2::evict_last.f32 %0, [%1];" : "=f"(v) : "l"(p));',
            "static.l2_persist",
        ),
        ("__half h = __float2half(v);", "static.reduced_precision"),
    ],
)
def test_cuda_rules(source, rule):
    assert rule in {f.rule for f in analyze_cuda(source, "t:cuda_sources")[0]}


def test_cuda_allowed_and_comments_and_strings_are_ignored():
    src = r"""
    // torch::relu(x) in a comment, cublasSgemm too
    /* std::thread t; */
    const char* msg = "at::matmul(a, b) fopen(";
    auto y = torch::empty_like(x); auto z = torch::zeros({n}, x.options());
    auto s = at::cuda::getCurrentCUDAStream(); auto c = x.contiguous().view({-1});
    TORCH_CHECK(x.is_cuda(), "x must be CUDA"); y.zero_(); int n = x.numel(); x.size(0);
    """
    assert analyze_cuda(src, "t")[0] == []
    blanked, strings = blank_comments_and_strings(src)
    assert len(blanked) == len(src) and "matmul" not in blanked and strings


def test_kernel_names():
    src = (
        "template <typename T> __global__ void __launch_bounds__(256, 2) k1(T* x) {}\n"
        '__global__ void k2(float* x) {}\nextern "C" __global__ void k3() {}\n'
        "static __global__ void\nk4(int n) {}\n"
    )
    assert kernel_names(blank_comments_and_strings(src)[0]) == ["k1", "k2", "k3", "k4"]


def test_analyze_and_scan_commands(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text(
        "Here:\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n```\n"
    )
    result = analyze(raw, tmp_path / "code.py")
    assert result["ok"] and [f["rule"] for f in result["findings"]] == ["static.torch_compute"]
    assert (tmp_path / "code.py").read_text().startswith("import torch")
    raw.write_text("def broken(:\n")
    assert analyze(raw, tmp_path / "code.py")["verdict"] == "parse_error"
    capture = tmp_path / "capture.json"
    capture.write_text(
        json.dumps(
            {
                "ok": True,
                "extensions": [
                    {
                        "name": "e",
                        "cpp_sources": "",
                        "cuda_sources": "__global__ void k() {}\nauto y = at::relu(x);",
                    }
                ],
            }
        )
    )
    scanned = scan(capture)
    assert scanned["kernels"] == ["k"]
    assert [f["rule"] for f in scanned["findings"]] == ["static.torch_compute"]


@pytest.mark.skipif(not PAIRS.exists(), reason=f"shared data absent: {PAIRS}")
def test_99_pairs_rejections_are_the_committed_list():
    """Every pair the static rules reject under strict is in the committed, reviewed list (with
    its reason), and nothing else is rejected."""
    expected = {str(k): set(v["rules"]) for k, v in json.loads(PAIRS_EXPECTED.read_text()).items()}
    got = {}
    for line in PAIRS.read_text().splitlines():
        pair = json.loads(line)
        _, rejecting = rules_of(pair["cuda_code"])
        if rejecting:
            got[str(pair["id"])] = rejecting
    assert got == expected
