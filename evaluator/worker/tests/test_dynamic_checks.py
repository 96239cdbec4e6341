"""The dynamic checks on CPU tensors: the pure functions, then the worker over its protocol with
the rules of the strict policy turned on (RULES.md)."""

from __future__ import annotations

import struct
import threading
from pathlib import Path

import pytest
import torch
from conftest import RELU_PROBLEM, Worker
from dice_worker.dynamic_checks import (
    alias_problem,
    changed_inputs,
    output_type_problem,
    poison_,
    poison_count,
    thread_snapshot,
    threads_problem,
    unwritten_problem,
)
from dice_worker.guard import analyze_problem
from dice_worker.kernels import base_name, classify, elf_function_names, own_kernel_names
from dice_worker.precision import compare_precision

STRICT = {
    rule: "reject"
    for rule in (
        "dynamic.uncaptured_build",
        "dynamic.foreign_kernels",
        "dynamic.no_own_kernel",
        "dynamic.output_type",
        "dynamic.output_alias",
        "dynamic.unwritten_output",
        "dynamic.input_mutation",
        "dynamic.stale_output",
        "dynamic.threads",
        "sandbox.code_changed",
    )
} | {"problem.degenerate": "warn", "precision.reduced": "warn"}


def module(body: str, init: str = "") -> str:
    return (
        "import torch\n\nclass ModelNew(torch.nn.Module):\n"
        f"    def __init__(self):\n        super().__init__()\n{init}\n" + body
    )


def strict(worker, candidate: str, problem: str = RELU_PROBLEM, **options) -> dict:
    return worker.evaluate(candidate, problem, rules=STRICT, **options)


def rules(result: dict) -> set[str]:
    return {f["rule"] for f in result.get("findings", [])}


# -- pure functions ----------------------------------------------------------------------------


def test_output_type():
    x = torch.randn(3)
    assert output_type_problem(x, x, torch.device("cpu")) is None
    assert "Parameter" in output_type_problem(torch.nn.Parameter(x), x, torch.device("cpu"))
    assert "layout" in output_type_problem(x.to_sparse(), x, torch.device("cpu"))
    assert "meta" in output_type_problem(torch.empty(3, device="meta"), x, torch.device("cpu"))


def test_alias():
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    assert alias_problem(x.clone(), [x], set()) is None
    assert "input 0" in alias_problem(x.view(-1), [x], set())
    assert alias_problem(x.view(-1), [x], {("input", 0, 0)}) is None
    assert "outputs 0 and 1" in alias_problem((y, y[0]), [x], set())
    assert "earlier call" in alias_problem(y, [x], set(), earlier=y[1:])


def test_changed_inputs_bitwise():
    a = torch.tensor([1.0, float("nan"), 3.0])
    assert changed_inputs([a, 5], [a.clone(), 5]) == []
    b = a.clone()
    b[2] = 4.0
    assert changed_inputs([b], [a]) == [0]


def test_poison_is_found_where_never_written():
    ref = torch.randn(8)
    out = ref.clone()
    assert unwritten_problem(out, ref) is None
    poison_(out)
    assert poison_count(out, ref) == 8
    part = ref.clone()
    part[:3] = out[:3]
    assert "3 of 8" in unwritten_problem([part], [ref])


def test_threads_snapshot():
    before = thread_snapshot()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        live = threads_problem(before, thread_snapshot(), grace_s=0.05)
        assert "Python thread" in live and "native thread" in live
    finally:
        stop.set()
        t.join()
    # The joined thread's OS thread may still be listed for a moment: the grace covers it.
    assert threads_problem(before, thread_snapshot()) is None


def test_degenerate_problems():
    def profile(fn, shapes=((64,),)):
        def make(seed):
            g = torch.Generator().manual_seed(seed)
            return [torch.randn(*s, generator=g) for s in shapes]

        return analyze_problem(make, lambda inputs: fn(*inputs), [1, 2, 3])

    assert profile(torch.relu)["degenerate"] == []
    assert "near zero" in profile(lambda x: x - x)["degenerate"][0]
    assert "near constant" in profile(lambda x: x.sum() * 0 + 2)["degenerate"][0]
    ignores = profile(lambda x, y: x.relu() + 0 * y, ((64,), (64,)))["degenerate"]
    assert ignores == ["independent of input 1: another draw of it passes"]
    inplace = profile(lambda x: x.relu_())
    assert inplace["mutates_inputs"] == [0] and inplace["aliases"] == [["input", 0, 0]]


def test_precision_report():
    exact = torch.randn(1000, dtype=torch.float64) * 0.01
    ref = exact.float()
    assert not compare_precision(ref.clone(), ref, exact).reduced
    assert compare_precision(ref.half().float(), ref, exact).reduced


def test_kernel_names_and_shares():
    assert base_name("void at::native::vectorized_elementwise_kernel<4, F, A>(int, F, A)") == (
        "vectorized_elementwise_kernel"
    )
    assert base_name("relu_kernel(float const*, float*, long)") == "relu_kernel"
    assert base_name("void k<(int)2>(float*)") == "k"
    share = classify(
        [
            ("void relu_kernel<float>(float const*, float*)", 8.0),
            ("Memset (Device)", 1.0),
            (
                "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()",
                1.0,
            ),
            ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", 30.0),
        ],
        {"relu_kernel"},
    )
    assert (share.own_us, share.data_us, share.foreign_us) == (8.0, 2.0, 30.0)
    assert share.foreign_share == pytest.approx(0.75)


def test_elf_function_names(tmp_path):
    lib = next(Path(torch.__file__).parent.joinpath("lib").glob("libc10.so*"))
    names = elf_function_names(lib)
    assert any("c10" in n for n in names) and len(names) > 100
    own, note = own_kernel_names(["not_in_the_library"], [lib], torch._C._demangle)
    assert note == "" and own.names == frozenset() and len(own.signatures) > 100
    defined = next(iter(own.signatures))
    assert defined in own and "void not_in_the_library(float*)" not in own
    fake = tmp_path / "fake.so"
    fake.write_bytes(b"\x7fELF" + struct.pack("<BB", 1, 1) + b"\0" * 64)
    assert elf_function_names(fake) == set()


# -- the worker with the strict rules ----------------------------------------------------------


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """One worker for the whole module: requests are independent, and starting torch is slow."""
    w = Worker(tmp_path_factory.mktemp("dynamic"))
    yield w
    w.close()


HONEST = module("    def forward(self, x):\n        return torch.relu(x)\n")


def test_honest_candidate_passes_every_check(worker):
    r = strict(worker, HONEST)
    assert r["verdict"] == "correct", r
    assert rules(r) == set()


def test_output_aliasing_an_input_is_rejected(worker):
    r = strict(worker, module("    def forward(self, x):\n        return x.relu_()\n"))
    assert r["verdict"] == "rejected" and rules(r) == {"dynamic.output_alias"}, r


def test_input_mutation_is_rejected(worker):
    body = "    def forward(self, x):\n        y = torch.relu(x)\n        x.zero_()\n        return y\n"
    r = strict(worker, module(body))
    assert r["verdict"] == "rejected" and rules(r) == {"dynamic.input_mutation"}, r


def test_in_place_reference_allows_in_place_candidate(worker):
    problem = RELU_PROBLEM.replace("return torch.relu(x)", "return x.relu_()")
    r = strict(worker, module("    def forward(self, x):\n        return x.relu_()\n"), problem)
    assert r["verdict"] == "correct", r
    assert r["problem"]["mutates_inputs"] == [0]


def test_subclass_output_is_rejected(worker):
    body = "    def forward(self, x):\n        return torch.nn.Parameter(torch.relu(x), requires_grad=False)\n"
    r = strict(worker, module(body))
    assert r["verdict"] == "rejected" and rules(r) == {"dynamic.output_type"}, r


def test_reused_output_buffer_is_rejected(worker):
    init = "        self.out = None"
    body = (
        "    def forward(self, x):\n"
        "        if self.out is None:\n            self.out = torch.empty_like(x)\n"
        "        torch.clamp_min(x, 0, out=self.out)\n        return self.out\n"
    )
    r = strict(worker, module(body, init))
    assert r["verdict"] == "rejected" and rules(r) == {"dynamic.output_alias"}, r
    assert "earlier call" in r["reasons"][-1]


def test_stale_results_in_timing_are_rejected(worker):
    init = "        self.calls = 0\n        self.last = None"
    body = (
        "    def forward(self, x):\n        self.calls += 1\n"
        "        if self.calls <= 3:\n            self.last = torch.relu(x)\n"
        "        return self.last.clone()\n"
    )
    r = strict(worker, module(body, init))
    assert r["verdict"] == "rejected" and rules(r) == {"dynamic.stale_output"}, r
    assert len(r["correctness"]["trials"]) == 3  # it passed the correctness trials
    assert "timing" not in r


def test_stale_results_are_rejected_with_stored_reference_timing(worker):
    # The reference's samples come from the store: it is not timed, but still runs beside every
    # timed call of the candidate so that its outputs are checked.
    init = "        self.calls = 0\n        self.last = None"
    body = (
        "    def forward(self, x):\n        self.calls += 1\n"
        "        if self.calls <= 3:\n            self.last = torch.relu(x)\n"
        "        return self.last.clone()\n"
    )
    r = strict(worker, module(body, init), reference_ms=[1.0, 1.0, 1.0])
    assert r["verdict"] == "rejected" and rules(r) == {"dynamic.stale_output"}, r
    honest = strict(
        worker,
        module("    def forward(self, x):\n        return torch.relu(x)\n"),
        reference_ms=[1.0, 2.0],
    )
    assert honest["verdict"] == "correct", honest
    assert honest["timing"]["reference_ms"] == [1.0, 2.0]
    assert len(honest["timing"]["candidate_ms"]) > 0


def test_fixed_timing_inputs_do_not_notice_stale_results_without_the_rule(worker):
    init = "        self.calls = 0\n        self.last = None"
    body = (
        "    def forward(self, x):\n        self.calls += 1\n"
        "        if self.calls <= 3:\n            self.last = torch.relu(x)\n"
        "        return self.last.clone()\n"
    )
    assert worker.evaluate(module(body, init))["verdict"] == "correct"


def test_left_running_thread_is_rejected(worker):
    body = (
        "    def forward(self, x):\n        import threading\n"
        "        if not hasattr(self, 't'):\n"
        "            self.t = threading.Thread(target=__import__('time').sleep, args=(600,), daemon=True)\n"
        "            self.t.start()\n        return torch.relu(x)\n"
    )
    r = strict(worker, module(body))
    assert r["verdict"] == "rejected" and rules(r) == {"dynamic.threads"}, r


def test_degenerate_problem_is_marked_not_rejected(worker):
    problem = RELU_PROBLEM.replace("return torch.relu(x)", "return x - x")
    candidate = module("    def forward(self, x):\n        return torch.zeros_like(x)\n")
    r = strict(worker, candidate, problem)
    assert r["verdict"] == "correct" and rules(r) == {"problem.degenerate"}, r
    assert r["problem"]["degenerate"] == ["near zero: an all-zero output passes"]


def test_reduced_precision_warns(worker):
    problem = RELU_PROBLEM.replace("return torch.relu(x)", "return x * 0.01")
    candidate = module("    def forward(self, x):\n        return (x.bfloat16() * 0.01).float()\n")
    r = strict(worker, candidate, problem, correct_trials=2)
    # bf16 is past the 1e-4 tolerance here; the same arithmetic in fp16 passes, with a warning.
    assert r["verdict"] == "mismatch"
    candidate = module("    def forward(self, x):\n        return (x.half() * 0.01).float()\n")
    r = strict(worker, candidate, problem, correct_trials=2)
    assert r["verdict"] == "correct" and rules(r) == {"precision.reduced"}, r
    assert r["checks"]["precision"]["candidate_error"] > 1e-4


def test_changed_code_file_is_rejected(worker):
    r = strict(worker, HONEST, code_sha256_override="0" * 64)
    assert r["verdict"] == "rejected" and rules(r) == {"sandbox.code_changed"}, r


def test_uncaptured_build_is_refused(worker):
    body = (
        "    def forward(self, x):\n"
        "        from torch.utils.cpp_extension import load_inline\n"
        "        ext = load_inline(name='late', cpp_sources='int f() { return 1; }', functions=['f'])\n"
        "        return torch.relu(x)\n"
    )
    r = strict(worker, module(body), correct_trials=1)
    assert r["verdict"] == "rejected" and rules(r) == {"dynamic.uncaptured_build"}, r


def test_rules_off_change_nothing(worker):
    r = worker.evaluate(module("    def forward(self, x):\n        return x.relu_()\n"))
    assert r["verdict"] == "correct" and r.get("findings") == []
