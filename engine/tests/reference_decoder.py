"""An independent reference of SDAR block-diffusion decoding, written from system.md §2.

Plain Python and torch, for tests: every denoising step recomputes the whole sequence (prompt,
finished blocks, the current block) with Hugging Face's Qwen3ForCausalLM under the block-causal
mask; no KV cache, no fusion. Sampling follows the procedure documented at the top of
engine/include/dice/engine/sampling.h (Philox4x32-10 counter-based randomness), so tokens and the
decoding trace can be compared exactly with `dice generate --json`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from sdar_hf import qwen3_config
from transformers import Qwen3ForCausalLM
from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding

M32 = 0xFFFFFFFF


def philox4x32_10(counter: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, ...]:
    """Philox4x32-10 (Salmon et al., SC 2011)."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & M32, (p0 >> 32) ^ c3 ^ k1, p0 & M32
    return c0, c1, c2, c3


def uniform(seed: int, position: int, step: int) -> float:
    """The sampling uniform of (seed, absolute position, denoising step within the block)."""
    out = philox4x32_10(
        (position & M32, (position >> 32) & M32, step & M32, 0), (seed & M32, (seed >> 32) & M32)
    )
    return out[0] / 2.0**32


def load_model(model_dir: Path) -> Qwen3ForCausalLM:
    """An SDAR checkpoint folder as Hugging Face's Qwen3ForCausalLM, fp32, eager attention."""
    config = qwen3_config(model_dir, "eager")
    with torch.device("meta"):  # no second copy of the weights: the state dict is assigned
        model = Qwen3ForCausalLM(config)
    state: dict[str, torch.Tensor] = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        state.update({k: v.float() for k, v in load_file(f).items()})
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    allowed_missing = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - allowed_missing or unexpected:
        raise ValueError(f"{model_dir}: missing {missing}, unexpected {unexpected}")
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    model.model.rotary_emb = Qwen3RotaryEmbedding(config)  # buffers, not in the state dict
    on_meta = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if on_meta:
        raise ValueError(f"{model_dir}: not loaded: {on_meta}")
    return model.eval()


def block_causal_mask(n: int, block: int) -> torch.Tensor:
    """Additive [1, 1, n, n] mask: row i sees column j iff j // block <= i // block."""
    blocks = torch.arange(n) // block
    allowed = blocks[None, :] <= blocks[:, None]
    mask = torch.zeros(n, n)
    mask[~allowed] = float("-inf")
    return mask[None, None]


@torch.no_grad()
def logits(model: Qwen3ForCausalLM, ids: list[int], block: int, rows: slice) -> np.ndarray:
    """fp32 logits [len(rows), vocab] of the full sequence `ids` under the block-causal mask."""
    x = torch.tensor([ids])
    out = model.model(
        input_ids=x,
        attention_mask=block_causal_mask(len(ids), block),
        position_ids=torch.arange(len(ids))[None],
        use_cache=False,
    )
    return model.lm_head(out.last_hidden_state[0, rows]).float().numpy()


@dataclass
class Options:
    block_length: int = 4
    steps: int = 4
    strategy: str = "low_confidence_dynamic"
    threshold: float = 0.9
    entropy_bound: float = 0.35
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    max_new_tokens: int = 64
    stop_ids: tuple[int, ...] = (151645, 151643)
    mask_id: int = 151669
    vocab_limit: int = 151670
    fused_store: bool = True


@dataclass
class Result:
    output_ids: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    forwards: list[int] = field(default_factory=list)
    stop_reason: str = "length"
    forward_count: int = 0


def propose(row: np.ndarray, o: Options, position: int, step: int) -> tuple[int, float, float]:
    """(token, confidence, entropy) of one logit row, as sampling.h specifies."""
    lim = min(len(row), o.vocab_limit)
    allowed = np.ones(lim, dtype=bool)
    if o.mask_id < lim:
        allowed[o.mask_id] = False
    ids = np.nonzero(allowed)[0]
    lg = row[:lim][allowed].astype(np.float64)
    m = lg.max()
    w1 = np.exp(lg - m)
    s = w1.sum()
    p = w1 / s
    entropy = float(-(p[p > 0] * np.log(p[p > 0])).sum())
    if o.temperature <= 0:
        j = int(np.argmax(lg))  # first maximum: lowest id
    else:
        w = np.exp((lg - m) / o.temperature)
        kept = np.ones(len(ids), dtype=bool)
        if (0 < o.top_k < len(ids)) or o.top_p < 1:
            order = np.lexsort((ids, -row[:lim][allowed]))  # logit desc, id asc
            keep = o.top_k if 0 < o.top_k < len(ids) else len(ids)
            if o.top_p < 1:
                cum = np.cumsum(w[order[:keep]])
                keep = int(np.searchsorted(cum, o.top_p * cum[-1], side="left")) + 1
                keep = min(keep, len(cum))
            kept[:] = False
            kept[order[:keep]] = True
        cum = np.cumsum(np.where(kept, w, 0.0))
        target = uniform(o.seed, position, step) * cum[-1]
        hits = np.nonzero((cum > target) & kept)[0]
        j = int(hits[0]) if len(hits) else int(np.nonzero(kept)[0][-1])
    confidence = float(np.float32(p[j]))
    return int(ids[j]), confidence, float(np.float32(entropy))


def schedule(masked: int, steps: int) -> list[int]:
    return [masked // steps + (1 if s < masked % steps else 0) for s in range(steps)]


def choose(
    o: Options, masked: list[int], props: list[tuple[int, float, float]], k: int, last: bool
) -> list[int]:
    """Block positions to unmask (system.md §2 step 2); ties go to the lower position."""
    if not masked:
        return []
    if last:
        return sorted(masked)
    k = max(1, min(k, len(masked)))
    by_conf = sorted(masked, key=lambda i: (-props[i][1], i))
    if o.strategy == "sequential":
        return sorted(masked)[:k]
    if o.strategy == "low_confidence_static":
        return sorted(by_conf[:k])
    if o.strategy == "low_confidence_dynamic":
        above = [i for i in masked if props[i][1] > o.threshold]
        return sorted(above if len(above) >= k else by_conf[:k])
    if o.strategy == "entropy_bounded":
        chosen, total = [], 0.0
        for i in sorted(masked, key=lambda i: (props[i][2], i)):
            total += props[i][2]
            if chosen and total >= o.entropy_bound:
                break
            chosen.append(i)
        return sorted(chosen)
    raise ValueError(o.strategy)


def generate(model: Qwen3ForCausalLM, prompt: list[int], o: Options) -> Result:
    """Block-diffusion decoding with full recomputation at every step."""
    b, p_len = o.block_length, len(prompt)
    res = Result()
    if o.max_new_tokens == 0:
        return res
    seq = list(prompt)
    start = p_len // b * b
    forward = 1 if (start > 0 and not o.fused_store) else 0  # a separate prefill forward
    while True:
        seq += [o.mask_id] * (start + b - len(seq))
        masked0 = [i for i in range(b) if seq[start + i] == o.mask_id]
        sched = schedule(len(masked0), o.steps)
        trace: dict[int, tuple[int, int]] = {}
        for step in range(o.steps):
            rows = logits(model, seq[: start + b], b, slice(start, start + b))
            props = [propose(rows[i], o, start + i, step) for i in range(b)]
            masked = [i for i in range(b) if seq[start + i] == o.mask_id]
            for i in choose(o, masked, props, sched[step], step == o.steps - 1):
                seq[start + i] = props[i][0]
                trace[start + i] = (step, forward)
            forward += 1
            decided = None
            for q in range(max(start, p_len), start + b):
                if seq[q] == o.mask_id:
                    decided = "undecided"
                    break
                if seq[q] in o.stop_ids:
                    decided = ("stop", q)
                    break
                if q - p_len + 1 >= o.max_new_tokens:
                    decided = ("length", q)
                    break
            if decided == "undecided":
                continue
            for q in range(max(start, p_len), start + b if decided is None else decided[1] + 1):
                res.output_ids.append(seq[q])
                res.steps.append(trace[q][0])
                res.forwards.append(trace[q][1])
            if decided is not None:
                res.stop_reason = decided[0]
                res.forward_count = forward
                return res
            break
        start += b
        if not o.fused_store:
            forward += 1  # the store pass of the finished block


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / ||b||."""
    return float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), math.ulp(1.0)))
