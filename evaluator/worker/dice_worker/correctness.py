"""Output comparison of the correctness protocol (PROTOCOL.md, "Correctness")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


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
    wide = torch.float64 if r.dtype == torch.float64 else torch.float32
    cf, rf = c.to(wide), r.to(wide)
    r_finite = torch.isfinite(rf)
    c_finite = torch.isfinite(cf)
    # Non-finite values are accepted only where the reference has the same one.
    same_nonfinite = (torch.isnan(cf) & torch.isnan(rf)) | (cf == rf)
    bad_nonfinite = (~c_finite | ~r_finite) & ~same_nonfinite
    finite = c_finite & r_finite
    diff = torch.where(finite, (cf - rf).abs(), torch.zeros_like(rf))
    rel = diff / (rf.abs() + 1e-8)
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float(rel.max()) if rel.numel() else 0.0
    n_bad_nonfinite = int(bad_nonfinite.sum())
    if n_bad_nonfinite:
        return Comparison(
            "mismatch",
            f"{n_bad_nonfinite} NaN/Inf values where the reference has none",
            max_abs,
            max_rel,
        )
    outside = (diff > atol + rtol * rf.abs()) & finite
    n_outside = int(outside.sum())
    if n_outside:
        return Comparison(
            "mismatch",
            f"{n_outside} of {r.numel()} values differ beyond atol={atol} rtol={rtol} "
            f"(max abs error {max_abs:.3g}, max rel error {max_rel:.3g})",
            max_abs,
            max_rel,
        )
    return Comparison(None, "", max_abs, max_rel)


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
