"""bench/engine_torch_decode.py (the PyTorch side of the CUDA benchmark) decodes exactly as dice:
the same tokens and forward counts as `dice generate` on the CPU backend, fused and unfused."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
DICE = ROOT / "build" / "dice"
TOKENIZER = ROOT.parent / "shared" / "models" / "sdar" / "tokenizer"
sys.path.insert(0, str(ROOT / "bench"))
import engine_torch_decode as torch_decode  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    if not DICE.exists():
        pytest.skip("build/dice is not built")
    if not TOKENIZER.is_dir():  # dice generate reads the SDAR tokenizer from the shared data
        pytest.skip(f"{TOKENIZER} absent (shared data)")
    path = tmp_path_factory.mktemp("torch-decode") / "tiny"
    args = ["model", "random", "--config", "tiny", "--out", str(path), "--init-std", "2.0"]
    done = subprocess.run([str(DICE), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return path


@pytest.mark.parametrize("fused", [True, False])
def test_static_schedule_matches_dice(model, fused):
    prompts = torch_decode.prompt_ids(2, 8, 151936, 151669, seed=3)
    net = torch_decode.load_model(model, "cpu", torch.float32)
    got = torch_decode.decode(net, prompts, 20, 4, fused, 151669, 151669, time_limit=0)
    assert got["complete"]
    for i, prompt in enumerate(prompts):
        args = ["generate", "--model", str(model), "--prompt-ids", ",".join(map(str, prompt)),
                "--strategy", "low_confidence_static", "--steps", "4", "--temperature", "0",
                "--stop-ids", "", "--max-new-tokens", "20", "--vocab-limit", "151669",
                "--json", "--backend", "cpu", "--threads", "1"]  # fmt: skip
        if not fused:
            args.append("--no-fused-store")
        done = subprocess.run([str(DICE), *args], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        record = json.loads(done.stdout)
        assert got["output_ids"][i] == record["output_ids"], f"sequence {i}"
        assert got["forwards"] == record["counts"]["forwards"]
