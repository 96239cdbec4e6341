"""The dynamic defences of one request (evaluator/RULES.md): serve.py calls a Guard at fixed
points of the correctness and timing protocols; the Guard runs the checks the request's policy
turned on and raises ``Rejected`` when a rule whose action is reject fires."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .correctness import compare_outputs, flatten
from .dynamic_checks import (
    Rejected,
    Rules,
    ThreadSnapshot,
    alias_pairs,
    alias_problem,
    changed_inputs,
    clone_values,
    output_type_problem,
    poison_,
    poison_free_memory,
    tensors,
    thread_snapshot,
    threads_problem,
    unwritten_problem,
)
from .kernels import classify, own_kernel_names, profile_forward
from .precision import compare_precision, fp64_reference, to_double
from .timing import Timer, time_pair

MakeInputs = Callable[[int], Any]
Run = Callable[[Any], Any]

# Rules that need the problem's profile (analyze_problem).
_PROFILE_RULES = (
    "problem.degenerate",
    "dynamic.input_mutation",
    "dynamic.output_alias",
    "dynamic.output_type",
    "dynamic.unwritten_output",
)
_PRECISION_INPUT_LIMIT = 1 << 30  # bytes of inputs above which the fp64 run is skipped

__all__ = ["Guard", "Rejected", "analyze_problem"]


def _nbytes(values: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors(values))


def analyze_problem(make_inputs: MakeInputs, run: Run, seeds: list[int]) -> dict[str, Any]:
    """What the problem's reference does, computed once per problem (RULES.md): which inputs it
    mutates, which outputs alias inputs, whether its output is degenerate (near zero: all zeros
    pass; near constant: the first seed's output passes for every other seed; independent of an
    input: replacing that input by another draw changes nothing beyond the tolerance)."""
    inputs0 = make_inputs(seeds[0])
    pristine = clone_values(inputs0)
    out0 = run(inputs0)
    profile: dict[str, Any] = {
        "mutates_inputs": changed_inputs(inputs0, pristine),
        "aliases": sorted([list(p) for p in alias_pairs(out0, inputs0)]),
        "tensor_outputs": [isinstance(x, torch.Tensor) for x in flatten(out0)],
        "output_bytes": _nbytes(out0),
        "input_bytes": _nbytes(pristine),
    }
    del inputs0
    degenerate: list[str] = []
    zeros = [torch.zeros_like(x) if isinstance(x, torch.Tensor) else x for x in flatten(out0)]
    if any(isinstance(x, torch.Tensor) for x in zeros) and (
        compare_outputs(zeros, flatten(out0)).verdict is None
    ):
        degenerate.append("near zero: an all-zero output passes")
    constant = len(seeds) > 1 and not degenerate  # zero is a constant: one reason suffices
    other = None
    for s in seeds[1:] if not degenerate else []:
        inputs_s = make_inputs(s)
        if other is None:
            other = clone_values(inputs_s)
        if compare_outputs(out0, run(inputs_s)).verdict is not None:
            constant = False
            break
    if constant:
        degenerate.append(f"near constant: one output passes for all {len(seeds)} seeds")
    elif not degenerate and other is not None and isinstance(pristine, (list, tuple)):
        for i, (a, b) in enumerate(zip(pristine, other, strict=False)):
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                continue
            if a.shape != b.shape or torch.equal(a, b):
                continue
            mixed = list(clone_values(pristine))
            mixed[i] = b.clone()
            if compare_outputs(out0, run(type(pristine)(mixed))).verdict is None:
                degenerate.append(f"independent of input {i}: another draw of it passes")
    profile["degenerate"] = degenerate
    return profile


class Guard:
    """The dynamic checks of one request. ``problem_cache`` keeps problem profiles across
    requests of the worker (keyed by the problem's content-named path)."""

    def __init__(
        self,
        request: dict[str, Any],
        device: torch.device,
        problem_cache: dict[str, dict[str, Any]],
    ) -> None:
        options = request.get("options", {})
        self.rules = Rules(options)
        self.device = device
        self.protocol = options.get("protocol", "dice")
        self.cache = problem_cache
        self.problem_path = str(request["problem"]["path"])
        candidate = request.get("candidate", {})
        self.kernels: list[str] = list(candidate.get("kernels") or [])
        self.libraries = [Path(p) for p in (candidate.get("extensions") or {}).values()]
        self.profile: dict[str, Any] = {}
        self.checks: dict[str, Any] = {}
        self.previous: Any = None
        self.threads: ThreadSnapshot | None = None
        self.inputs64: Any = None

    @property
    def active(self) -> bool:
        return bool(self.rules.actions)

    def on(self, rule: str) -> bool:
        return self.rules.on(rule)

    def check_code(self, path: Path, expected_sha256: str | None) -> None:
        """The candidate's code must be what the static rules judged (a candidate run without
        the sandbox could rewrite its file while it was captured)."""
        if expected_sha256 and self.rules.actions:
            actual = hashlib.sha256(path.read_bytes()).hexdigest()
            if actual != expected_sha256:
                self.rules.fire(
                    "sandbox.code_changed",
                    f"{path.name} changed after the static rules ran (sha256 {actual[:12]}, "
                    f"expected {expected_sha256[:12]})",
                )

    # -- before the trials -----------------------------------------------------------------
    def prepare(self, make_inputs: MakeInputs, run_reference: Run, seeds: list[int]) -> None:
        """Profiles the problem (cached), fires problem.degenerate, takes the thread baseline."""
        if any(self.on(r) for r in _PROFILE_RULES):
            if self.problem_path not in self.cache:
                self.cache[self.problem_path] = analyze_problem(
                    make_inputs, run_reference, seeds[:3] if len(seeds) >= 3 else seeds + [7, 11]
                )
            self.profile = self.cache[self.problem_path]
            if self.profile["degenerate"]:
                self.rules.fire("problem.degenerate", "; ".join(self.profile["degenerate"]))
        if self.on("dynamic.threads"):
            self.threads = thread_snapshot()

    # -- each correctness trial ------------------------------------------------------------
    def before_candidate(self) -> None:
        """Poisons the allocator's free memory so that unwritten outputs show."""
        if self.on("dynamic.unwritten_output"):
            reserve = 2 * int(self.profile.get("output_bytes", 0)) + (64 << 20)
            self.checks["poisoned_bytes"] = poison_free_memory(self.device, reserve)

    def after_candidate(self, output: Any, candidate_inputs: Any, pristine_inputs: Any) -> None:
        """Output types, aliasing, input mutation: before the reference runs."""
        if self.on("dynamic.output_type"):
            expected = self.profile.get("tensor_outputs")
            reference = (
                [torch.empty(0) if t else None for t in expected] if expected else tensors(output)
            )
            if why := output_type_problem(output, reference, self.device):
                self.rules.fire("dynamic.output_type", why)
        if self.on("dynamic.output_alias"):
            allowed = {tuple(p) for p in self.profile.get("aliases", [])}
            if why := alias_problem(output, candidate_inputs, allowed, self.previous):
                self.rules.fire("dynamic.output_alias", why)
        if self.on("dynamic.input_mutation"):
            allowed_mutation = set(self.profile.get("mutates_inputs", []))
            changed = [
                i
                for i in changed_inputs(candidate_inputs, pristine_inputs)
                if i not in allowed_mutation
            ]
            if changed:
                self.rules.fire(
                    "dynamic.input_mutation",
                    f"input(s) {changed} changed by the candidate; the reference leaves them as they are",
                )
        if (
            self.on("precision.reduced")
            and self.inputs64 is None
            and "precision" not in self.checks
        ):
            if int(self.profile.get("input_bytes", 0)) <= _PRECISION_INPUT_LIMIT:
                self.inputs64 = to_double(pristine_inputs)

    def after_reference(self, output: Any, reference_output: Any, reference: Any) -> None:
        """Unwritten outputs (poison left), precision against fp64 (first trial only)."""
        if self.on("dynamic.unwritten_output"):
            if why := unwritten_problem(output, reference_output):
                self.rules.fire("dynamic.unwritten_output", why)
        if self.inputs64 is not None and "precision" not in self.checks:
            exact = fp64_reference(reference, self.inputs64)
            self.inputs64 = None
            report = (
                compare_precision(output, reference_output, exact) if exact is not None else None
            )
            self.checks["precision"] = report.to_json() if report else None
            if report is not None and report.reduced:
                self.rules.fire(
                    "precision.reduced",
                    f"relative RMS error {report.candidate_error:.2e} against fp64, the fp32 "
                    f"reference's own is {report.reference_error:.2e}",
                )

    def end_trial(self, output: Any, reference_output: Any) -> None:
        """Keeps the candidate's output (a later call must not return its memory) and poisons
        the reference's output before it is freed."""
        self.previous = output if self.on("dynamic.output_alias") else None
        if self.on("dynamic.unwritten_output") and self.device.type == "cuda":
            for t in tensors(reference_output):
                poison_(t)

    # -- after the trials ------------------------------------------------------------------
    def check_threads(self, when: str) -> None:
        if self.threads is not None:
            if why := threads_problem(self.threads, thread_snapshot()):
                self.rules.fire("dynamic.threads", f"{when}: {why}")

    def time_fresh(
        self,
        timer: Timer,
        model: Any,
        reference: Any,
        make_inputs: MakeInputs,
        seed: int,
        trials: int,
        warmup: int,
        time_reference: bool = True,
    ) -> tuple[list[float], list[float]]:
        """Protocol ``dice`` timing with fresh inputs for every timed pair (system.md §4 items 4
        and 10): each trial draws new inputs (seed + trial), times candidate and reference on
        their own copies (order alternating), then checks the candidate's output against the
        reference's: a cached, stale or deferred result fires dynamic.stale_output. Without
        ``time_reference`` (its samples are stored) the reference still runs, untimed, for the
        check, and the reference list comes back empty."""
        cand_ms: list[float] = []
        ref_ms: list[float] = []
        box: dict[str, Any] = {}

        def run_candidate(*args: Any) -> None:
            box["c"] = model(*args)

        def run_reference(*args: Any) -> None:
            box["r"] = reference(*args)

        with torch.no_grad():
            inputs = make_inputs(seed)
            for _ in range(warmup):
                model(*clone_values(inputs))
                if time_reference:
                    reference(*clone_values(inputs))
            del inputs
            self.previous = None
            for t in range(trials):
                inputs = make_inputs((seed * 1_000_003 + t + 1) % (2**32 - 1))
                cand_inputs = clone_values(inputs)
                if not time_reference:
                    cand_ms.append(timer.time_ms(run_candidate, cand_inputs))
                    run_reference(*inputs)
                else:
                    time_pair(
                        timer, t, run_candidate, cand_inputs, run_reference, inputs, cand_ms, ref_ms
                    )
                if self.on("dynamic.output_alias"):
                    allowed = {tuple(p) for p in self.profile.get("aliases", [])}
                    if why := alias_problem(box["c"], cand_inputs, allowed, self.previous):
                        if "earlier call" in why:
                            self.rules.fire("dynamic.output_alias", f"timed call {t + 1}: {why}")
                comparison = compare_outputs(box["c"], box["r"])
                if comparison.verdict is not None:
                    self.rules.fire(
                        "dynamic.stale_output",
                        f"timed call {t + 1} (fresh inputs): {comparison.reason}",
                    )
                self.previous = box.pop("c") if self.on("dynamic.output_alias") else None
                box.clear()
                del inputs, cand_inputs
        self.previous = None
        return cand_ms, ref_ms

    def check_kernels(self, model: Any, make_inputs: MakeInputs, seed: int) -> None:
        """Profiles one forward on fresh inputs and judges whose kernels did the work."""
        if self.device.type != "cuda" or not (
            self.on("dynamic.foreign_kernels") or self.on("dynamic.no_own_kernel")
        ):
            return
        own, note = own_kernel_names(self.kernels, self.libraries, torch._C._demangle)
        if note:
            self.rules.notes.append(note)
        inputs = make_inputs(seed)
        try:
            with torch.no_grad():
                events = profile_forward(lambda: model(*inputs))
        except Exception as e:  # noqa: BLE001 - a profiler failure is a note, never a verdict
            self.rules.notes.append(f"kernel profile unavailable: {type(e).__name__}: {e}"[:300])
            return
        share = classify(events, own)
        self.checks["kernels"] = share.to_json()
        if share.own_us == 0:
            self.rules.fire(
                "dynamic.no_own_kernel",
                f"none of the candidate's kernels ({', '.join(sorted(self.kernels))[:80] or 'none declared'}) "
                f"ran in a forward; {len(events)} GPU activities ran",
            )
        if share.foreign_share > self.rules.foreign_share_limit:
            top = ", ".join(n[:60] for n, _ in sorted(share.foreign, key=lambda x: -x[1])[:3])
            self.rules.fire(
                "dynamic.foreign_kernels",
                f"{share.foreign_share:.0%} of GPU time in kernels that are not the candidate's "
                f"(limit {self.rules.foreign_share_limit:.0%}): {top}",
            )

    def result(self) -> dict[str, Any]:
        """What goes into the result event: findings, the problem's profile, the checks' data."""
        out: dict[str, Any] = {"findings": self.rules.findings}
        if self.profile:
            out["problem"] = {
                "degenerate": self.profile["degenerate"],
                "mutates_inputs": self.profile["mutates_inputs"],
            }
        if self.checks or self.rules.notes:
            out["checks"] = {**self.checks, "notes": self.rules.notes}
        return out
