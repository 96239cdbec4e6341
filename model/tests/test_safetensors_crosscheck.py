"""Cross-checks dice's safetensors reader and writer against the Python safetensors library and
transformers: files dice writes load there with the same values, and files they write open in
`dice model inspect` with the same values (compared through `inspect --dump`, exact)."""

import json
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[2]
DICE = ROOT / "build" / "dice"

pytestmark = pytest.mark.skipif(not DICE.exists(), reason=f"{DICE} not built (scripts/build.sh)")

TORCH_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def dice(*args: str) -> str:
    result = subprocess.run(
        [str(DICE), *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"dice {' '.join(args)}: {result.stderr}"
    return result.stdout


def dump(model_dir: Path, name: str) -> torch.Tensor:
    """The fp32 values dice reads for tensor `name`, flattened."""
    text = dice("model", "inspect", str(model_dir), "--dump", name)
    return torch.tensor([float(line) for line in text.split()], dtype=torch.float32)


def inspect(model_dir: Path) -> dict:
    return json.loads(dice("model", "inspect", str(model_dir), "--json"))


def assert_same(dumped: torch.Tensor, reference: torch.Tensor) -> None:
    torch.testing.assert_close(dumped, reference.float().flatten(), rtol=0, atol=0, equal_nan=True)


def random_model(out: Path, dtype: str, *extra: str) -> Path:
    dice(
        "model", "random", "--config", "tiny", "--vocab", "512", "--dtype", dtype, "--seed",
        "11", "--no-tokenizer", "--out", str(out), *extra,
    )  # fmt: skip
    return out


def load_folder(model_dir: Path) -> dict[str, torch.Tensor]:
    index = model_dir / "model.safetensors.index.json"
    if not index.exists():
        return load_file(model_dir / "model.safetensors")
    weight_map = json.loads(index.read_text())["weight_map"]
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        tensors.update(load_file(model_dir / shard))
    assert set(tensors) == set(weight_map)
    return tensors


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_dice_files_load_in_safetensors(tmp_path: Path, dtype: str) -> None:
    sharded = random_model(tmp_path / "sharded", dtype, "--max-shard-bytes", "40kb")
    single = random_model(tmp_path / "single", dtype)
    assert (sharded / "model.safetensors.index.json").exists()
    a = load_folder(sharded)
    b = load_folder(single)
    described = inspect(single)
    assert {t["name"] for t in described["tensors"]} == set(b)
    for name, tensor in b.items():
        assert tensor.dtype == TORCH_DTYPES[dtype], name
        assert torch.equal(a[name], tensor), name
    for name in ["model.embed_tokens.weight", "model.layers.1.self_attn.k_norm.weight"]:
        assert_same(dump(single, name), b[name])


def test_dice_rounding_matches_torch(tmp_path: Path) -> None:
    # The same seed gives the same fp32 values, rounded to nearest even by dice; torch agrees.
    f32 = load_folder(random_model(tmp_path / "f32", "f32"))
    bf16 = load_folder(random_model(tmp_path / "bf16", "bf16"))
    f16 = load_folder(random_model(tmp_path / "f16", "f16"))
    for name, tensor in f32.items():
        assert torch.equal(tensor.to(torch.bfloat16), bf16[name]), name
        assert torch.equal(tensor.to(torch.float16), f16[name]), name


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_safetensors_files_open_in_dice(tmp_path: Path, dtype: str) -> None:
    model = random_model(tmp_path / "m", "f32")
    shapes = {t["name"]: t["shape"] for t in inspect(model)["tensors"]}
    torch.manual_seed(0)
    tensors = {n: torch.randn(s).to(TORCH_DTYPES[dtype]) for n, s in shapes.items()}
    tiny = torch.finfo(TORCH_DTYPES[dtype]).smallest_normal
    specials = [float("inf"), float("-inf"), float("nan"), -0.0, tiny, tiny / 4, 65504.0, 1 / 3]
    norm = tensors["model.norm.weight"]
    norm[: len(specials)] = torch.tensor(specials).to(norm.dtype)
    (model / "model.safetensors").unlink()
    save_file(tensors, model / "model.safetensors", metadata={"format": "pt"})

    described = inspect(model)
    assert {t["name"]: t["shape"] for t in described["tensors"]} == shapes
    assert {t["dtype"] for t in described["tensors"]} == {dtype.upper()}
    for name in ["model.norm.weight", "model.layers.0.mlp.down_proj.weight", "lm_head.weight"]:
        assert_same(dump(model, name), tensors[name])


@pytest.mark.parametrize("tie", [False, True])
def test_transformers_qwen3_checkpoints_open_in_dice(tmp_path: Path, tie: bool) -> None:
    transformers = pytest.importorskip("transformers")
    # An SDAR model needs a mask token inside the vocabulary (the default 151669 is not, here).
    config = transformers.Qwen3Config(
        vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, intermediate_size=128, tie_word_embeddings=tie,
        mask_token_id=511, block_size=4,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(tmp_path, max_shard_size="100KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    state = model.state_dict()
    described = inspect(tmp_path)
    names = {t["name"] for t in described["tensors"]}
    assert names == set(state) - ({"lm_head.weight"} if tie else set())
    assert described["config"]["tie_word_embeddings"] is tie
    assert described["config"]["mask_token_id"] == 511
    for name in ["model.embed_tokens.weight", "model.layers.1.self_attn.q_proj.weight"]:
        assert_same(dump(tmp_path, name), state[name])


def test_dice_random_checkpoint_loads_in_transformers(tmp_path: Path) -> None:
    # dice's tensor names and shapes are exactly Qwen3ForCausalLM's.
    transformers = pytest.importorskip("transformers")
    model_dir = random_model(tmp_path / "m", "bf16", "--max-shard-bytes", "100kb")
    config = json.loads((model_dir / "config.json").read_text())
    config.update(model_type="qwen3", architectures=["Qwen3ForCausalLM"])
    (model_dir / "config.json").write_text(json.dumps(config))
    model, info = transformers.Qwen3ForCausalLM.from_pretrained(
        model_dir, output_loading_info=True, dtype=torch.bfloat16
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    weights = load_folder(model_dir)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, weights[name]), name
