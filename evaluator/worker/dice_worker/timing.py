"""Timing of one model call (PROTOCOL.md, "Timing"): milliseconds per call."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024


class Timer:
    """Times calls on one device. On CUDA: L2 flushed by writing a 256 MiB buffer, device
    synchronized, start event, call, then (protocol ``dice``) the whole device synchronized before
    the end event so work on any stream counts; protocol ``kernelbench`` records the end event on
    the current stream right after the call, as KernelBench does. On the CPU: perf_counter."""

    def __init__(self, device: torch.device, protocol: str) -> None:
        self.device = device
        self.protocol = protocol
        self._flush: torch.Tensor | None = None
        if device.type == "cuda":
            self._flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)

    def time_ms(self, fn: Callable[..., Any], args: list[Any]) -> float:
        """Milliseconds of one call ``fn(*args)``."""
        if self.device.type != "cuda":
            start = time.perf_counter()
            fn(*args)
            return (time.perf_counter() - start) * 1e3
        assert self._flush is not None
        self._flush.zero_()
        torch.cuda.synchronize(self.device)
        start_event = torch.cuda.Event(enable_timing=True)
        end_event = torch.cuda.Event(enable_timing=True)
        start_event.record()
        fn(*args)
        if self.protocol == "dice":
            torch.cuda.synchronize(self.device)
        end_event.record()
        end_event.synchronize()
        return float(start_event.elapsed_time(end_event))


class _EmptyModel(torch.nn.Module):
    """A model whose forward does nothing: what a timed call costs when there is no work."""

    def forward(self, *args: Any) -> None:
        return None


def empty_call_ms(timer: Timer, trials: int = 30) -> float:
    """Least milliseconds of ``trials`` timed calls to a model that does nothing, through the same
    call path as the timed reference and candidate (a wrapper that keeps the result, ``nn.Module``
    dispatch, this timer's flush, events and synchronisation): the fixed cost inside every
    measured time, which caps the speedup any candidate can show (``timing.launch_bound``,
    RULES.md). The least, not the median: host contention (compiles running beside the worker)
    adds noise on top of the fixed cost, and noise is ``timing.within_noise``'s business."""
    model = _EmptyModel()
    box: dict[str, Any] = {}

    def run(*args: Any) -> None:
        box["e"] = model(*args)

    with torch.no_grad():
        run()
        return min(timer.time_ms(run, []) for _ in range(trials))


def time_pair(
    timer: Timer,
    trial: int,
    candidate: Callable[..., Any],
    candidate_args: list[Any],
    reference: Callable[..., Any],
    reference_args: list[Any],
    cand: list[float],
    ref: list[float],
) -> None:
    """Times one candidate call and one reference call (protocol ``dice``), appending their ms to
    ``cand`` and ``ref``: the candidate first on even trials, the reference first on odd ones, so
    that neither always runs on the other's warm caches."""
    if trial % 2 == 0:
        cand.append(timer.time_ms(candidate, candidate_args))
        ref.append(timer.time_ms(reference, reference_args))
    else:
        ref.append(timer.time_ms(reference, reference_args))
        cand.append(timer.time_ms(candidate, candidate_args))


def time_models(
    timer: Timer,
    candidate: Callable[..., Any],
    reference: Callable[..., Any],
    candidate_args: list[Any],
    reference_args: list[Any],
    trials: int,
    warmup: int,
) -> tuple[list[float], list[float]]:
    """(candidate ms, reference ms), ``trials`` each. Protocol ``dice``: interleaved, order
    alternating between trials; ``kernelbench``: all candidate trials, then all reference trials
    (3 warm-ups each, as KernelBench)."""
    with torch.no_grad():
        if timer.protocol == "kernelbench":
            warmup = 3
            for _ in range(warmup):
                candidate(*candidate_args)
            cand = [timer.time_ms(candidate, candidate_args) for _ in range(trials)]
            for _ in range(warmup):
                reference(*reference_args)
            ref = [timer.time_ms(reference, reference_args) for _ in range(trials)]
            return cand, ref
        for _ in range(warmup):
            candidate(*candidate_args)
            reference(*reference_args)
        cand: list[float] = []
        ref: list[float] = []
        for t in range(trials):
            time_pair(timer, t, candidate, candidate_args, reference, reference_args, cand, ref)
        return cand, ref


def time_candidate(
    timer: Timer, candidate: Callable[..., Any], args: list[Any], trials: int, warmup: int
) -> list[float]:
    """Candidate ms alone (the reference's are stored): ``warmup`` calls, then ``trials`` timed
    calls (protocol ``kernelbench``: 3 warm-ups, as KernelBench)."""
    with torch.no_grad():
        for _ in range(3 if timer.protocol == "kernelbench" else warmup):
            candidate(*args)
        return [timer.time_ms(candidate, args) for _ in range(trials)]
