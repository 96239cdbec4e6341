"""An SDAR checkpoint's config.json as transformers' Qwen3Config (SDAR shares Qwen3's layers;
system.md §2): the one mapping used by the reference decoder (engine/tests/reference_decoder.py)
and the PyTorch side of the CUDA benchmark (bench/engine_torch_decode.py)."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import Qwen3Config


def qwen3_config(model_dir: Path, attention: str) -> Qwen3Config:
    """Qwen3Config of `model_dir`/config.json with `attention` ("eager" or "sdpa") as its
    attention implementation. Raises FileNotFoundError without config.json and KeyError when a
    required field (vocab_size, hidden_size, intermediate_size, num_hidden_layers,
    num_attention_heads, num_key_value_heads) is missing."""
    cfg = json.loads((model_dir / "config.json").read_text())
    config = Qwen3Config(
        vocab_size=cfg["vocab_size"],
        hidden_size=cfg["hidden_size"],
        intermediate_size=cfg["intermediate_size"],
        num_hidden_layers=cfg["num_hidden_layers"],
        num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=cfg["num_key_value_heads"],
        head_dim=cfg.get("head_dim", 128),
        rope_parameters={"rope_type": "default", "rope_theta": float(cfg.get("rope_theta", 1e6))},
        rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
        tie_word_embeddings=cfg.get("tie_word_embeddings", False),
        max_position_embeddings=cfg.get("max_position_embeddings", 32768),
        attention_bias=False,
    )
    config._attn_implementation = attention
    return config
