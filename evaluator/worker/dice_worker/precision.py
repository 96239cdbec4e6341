"""Precision of a candidate against an fp64 run of the reference, beside the fp32 reference's own
error (RULES.md, ``precision.reduced``; system.md §4 item 7)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from .correctness import COMPARE_CHUNK, flatten

# A candidate whose relative RMS error against fp64 exceeds both of these is reported: fp32
# arithmetic in another order stays within a few times the reference's own error (and a long
# serial sum within ~1e-5); fp16, bf16 and TF32 arithmetic land near 1e-4 to 1e-3.
RATIO = 64.0
FLOOR = 5e-5


def to_double(values: Any) -> Any:
    """A copy of ``values`` with floating-point tensors as float64."""
    if isinstance(values, torch.Tensor):
        return values.double() if values.is_floating_point() else values.clone()
    if isinstance(values, (list, tuple)):
        return type(values)(to_double(v) for v in values)
    return values


def fp64_reference(reference: Any, inputs: Any) -> Any | None:
    """The reference's output in float64 (a deep copy of the model converted with ``.double()``,
    on float64 inputs), or None when the problem does not allow it (non-module references,
    operations without float64 kernels, explicit casts that fail)."""
    if not isinstance(reference, torch.nn.Module):
        return None
    try:
        model = copy.deepcopy(reference).double()
        with torch.no_grad():
            return model(*to_double(inputs))
    except Exception:  # noqa: BLE001 - any failure means: not available for this problem
        return None


def relative_rms(value: torch.Tensor, exact: torch.Tensor) -> float:
    """sqrt(sum (value - exact)^2 / sum exact^2) over finite positions, in float64 chunks."""
    v, e = value.reshape(-1), exact.reshape(-1)
    num = den = 0.0
    for start in range(0, e.numel(), COMPARE_CHUNK):
        vc = v[start : start + COMPARE_CHUNK].double()
        ec = e[start : start + COMPARE_CHUNK].double()
        finite = torch.isfinite(vc) & torch.isfinite(ec)
        num += float(torch.where(finite, (vc - ec) ** 2, 0).sum())
        den += float(torch.where(finite, ec**2, 0).sum())
    return (num / den) ** 0.5 if den > 0 else (0.0 if num == 0 else float("inf"))


@dataclass(frozen=True)
class PrecisionReport:
    """Relative RMS errors against fp64 (worst over fp32 outputs)."""

    candidate_error: float
    reference_error: float

    @property
    def reduced(self) -> bool:
        return self.candidate_error > max(RATIO * self.reference_error, FLOOR)

    def to_json(self) -> dict[str, float]:
        return {"candidate_error": self.candidate_error, "reference_error": self.reference_error}


def compare_precision(candidate: Any, reference: Any, exact: Any) -> PrecisionReport | None:
    """The errors of the candidate's and the reference's fp32 outputs against the fp64 output;
    None when there is no fp32 output to judge."""
    cand_err = ref_err = 0.0
    judged = False
    for c, r, e in zip(flatten(candidate), flatten(reference), flatten(exact), strict=False):
        if not all(isinstance(x, torch.Tensor) for x in (c, r, e)):
            continue
        if r.dtype != torch.float32 or c.shape != r.shape or e.shape != r.shape:
            continue
        judged = True
        cand_err = max(cand_err, relative_rms(c, e.to(c.device)))
        ref_err = max(ref_err, relative_rms(r, e.to(r.device)))
    return PrecisionReport(cand_err, ref_err) if judged else None
