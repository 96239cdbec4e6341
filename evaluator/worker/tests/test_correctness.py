"""Output comparison: chunked comparison gives the same answer as a whole-tensor one."""

import math

import pytest
import torch
from dice_worker import correctness
from dice_worker.correctness import compare_outputs


@pytest.fixture
def tiny_chunks(monkeypatch):
    monkeypatch.setattr(correctness, "COMPARE_CHUNK", 7)


def test_matching_outputs_report_max_errors(tiny_chunks):
    r = torch.linspace(-1, 1, 100)
    c = r.clone()
    c[93] += 5e-5  # inside atol + rtol * |r|, in the last chunk
    result = compare_outputs(c, r)
    assert result.verdict is None
    assert math.isclose(result.max_abs_error, 5e-5, rel_tol=1e-2)


def test_outlier_in_a_later_chunk_is_found(tiny_chunks):
    r = torch.linspace(-1, 1, 100)
    c = r.clone()
    c[50] += 1e-2
    result = compare_outputs(c, r)
    assert result.verdict == "mismatch"
    assert "1 of 100 values" in result.reason
    assert math.isclose(result.max_abs_error, 1e-2, rel_tol=1e-3)


def test_nan_where_reference_is_finite_is_a_mismatch(tiny_chunks):
    r = torch.ones(30)
    c = r.clone()
    c[29] = float("nan")
    assert compare_outputs(c, r).verdict == "mismatch"
    r2 = r.clone()
    r2[29] = float("nan")
    assert compare_outputs(c, r2).verdict is None  # NaN where the reference has NaN


def test_multidimensional_non_contiguous_output(tiny_chunks):
    r = torch.randn(6, 5).t()
    assert compare_outputs(r.contiguous(), r).verdict is None
    bad = r.contiguous()
    bad[4, 5] += 1.0
    assert compare_outputs(bad, r).verdict == "mismatch"
