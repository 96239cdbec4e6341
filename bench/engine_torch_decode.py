"""The PyTorch side of issue 6's benchmark: the decoding `dice engine bench` times, written plainly
with transformers' Qwen3ForCausalLM (SDPA attention) and a StaticCache, batched.

N sequences of random prompt ids (the same ids as dice's: `--seed`) decode T new tokens each with
the static schedule (B denoising steps per block of B, low_confidence_static: the most confident
masked position each step), greedy, no stop ids; the store pass fused with the next block's first
step (one forward over [finished block | next block], block-causal) or run as its own forward.
Block rows' K/V go into the static cache at their positions (the next forward rewrites them), so
each forward writes at its first position: the cache's length is set before every forward.

One JSON record per configuration on stdout (tokens/s, forwards/s); with `--time-limit` a
configuration stops at the first block boundary after that many seconds and reports the rate of
the blocks it ran (a static cache attends over its whole length, so a forward costs the same early
and late).

    python3 bench/engine_torch_decode.py --model DIR --sequences 1,16 --new-tokens 1024
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from transformers import Qwen3ForCausalLM, StaticCache

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine" / "tests"))
from sdar_hf import qwen3_config  # noqa: E402


def load_model(model_dir: Path, device: str, dtype: torch.dtype) -> Qwen3ForCausalLM:
    """An SDAR checkpoint folder as Qwen3ForCausalLM with SDPA attention, on `device`."""
    config = qwen3_config(model_dir, "sdpa")
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(dtype)
    state: dict[str, torch.Tensor] = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        state.update({k: v.to(device=device, dtype=dtype) for k, v in load_file(f).items()})
    missing, unexpected = model.load_state_dict(state, strict=False)
    allowed_missing = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - allowed_missing or unexpected:
        raise ValueError(f"{model_dir}: missing {missing}, unexpected {unexpected}")
    if config.tie_word_embeddings:
        model.tie_weights()
    return model.eval()


def prompt_ids(n: int, length: int, vocab: int, mask_id: int, seed: int) -> list[list[int]]:
    """The random prompts of `dice engine bench` (its seed scheme is its own: only the shape must
    match; here numpy's generator)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, min(vocab, 151669), size=(n, length))
    ids[ids == mask_id] = 0
    return ids.tolist()


def schedule(masked: int, steps: int) -> list[int]:
    return [masked // steps + (1 if s < masked % steps else 0) for s in range(steps)]


class Decoder:
    """Batched block-diffusion decoding with the static schedule on one StaticCache."""

    def __init__(self, model: Qwen3ForCausalLM, n: int, max_len: int, block: int) -> None:
        self.model = model
        self.block = block
        self.max_len = max_len
        self.device = next(model.parameters()).device
        self.cache = StaticCache(config=model.config, max_cache_len=max_len)
        self.columns = torch.arange(max_len, device=self.device)
        self.forwards = 0

    @torch.no_grad()
    def forward(self, commit: torch.Tensor, block: torch.Tensor, start: int) -> torch.Tensor:
        """Logits [N, b, V] of `block` after `commit` (both [N, *]) at positions from `start`."""
        ids = torch.cat([commit, block], dim=1)
        q = ids.shape[1]
        c = commit.shape[1]
        for layer in self.cache.layers:
            layer.cumulative_length.fill_(start)
        positions = torch.arange(start, start + q, device=self.device)
        # Block-causal: commit rows see up to the end of their block, block rows everything.
        kv_len = torch.where(
            torch.arange(q, device=self.device) < c,
            (positions // self.block + 1) * self.block,
            torch.full_like(positions, start + q),
        )
        mask = (self.columns[None, :] < kv_len[:, None])[None, None]
        out = self.model(
            input_ids=ids,
            position_ids=positions[None].expand(ids.shape[0], -1),
            attention_mask=mask.expand(ids.shape[0], 1, q, self.max_len),
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=max(block.shape[1], 1),  # 0 would mean every row
        )
        self.forwards += 1
        return out.logits


@torch.no_grad()
def decode(
    model: Qwen3ForCausalLM,
    prompts: list[list[int]],
    new_tokens: int,
    block: int,
    fused: bool,
    mask_id: int,
    vocab_limit: int,
    time_limit: float,
) -> dict:
    """Decodes every prompt (all the same length) in lockstep; returns tokens and timings."""
    device = next(model.parameters()).device
    n, p = len(prompts), len(prompts[0])
    end = p + new_tokens
    max_len = (end + block - 1) // block * block
    dec = Decoder(model, n, max_len, block)
    seq = torch.tensor(prompts, device=device)
    start = p // block * block
    committed = 0
    generated = 0
    outputs: list[torch.Tensor] = []
    vocab = model.config.vocab_size
    banned = torch.zeros(vocab, dtype=torch.bool, device=device)
    banned[vocab_limit:] = True
    if mask_id < vocab:
        banned[mask_id] = True
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    while generated < new_tokens:
        blk = torch.full((n, block), mask_id, device=device)
        blk[:, : max(0, p - start)] = seq[:, start:p]
        masked0 = int((blk[0] == mask_id).sum())
        steps = schedule(masked0, block)
        if not fused and start > committed:  # the store pass (or the prefill) alone
            dec.forward(seq[:, committed:start], blk[:, :0], committed)
            committed = start
        for step in range(block):
            logits = dec.forward(seq[:, committed:start], blk, committed).float()
            committed = start
            logits[..., banned] = float("-inf")
            conf, tok = torch.softmax(logits, dim=-1).max(dim=-1)
            is_mask = blk == mask_id
            conf = torch.where(is_mask, conf, torch.full_like(conf, -1.0))
            k = steps[step] if step + 1 < block else block
            k = max(1, min(k, int(is_mask[0].sum())))
            if k > 0 and bool(is_mask.any()):
                order = torch.argsort(-conf, dim=1, stable=True)[:, :k]
                chosen = torch.zeros_like(is_mask).scatter_(1, order, True) & is_mask
                blk = torch.where(chosen, tok, blk)
            if not bool((blk == mask_id).any()):
                break
        seq = torch.cat([seq[:, :start], blk], dim=1)
        take = min(block - max(0, p - start), new_tokens - generated)
        outputs.append(blk[:, max(0, p - start) : max(0, p - start) + take])
        generated += take
        start += block
        # Whole blocks only (the check above synchronized): the rate covers what was timed.
        if time_limit > 0 and time.perf_counter() - t0 > time_limit:
            break
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    out = torch.cat(outputs, dim=1).tolist() if outputs else [[] for _ in range(n)]
    return {
        "output_ids": out,
        "seconds": seconds,
        "forwards": dec.forwards,
        "generated_per_sequence": generated,
        "complete": generated >= new_tokens,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--sequences", default="1,16,128")
    parser.add_argument("--new-tokens", default="1024,4096")
    parser.add_argument("--store", default="fused,unfused")
    parser.add_argument("--prompt-length", type=int, default=64)
    parser.add_argument("--block-length", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=0, help="seconds per configuration")
    parser.add_argument("--warmup-tokens", type=int, default=8)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--json", type=Path, help="also append the records to this file")
    parser.add_argument("--print-tokens", action="store_true", help="include output ids")
    args = parser.parse_args()
    cfg = json.loads((args.model / "config.json").read_text())
    mask_id = int(cfg.get("mask_token_id", 151669))
    vocab_limit = min(int(cfg["vocab_size"]), 151669)
    model = load_model(args.model, args.device, getattr(torch, args.dtype))
    for t in map(int, args.new_tokens.split(",")):  # the order of `dice engine bench`
        for n in map(int, args.sequences.split(",")):
            for store in args.store.split(","):
                prompts = prompt_ids(n, args.prompt_length, cfg["vocab_size"], mask_id, args.seed)
                run = dict(
                    block=args.block_length,
                    fused=store == "fused",
                    mask_id=mask_id,
                    vocab_limit=vocab_limit,
                )
                base = {
                    "implementation": "pytorch",
                    "torch": torch.__version__,
                    "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                    "model": str(args.model),
                    "sequences": n,
                    "new_tokens": t,
                    "prompt_length": args.prompt_length,
                    "fused_store": store == "fused",
                }
                try:
                    decode(model, prompts, min(t, args.warmup_tokens), time_limit=0, **run)
                    r = decode(model, prompts, t, time_limit=args.time_limit, **run)
                except torch.OutOfMemoryError as e:
                    line = json.dumps({**base, "error": f"out of memory: {e}"[:300]})
                    print(line, flush=True)
                    if args.json:
                        with args.json.open("a") as f:
                            f.write(line + "\n")
                    print(f"pytorch: {n} x {t} ({store}): out of memory", file=sys.stderr)
                    torch.cuda.empty_cache()
                    continue
                tokens = n * r["generated_per_sequence"]
                record = {
                    **base,
                    "seconds": r["seconds"],
                    "forwards": r["forwards"],
                    "output_tokens": tokens,
                    "complete": r["complete"],
                    "tokens_per_second": tokens / r["seconds"],
                    "forwards_per_second": r["forwards"] / r["seconds"],
                }
                if args.print_tokens:
                    record["output_ids"] = r["output_ids"]
                line = json.dumps(record)
                print(line, flush=True)
                if args.json:
                    with args.json.open("a") as f:
                        f.write(line + "\n")
                print(
                    f"pytorch: {n} x {t} ({store}): {r['seconds']:.2f} s, "
                    f"{tokens / r['seconds']:.1f} tokens/s, {r['forwards'] / r['seconds']:.1f} "
                    f"forwards/s{'' if r['complete'] else ' (stopped at the time limit)'}",
                    file=sys.stderr,
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
