"""`dice engine bench` (issue 6's benchmark) on the CPU backend: greedy by default, sampling with
--temperature / --top-k / --top-p recorded in each record, bad sampling options refused with the
engine's own check (GenerationOptions::validate)."""

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DICE = ROOT / "build" / "dice"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    if not DICE.exists():
        pytest.skip("build/dice is not built")
    path = tmp_path_factory.mktemp("engine-bench") / "tiny"
    args = ["model", "random", "--config", "tiny", "--out", str(path), "--no-tokenizer"]
    done = subprocess.run([str(DICE), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return path


def bench(model: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ["engine", "bench", "--model", str(model), "--backend", "cpu", "--threads", "1",
            "--sequences", "2", "--new-tokens", "8", "--store", "fused", "--warmup-tokens", "4",
            *extra]  # fmt: skip
    return subprocess.run([str(DICE), *args], capture_output=True, text=True, timeout=300)


def test_greedy_by_default_and_sampling_recorded(model):
    greedy = bench(model)
    assert greedy.returncode == 0, greedy.stderr
    record = json.loads(greedy.stdout.splitlines()[-1])
    assert (record["temperature"], record["top_k"], record["top_p"]) == (0, 0, 1)
    assert record["output_tokens"] == 16
    sampled = bench(model, "--temperature", "0.7", "--top-k", "5", "--top-p", "0.9")
    assert sampled.returncode == 0, sampled.stderr
    record = json.loads(sampled.stdout.splitlines()[-1])
    assert (record["temperature"], record["top_k"], record["top_p"]) == (0.7, 5, 0.9)
    assert record["output_tokens"] == 16


@pytest.mark.parametrize(("bad", "message"), [
    (["--top-p", "0"], "generation option top_p: must be in (0, 1], got 0"),
    (["--top-p", "1.5"], "generation option top_p: must be in (0, 1], got 1.5"),
    (["--temperature", "-1"], "generation option temperature: must be >= 0, got -1"),
    (["--top-k", "-3"], "generation option top_k: must be >= 0, got -3"),
])  # fmt: skip
def test_bad_sampling_options_are_refused(model, bad, message):
    done = bench(model, *bad)
    assert done.returncode != 0
    assert message in done.stderr
