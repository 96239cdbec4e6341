"""`dice generate` as a user runs it: streaming text, --problem prompts, clear input errors."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DICE = Path(os.environ.get("DICE_BIN", ROOT / "build" / "dice"))
SHARED = ROOT.parent / "shared"

pytestmark = [
    pytest.mark.skipif(not DICE.exists(), reason=f"{DICE} not built (scripts/build.sh)"),
    pytest.mark.skipif(not (SHARED / "models").exists(), reason=f"{SHARED} absent (shared data)"),
]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(DICE), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "tiny"
    done = run("model", "random", "--config", "tiny", "--out", str(path), "--init-std", "2.0")
    assert done.returncode == 0, done.stderr
    return path


def test_streamed_text_is_the_json_text(model):
    common = ["generate", "--model", str(model), "--prompt", "Write a CUDA kernel.",
              "--max-new-tokens", "24", "--threads", "1"]  # fmt: skip
    streamed = run(*common)
    assert streamed.returncode == 0, streamed.stderr
    assert "tokens/s" in streamed.stderr
    record = json.loads(run(*common, "--json").stdout)
    assert len(record["output_ids"]) == 24 and record["stop_reason"] == "length"
    if all(i < 151643 for i in record["output_ids"]):  # no special token to skip in the stream
        assert streamed.stdout.rstrip("\n") == record["text"]
    # The chat template, thinking disabled: the prompt ends with an empty think block.
    assert record["prompt_ids"][:1] == [151644]  # <|im_start|>
    assert record["prompt_ids"][-4:] == [151667, 271, 151668, 271]  # <think>\n\n</think>\n\n
    assert record["counts"]["forwards"] >= 24 // 4


def test_problem_prompt_holds_the_problem_code(model):
    kernelbench = SHARED / "data" / "kernelbench" / "problems.jsonl"
    if not kernelbench.exists():
        pytest.skip(f"{kernelbench} absent")
    done = run("generate", "--model", str(model), "--problem", "L1/19", "--max-new-tokens", "4",
               "--json", "--threads", "1", "--no-chat-template")  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["options"]["problem"] == "L1/19"
    assert len(record["prompt_ids"]) > 500  # the template plus the problem's code


def test_problem_set_comes_from_dice_kernelbench(model, tmp_path):
    problems = tmp_path / "problems.jsonl"
    code = "class Model:\n    pass\n"
    problems.write_text(json.dumps({"level": 1, "problem_id": 19, "name": "19_Tiny", "code": code}))
    args = ["generate", "--model", str(model), "--problem", "L1/19", "--max-new-tokens", "1",
            "--json", "--threads", "1", "--no-chat-template"]  # fmt: skip
    env = {**os.environ, "DICE_KERNELBENCH": str(problems)}
    done = subprocess.run([str(DICE), *args], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    given = run(*args, "--kernelbench", str(problems))
    assert given.returncode == 0, given.stderr
    prompt = json.loads(done.stdout)["prompt_ids"]
    assert prompt == json.loads(given.stdout)["prompt_ids"]
    env["DICE_KERNELBENCH"] = str(tmp_path / "absent.jsonl")
    missing = subprocess.run([str(DICE), *args], capture_output=True, text=True, env=env)
    assert missing.returncode == 2 and "absent.jsonl" in missing.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prompt", "hi", "--backend", "tpu"], "expected auto, cpu or cuda"),
        (["--prompt", "hi", "--backend", "cpu", "--gpu-memory", "lots"], "is not a size"),
        (["--prompt", "hi", "--problem", "L1/19"], "exactly one of"),
        (["--prompt", "hi", "--strategy", "random"], "--strategy random"),
        (["--prompt-ids", "1,2,151669"], "mask id"),
        (["--prompt-ids", "1,two"], "not a token id"),
        (["--prompt", "hi", "--temperature", "-1"], "temperature"),
        (
            ["--prompt", "hi", "--backend", "cpu", "--no-wgmma-gemm", "--wgmma-min-block-k", "0"],
            "the wgmma kernel is off",
        ),
        (
            ["--prompt", "hi", "--backend", "cpu", "--no-wgmma-gemm", "--wgmma-stage-k", "64"],
            "--wgmma-stage-k 64: the wgmma kernel is off",
        ),
        (
            ["--prompt", "hi", "--backend", "cpu", "--fused-qk-norm-rope-tile", "128"],
            "--fused-qk-norm-rope-tile 128: the q/k epilogue is off",
        ),
    ],
)
def test_bad_input_is_a_clear_error(model, args, message):
    done = run("generate", "--model", str(model), *args)
    assert done.returncode == 2
    assert message in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--wgmma-min-block-k", "-1"], "not in range"),
        (["--wgmma-min-block-k", "1536", "--wgmma-min-block-k", "64"], "1 required"),
        (["--attention-min-split-keys", "-1"], "not in range"),
        (["--fused-qk-norm-rope", "--fused-qk-norm-rope-tile", "96"], "not in {64,128}"),
        (
            ["--post-norm-trigger", "sideways"],
            "--post-norm-trigger: sideways not in {after-read,after-wait,before-wait}",
        ),
        (["--input-norm-trigger", "0"], "--input-norm-trigger: 0 not in"),  # names only
        # The cuda backend's choices are checked with the cpu backend too (no GPU here).
        (["--cuda-dtype", "fp16"], "--cuda-dtype: fp16 not in {bf16,fp32}"),
        (["--cuda-attention", "tensor-core"], "--cuda-attention: tensor-core not in"),
        (["--stage-o-batch", "65"], "not in range"),
    ],
)
def test_bad_options_are_refused_by_the_command_line_parser(model, args, message):
    # CLI11's own checks, with its message; the exit status is dice's for bad input, 2.
    done = run("generate", "--model", str(model), "--prompt", "hi", *args)
    assert done.returncode == 2
    assert message in done.stderr
