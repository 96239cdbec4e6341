"""The long-lived worker: JSON-lines requests on stdin, events on a private copy of stdout
(PROTOCOL.md, ``serve``). One worker per device; a candidate that breaks the CUDA context makes it
exit after answering."""

from __future__ import annotations

import gc
import json
import os
import random
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import torch
from torch.utils import cpp_extension

from .capture import _REAL_LOAD_INLINE, replaced_load_inline
from .correctness import compare_outputs, tolerance
from .dynamic_checks import Rejected, clone_values
from .guard import Guard
from .loader import PrebuiltLoadInline, exec_module
from .timing import Timer, empty_call_ms, time_candidate, time_models
from .versions import software_versions

Emit = Callable[[dict[str, Any]], None]


class Verdict(Exception):
    """Ends a request with ``verdict``; ``fatal`` when the CUDA context is unusable."""

    def __init__(self, verdict: str, reason: str, fatal: bool = False) -> None:
        super().__init__(reason)
        self.verdict = verdict
        self.reason = reason
        self.fatal = fatal


def _describe(e: BaseException, limit: int = 1500) -> str:
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-4:])
    return f"{type(e).__name__}: {e}"[:limit] + ("\n" + tb[-limit:] if tb else "")


def _context_broken(device: torch.device) -> bool:
    if device.type != "cuda":
        return False
    try:
        torch.cuda.synchronize(device)
        return False
    except Exception:  # noqa: BLE001 - any failure here means the context is gone
        return True


def _fail(verdict: str, what: str, e: BaseException, device: torch.device) -> Verdict:
    if isinstance(e, (torch.cuda.OutOfMemoryError, MemoryError)) or (
        isinstance(e, RuntimeError) and "can't allocate memory" in str(e)
    ):
        return Verdict("out_of_memory", f"{what}: {_describe(e)}")
    broken = _context_broken(device)
    if broken and verdict == "reference_error":
        verdict = "runtime_error"  # the candidate ran before and broke the context
    return Verdict(verdict, f"{what}: {_describe(e)}", fatal=broken)


def _to_device(values: Any, device: torch.device) -> Any:
    if isinstance(values, torch.Tensor):
        return values.to(device)
    if isinstance(values, (list, tuple)):
        return type(values)(_to_device(v, device) for v in values)
    return values


def _generate(make: Callable[[], Any], device: torch.device, protocol: str) -> Any:
    """Calls a problem's ``get_inputs``/``get_init_inputs`` and moves the tensors to ``device``.
    Protocol ``dice`` on a GPU creates them there directly (``torch.device`` as the default
    device): KernelBench's largest inputs (4096 x 393216 floats) take seconds to draw on the CPU
    and milliseconds on the GPU. Protocol ``kernelbench`` draws on the CPU, as KernelBench does."""
    if protocol == "kernelbench" or device.type != "cuda":
        return _to_device(make(), device)
    with device:
        return _to_device(make(), device)


def _seed_all(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:
        pass


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def evaluate(
    request: dict[str, Any],
    device: torch.device,
    timer: Timer,
    emit: Emit,
    problem_cache: dict[str, dict[str, Any]] | None = None,
) -> bool:
    """Runs one request: load, correctness trials, timing, with the dynamic checks of its policy
    (guard.py); emits stage events and the result. Returns True when the device is unusable
    afterwards (the worker must exit)."""
    rid = request["id"]
    opts = request.get("options", {})
    protocol = opts.get("protocol", "dice")
    guard = Guard(request, device, {} if problem_cache is None else problem_cache)
    # The reference computes in true fp32 under protocol dice (PROTOCOL.md); KernelBench leaves
    # cuDNN's TF32 on. Reset for every request: a candidate may have changed them.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = protocol == "kernelbench"
    seed = int(opts.get("seed", 42))
    trials_wanted = int(opts.get("correct_trials", 5))
    result: dict[str, Any] = {"event": "result", "id": rid, "reasons": [], "fatal": False}
    trials: list[dict[str, Any]] = []
    correctness: dict[str, Any] = {"trials": trials}
    result["correctness"] = correctness
    timer.protocol = protocol
    models: list[Any] = []
    prebuilt: PrebuiltLoadInline | None = None
    try:
        emit({"event": "stage", "id": rid, "stage": "load"})
        try:
            problem = exec_module(Path(request["problem"]["path"]), f"dice_problem_{rid}")
            model_cls = problem.Model
        except BaseException as e:  # noqa: BLE001
            raise Verdict("reference_error", f"loading the problem: {_describe(e)}") from e
        guard.check_code(
            Path(request["candidate"]["path"]), request["candidate"].get("code_sha256")
        )
        prebuilt = PrebuiltLoadInline(
            request["candidate"].get("extensions", {}),
            cpp_extension.load_inline,
            refuse=guard.rules.actions.get("dynamic.uncaptured_build") == "reject",
        )
        cpp_extension.load_inline = prebuilt  # for the whole request: forward may build too
        try:
            with replaced_load_inline(prebuilt):
                candidate = exec_module(Path(request["candidate"]["path"]), f"dice_candidate_{rid}")
        except BaseException as e:  # noqa: BLE001
            raise _fail("import_error", "loading the candidate", e, device) from e
        result["reasons"] += prebuilt.notes
        if not hasattr(candidate, "ModelNew"):
            raise Verdict("no_model_new", "the candidate defines no ModelNew")
        try:
            _seed_all(seed)
            init_inputs = _generate(problem.get_init_inputs, device, protocol)
            _seed_all(seed)
            reference = model_cls(*init_inputs)
            reference = reference.to(device) if hasattr(reference, "to") else reference
        except BaseException as e:  # noqa: BLE001
            raise _fail("reference_error", "building the reference", e, device) from e
        models.append(reference)
        try:
            _seed_all(seed)
            with replaced_load_inline(prebuilt):
                model = candidate.ModelNew(*init_inputs)
            model = model.to(device) if hasattr(model, "to") else model
        except BaseException as e:  # noqa: BLE001
            raise _fail("constructor_error", "building ModelNew", e, device) from e
        models.append(model)
        if prebuilt.notes:
            guard.rules.fire("dynamic.uncaptured_build", prebuilt.notes[0])

        emit({"event": "stage", "id": rid, "stage": "correctness"})
        torch.manual_seed(seed)
        seeds = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(trials_wanted)]

        def make_inputs(s: int) -> Any:
            _seed_all(s)
            return _generate(problem.get_inputs, device, protocol)

        def run_reference(inputs: Any) -> Any:
            with torch.no_grad():
                return _run(reference, inputs, device, "reference_error", "reference")

        guard.prepare(make_inputs, run_reference, seeds)
        for trial_seed in seeds:
            try:
                _seed_all(trial_seed)
                inputs = _generate(problem.get_inputs, device, protocol)
            except BaseException as e:  # noqa: BLE001
                raise _fail("reference_error", "get_inputs()", e, device) from e
            with torch.no_grad():
                if protocol == "kernelbench":
                    ref_out = _run(reference, inputs, device, "reference_error", "reference")
                    pristine = (
                        clone_values(inputs) if guard.on("dynamic.input_mutation") else inputs
                    )
                    guard.before_candidate()
                    cand_out = _run(model, inputs, device, "runtime_error", "ModelNew.forward")
                    guard.after_candidate(cand_out, inputs, pristine)
                else:
                    cand_inputs = clone_values(inputs)
                    guard.before_candidate()
                    cand_out = _run(model, cand_inputs, device, "runtime_error", "ModelNew.forward")
                    guard.after_candidate(cand_out, cand_inputs, inputs)
                    ref_out = _run(reference, inputs, device, "reference_error", "reference")
                guard.after_reference(cand_out, ref_out, reference)
            comparison = compare_outputs(cand_out, ref_out)
            first = next((o for o in _leaves(ref_out) if isinstance(o, torch.Tensor)), None)
            if first is not None:
                correctness["atol"], correctness["rtol"] = tolerance(first.dtype)
            trials.append(
                {
                    "seed": trial_seed,
                    "passed": comparison.verdict is None,
                    "max_abs_error": comparison.max_abs_error,
                    "max_rel_error": comparison.max_rel_error,
                }
            )
            if comparison.verdict is not None:
                raise Verdict(comparison.verdict, f"trial {len(trials)}: {comparison.reason}")
            guard.end_trial(cand_out, ref_out)
            del inputs, cand_out, ref_out
        guard.check_threads("after the correctness trials")

        result["verdict"] = "correct"
        if opts.get("measure_timing", True):
            emit({"event": "stage", "id": rid, "stage": "timing"})
            _seed_all(seeds[0] if seeds else seed)
            inputs = _generate(problem.get_inputs, device, protocol)
            fresh = protocol == "dice" and guard.on("dynamic.stale_output")
            n_trials, warmup = int(opts.get("timing_trials", 100)), int(opts.get("warmup", 10))
            # Reference samples measured once for this problem (and timing method): time ModelNew
            # only; with fresh inputs the reference still runs, untimed, to check each output.
            stored = opts.get("reference_ms")
            try:
                if fresh:
                    del inputs
                    cand_ms, ref_ms = guard.time_fresh(
                        timer,
                        model,
                        reference,
                        make_inputs,
                        seeds[0] if seeds else seed,
                        n_trials,
                        warmup,
                        time_reference=not stored,
                    )
                    if stored:
                        ref_ms = stored
                elif stored:
                    cand_ms, ref_ms = time_candidate(timer, model, inputs, n_trials, warmup), stored
                else:
                    cand_ms, ref_ms = time_models(
                        timer, model, reference, clone_values(inputs), inputs, n_trials, warmup
                    )
            except Rejected:
                raise
            except BaseException as e:  # noqa: BLE001
                raise _fail("runtime_error", "timing", e, device) from e
            result["timing"] = {
                "protocol": protocol,
                "candidate_ms": cand_ms,
                "reference_ms": ref_ms,
                "empty_call_ms": empty_call_ms(timer),
            }
            guard.check_threads("after timing")
        guard.check_kernels(model, make_inputs, seeds[0] if seeds else seed)
        if prebuilt.notes:  # built at run time by torch (allowed with a warning)
            guard.rules.fire("dynamic.uncaptured_build", prebuilt.notes[0])
    except Rejected as r:
        result["verdict"] = "rejected"
        result["reasons"].append(f"{r.rule}: {r.message}")
        result.pop("timing", None)
    except Verdict as v:
        result["verdict"] = v.verdict
        result["reasons"].append(v.reason)
        result["fatal"] = v.fatal
        if prebuilt is not None and prebuilt.notes and v.verdict.endswith("_error"):
            try:  # the failure came from a build the worker refused or made at run time
                guard.rules.fire("dynamic.uncaptured_build", prebuilt.notes[0])
            except Rejected as r:
                result["verdict"] = "rejected"
                result["reasons"].append(f"{r.rule}: {r.message}")
    except Exception as e:  # noqa: BLE001 - the harness itself failed: a verdict, never a dead worker
        v = _fail("runtime_error", "the evaluator failed on this candidate's outputs", e, device)
        result["verdict"] = v.verdict
        result["reasons"].append(v.reason)
        result["fatal"] = v.fatal
    finally:
        cpp_extension.load_inline = _REAL_LOAD_INLINE
        result.update(guard.result())
        models.clear()
        for name in (f"dice_problem_{rid}", f"dice_candidate_{rid}"):
            sys.modules.pop(name, None)
        gc.collect()
        if device.type == "cuda" and not result.get("fatal"):
            torch.cuda.empty_cache()
    emit(result)
    return bool(result["fatal"])


def _leaves(output: Any) -> list[Any]:
    if isinstance(output, (tuple, list)):
        return [leaf for item in output for leaf in _leaves(item)]
    return [output]


def _run(model: Any, inputs: Any, device: torch.device, verdict: str, what: str) -> Any:
    try:
        out = model(*inputs)
        _sync(device)
        return out
    except BaseException as e:  # noqa: BLE001
        raise _fail(verdict, what, e, device) from e


def serve(device_name: str, stdin: TextIO) -> int:
    """Serves requests until stdin closes or a ``shutdown`` request; returns the exit status."""
    protocol_out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # whatever the candidate prints goes to stderr

    def emit(event: dict[str, Any]) -> None:
        protocol_out.write(json.dumps(event) + "\n")
        protocol_out.flush()

    device = torch.device(device_name)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    timer = Timer(device, "dice")
    torch.randn(1 << 18).sum()  # start the CPU thread pool now: the thread check's baseline
    problem_cache: dict[str, dict[str, Any]] = {}
    emit(
        {
            "event": "ready",
            "pid": os.getpid(),
            "device": device_name,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            **software_versions(device),
        }
    )
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as e:
            print(f"dice_worker: ignoring a line that is not JSON: {e}", file=sys.stderr)
            continue
        if request.get("op") == "shutdown":
            break
        if request.get("op") != "evaluate":
            print(f"dice_worker: unknown op {request.get('op')!r}", file=sys.stderr)
            continue
        if evaluate(request, device, timer, emit, problem_cache):
            return 3
    return 0
