"""The worker over its real protocol, on CPU tensors."""

import signal

from conftest import RELU_PROBLEM

REFERENCE_AS_CANDIDATE = RELU_PROBLEM + "\nModelNew = Model\n"


def module(body: str) -> str:
    return "import torch\n\nclass ModelNew(torch.nn.Module):\n" + body


def test_reference_as_candidate_is_correct_and_timed(worker):
    events = worker.events(worker.send(REFERENCE_AS_CANDIDATE, timing_trials=5))
    stages = [e["stage"] for e in events if e["event"] == "stage"]
    assert stages == ["load", "correctness", "timing"]
    result = events[-1]
    assert result["verdict"] == "correct", result
    assert len(result["timing"]["candidate_ms"]) == 5
    assert len(result["timing"]["reference_ms"]) == 5
    # The fixed cost of a timed call (timing.launch_bound): positive and below the reference's.
    empty = result["timing"]["empty_call_ms"]
    assert 0 < empty < max(result["timing"]["reference_ms"])
    assert all(t["passed"] for t in result["correctness"]["trials"])
    assert result["correctness"]["atol"] == 1e-4


def test_wrong_values(worker):
    r = worker.evaluate(module("    def forward(self, x):\n        return torch.relu(x) * 1.01\n"))
    assert r["verdict"] == "mismatch"
    assert r["correctness"]["trials"][0]["max_abs_error"] > 0
    assert "timing" not in r


def test_wrong_shape(worker):
    r = worker.evaluate(module("    def forward(self, x):\n        return torch.relu(x).t()\n"))
    assert r["verdict"] == "wrong_shape"


def test_wrong_dtype(worker):
    r = worker.evaluate(
        module("    def forward(self, x):\n        return torch.relu(x).double()\n")
    )
    assert r["verdict"] == "wrong_dtype"


def test_not_a_tensor(worker):
    r = worker.evaluate(module("    def forward(self, x):\n        return [1.0]\n"))
    assert r["verdict"] == "wrong_output"


def test_constructor_error(worker):
    r = worker.evaluate(module("    def __init__(self, needed):\n        super().__init__()\n"))
    assert r["verdict"] == "constructor_error"


def test_forward_exception_is_runtime_error(worker):
    r = worker.evaluate(
        module("    def forward(self, x):\n        raise RuntimeError('kernel failed')\n")
    )
    assert r["verdict"] == "runtime_error"
    assert "kernel failed" in r["reasons"][0]


def test_nan_where_reference_is_finite_is_mismatch(worker):
    body = "    def forward(self, x):\n        y = torch.relu(x)\n        y[0, 0] = float('nan')\n        return y\n"
    assert worker.evaluate(module(body))["verdict"] == "mismatch"


def test_nan_where_reference_has_nan_is_accepted(worker):
    problem = RELU_PROBLEM.replace("return torch.relu(x)", "return torch.log(x)")
    candidate = module("    def forward(self, x):\n        return torch.log(x)\n")
    assert worker.evaluate(candidate, problem)["verdict"] == "correct"


def test_broken_problem_is_reference_error(worker):
    r = worker.evaluate(REFERENCE_AS_CANDIDATE, problem="import torch\nraise ImportError('x')\n")
    assert r["verdict"] == "reference_error"


def test_kernelbench_protocol(worker):
    r = worker.evaluate(REFERENCE_AS_CANDIDATE, protocol="kernelbench", timing_trials=3)
    assert r["verdict"] == "correct"
    assert r["timing"]["protocol"] == "kernelbench"


def test_candidate_mutating_its_inputs_does_not_fool_the_default_protocol(worker):
    # Under the default protocol the reference runs on a pristine copy, so writing the
    # reference's answer into the inputs gains nothing.
    body = "    def forward(self, x):\n        x.relu_()\n        return x\n"
    assert worker.evaluate(module(body))["verdict"] == "correct"  # honest in-place result
    sneaky = "    def forward(self, x):\n        x.zero_()\n        return x\n"
    assert worker.evaluate(module(sneaky))["verdict"] == "mismatch"
    assert worker.evaluate(module(sneaky), protocol="kernelbench")["verdict"] == "mismatch"


def test_segfault_kills_the_worker_and_stderr_is_readable(worker):
    body = f"    def forward(self, x):\n        import os\n        os.kill(os.getpid(), {int(signal.SIGSEGV)})\n"
    events = worker.events(worker.send(module(body) + "print('candidate says hi')\n"))
    assert events[-1]["event"] == "stage"  # no result: the process died
    assert worker.proc.wait(timeout=30) == -signal.SIGSEGV
    assert "candidate says hi" in worker.proc.stderr.read()


def test_candidate_prints_do_not_corrupt_the_protocol(worker):
    body = '    def forward(self, x):\n        print(\'{"event": "result"}\')\n        return torch.relu(x)\n'
    assert worker.evaluate(module(body))["verdict"] == "correct"
