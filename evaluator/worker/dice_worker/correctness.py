"""Output comparison of the correctness protocol (PROTOCOL.md, "Correctness")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

# Elements compared at once: bounds the comparison's own memory (a few temporaries of this many
# fp32/fp64 values) whatever the output's size.
COMPARE_CHUNK = 1 << 24


@dataclass
class Comparison:
    """Outcome of comparing a candidate's output with the reference's. ``verdict`` is None when
    they match; errors are over finite positions (max |c - r| and max |c - r| / (|r| + 1e-8))."""

    verdict: str | None
    reason: str
    max_abs_error: float
    max_rel_error: float


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(atol, rtol): 1e-4 for fp32/fp64, 1e-2 for fp16/bf16, exact for integers and bool."""
    if dtype in (torch.float16, torch.bfloat16):
        return 1e-2, 1e-2
    if dtype.is_floating_point or dtype.is_complex:
        return 1e-4, 1e-4
    return 0.0, 0.0


def flatten(output: Any) -> list[Any]:
    """Leaves of a (nested) tuple/list output, in order."""
    if isinstance(output, (tuple, list)):
        return [leaf for item in output for leaf in flatten(item)]
    return [output]


def _compare_tensors(c: torch.Tensor, r: torch.Tensor) -> Comparison:
    if c.shape != r.shape:
        return Comparison(
            "wrong_shape", f"output shape {tuple(c.shape)}, expected {tuple(r.shape)}", 0, 0
        )
    if c.dtype != r.dtype:
        return Comparison("wrong_dtype", f"output dtype {c.dtype}, expected {r.dtype}", 0, 0)
    atol, rtol = tolerance(r.dtype)
    if c.device != r.device:
        c = c.to(r.device)
    if not r.dtype.is_floating_point:
        equal = bool(torch.equal(c, r))
        diff = 0.0 if equal else float((c.double() - r.double()).abs().max())
        return Comparison(None if equal else "mismatch", "" if equal else "values differ", diff, 0)
    n_bad_nonfinite = n_outside = 0
    max_abs = max_rel = 0.0
    c_flat, r_flat = c.reshape(-1), r.reshape(-1)
    for start in range(0, r_flat.numel(), COMPARE_CHUNK):
        chunk = _compare_chunk(
            c_flat[start : start + COMPARE_CHUNK], r_flat[start : start + COMPARE_CHUNK], atol, rtol
        )
        n_bad_nonfinite += chunk[0]
        n_outside += chunk[1]
        max_abs = max(max_abs, chunk[2])
        max_rel = max(max_rel, chunk[3])
    if n_bad_nonfinite:
        return Comparison(
            "mismatch",
            f"{n_bad_nonfinite} NaN/Inf values where the reference has none",
            max_abs,
            max_rel,
        )
    if n_outside:
        return Comparison(
            "mismatch",
            f"{n_outside} of {r.numel()} values differ beyond atol={atol} rtol={rtol} "
            f"(max abs error {max_abs:.3g}, max rel error {max_rel:.3g})",
            max_abs,
            max_rel,
        )
    return Comparison(None, "", max_abs, max_rel)


def _compare_chunk(
    c: torch.Tensor, r: torch.Tensor, atol: float, rtol: float
) -> tuple[int, int, float, float]:
    """(non-finite values where the reference has another value, finite values outside
    atol + rtol * |r|, max abs error, max rel error) of two flat floating-point chunks."""
    wide = torch.float64 if r.dtype == torch.float64 else torch.float32
    cf, rf = c.to(wide), r.to(wide)
    finite = torch.isfinite(cf) & torch.isfinite(rf)
    # Non-finite values are accepted only where the reference has the same one.
    same_nonfinite = (torch.isnan(cf) & torch.isnan(rf)) | (cf == rf)
    n_bad_nonfinite = int(torch.count_nonzero(~finite & ~same_nonfinite))
    diff = torch.where(finite, (cf - rf).abs(), torch.zeros_like(rf))
    rel = diff / (rf.abs() + 1e-8)
    n_outside = int(torch.count_nonzero((diff > atol + rtol * rf.abs()) & finite))
    if diff.numel() == 0:
        return n_bad_nonfinite, n_outside, 0.0, 0.0
    return n_bad_nonfinite, n_outside, float(diff.max()), float(rel.max())


def compare_outputs(candidate: Any, reference: Any) -> Comparison:
    """Compares outputs leaf by leaf: same structure, then per tensor shape, dtype and values."""
    c_leaves, r_leaves = flatten(candidate), flatten(reference)
    if len(c_leaves) != len(r_leaves):
        return Comparison(
            "wrong_output", f"{len(c_leaves)} outputs, expected {len(r_leaves)}", 0, 0
        )
    worst = Comparison(None, "", 0.0, 0.0)
    for i, (c, r) in enumerate(zip(c_leaves, r_leaves, strict=True)):
        if isinstance(r, torch.Tensor):
            if not isinstance(c, torch.Tensor):
                return Comparison(
                    "wrong_output", f"output {i} is {type(c).__name__}, expected a Tensor", 0, 0
                )
            result = _compare_tensors(c, r)
        else:
            equal = type(c) is type(r) and c == r
            result = Comparison(
                None if equal else "wrong_output", "" if equal else f"output {i} differs", 0, 0
            )
        if result.verdict is not None:
            return result
        worst = Comparison(
            None,
            "",
            max(worst.max_abs_error, result.max_abs_error),
            max(worst.max_rel_error, result.max_rel_error),
        )
    return worst
