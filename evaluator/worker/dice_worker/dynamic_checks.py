"""Dynamic checks of a candidate's outputs, inputs and threads, and the poisoning of free device
memory (evaluator/RULES.md, ``dynamic.*``). Pure functions over tensors: they run on CPU tensors in
the tests and on GPU tensors in the worker."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import torch

from .correctness import COMPARE_CHUNK, flatten

# Every byte of freed device memory is set to this before the candidate runs: as fp32/fp16/bf16/
# fp64 an all-ones pattern is a NaN with a full payload, which no arithmetic produces.
POISON_BYTE = 0xFF
_BITS = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


class Rejected(Exception):
    """A rule whose action is reject fired: the request ends with verdict ``rejected``."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.message = message


class Rules:
    """The rules a request turned on (``options.rules``: id -> reject|warn) and what fired."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.actions: dict[str, str] = dict(options.get("rules") or {})
        self.foreign_share_limit = float(options.get("foreign_share_limit", 0.5))
        self.findings: list[dict[str, Any]] = []
        self.notes: list[str] = []

    def on(self, rule: str) -> bool:
        return self.actions.get(rule, "off") != "off"

    def any_on(self, prefix: str) -> bool:
        return any(r.startswith(prefix) and a != "off" for r, a in self.actions.items())

    def fire(self, rule: str, message: str) -> None:
        """Records a finding; raises Rejected when the rule's action is reject."""
        action = self.actions.get(rule, "off")
        if action == "off":
            return
        if any(f["rule"] == rule and f["message"] == message for f in self.findings):
            return
        self.findings.append({"rule": rule, "message": message, "where": "run", "action": action})
        if action == "reject":
            raise Rejected(rule, message)


def tensors(values: Any) -> list[torch.Tensor]:
    """The tensors among the leaves of a (nested) tuple/list."""
    return [v for v in flatten(values) if isinstance(v, torch.Tensor)]


def clone_values(values: Any) -> Any:
    """A copy of `values` (a tensor or a nested tuple/list) with every tensor cloned; other
    leaves are shared."""
    if isinstance(values, torch.Tensor):
        return values.clone()
    if isinstance(values, (list, tuple)):
        return type(values)(clone_values(v) for v in values)
    return values


def output_type_problem(output: Any, reference: Any, device: torch.device) -> str | None:
    """Why the candidate's output is not a plain dense tensor where the reference has one (a
    subclass, a lazy or meta tensor, a sparse layout, another device), or None."""
    for i, (c, r) in enumerate(zip(flatten(output), flatten(reference), strict=False)):
        if not isinstance(r, torch.Tensor):
            continue
        if not isinstance(c, torch.Tensor):
            continue  # compare_outputs reports wrong_output
        if type(c) is not torch.Tensor:
            return (
                f"output {i} is a {type(c).__module__}.{type(c).__qualname__}, not a torch.Tensor"
            )
        if c.layout != torch.strided:
            return f"output {i} has layout {c.layout}"
        if c.is_meta or c.device.type != device.type:
            return f"output {i} is on {c.device}, expected {device}"
        if torch._C._functorch.is_functorch_wrapped_tensor(c):
            return f"output {i} is a functorch wrapper"
    return None


def _span(t: torch.Tensor) -> tuple[int, int] | None:
    if t.numel() == 0 or t.device.type == "meta":
        return None
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return (start, start + storage.nbytes())


def _overlap(a: tuple[int, int] | None, b: tuple[int, int] | None) -> bool:
    return a is not None and b is not None and a[0] < b[1] and b[0] < a[1]


def alias_pairs(outputs: Any, inputs: Any) -> set[tuple[str, int, int]]:
    """Which output leaves share memory with which input leaves (``("input", o, i)``) and with
    each other (``("output", o, o2)``, o < o2): the storages' byte ranges overlap."""
    outs = [_span(t) if isinstance(t, torch.Tensor) else None for t in flatten(outputs)]
    ins = [_span(t) if isinstance(t, torch.Tensor) else None for t in flatten(inputs)]
    pairs: set[tuple[str, int, int]] = set()
    for o, so in enumerate(outs):
        for i, si in enumerate(ins):
            if _overlap(so, si):
                pairs.add(("input", o, i))
        for o2 in range(o + 1, len(outs)):
            if _overlap(so, outs[o2]):
                pairs.add(("output", o, o2))
    return pairs


def alias_problem(
    outputs: Any, inputs: Any, allowed: set[tuple[str, int, int]], earlier: Any = None
) -> str | None:
    """Why the candidate's outputs alias what they must not: an input or another output (unless
    the reference's outputs alias the same way: ``allowed``), or an output of an earlier call
    that is still alive (the same buffer returned twice). None when they do not."""
    for kind, a, b in sorted(alias_pairs(outputs, inputs) - allowed):
        if kind == "input":
            return f"output {a} shares memory with input {b} (the reference's does not)"
        return f"outputs {a} and {b} share memory (the reference's do not)"
    if earlier is not None:
        old = [_span(t) for t in tensors(earlier)]
        for o, t in enumerate(tensors(outputs)):
            if any(_overlap(_span(t), s) for s in old):
                return f"output {o} is the memory of an earlier call's output (a reused buffer)"
    return None


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality of two tensors of one shape and dtype (NaN payloads included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    fa, fb = a.reshape(-1), b.reshape(-1)
    bits = _BITS.get(a.dtype)
    for start in range(0, fa.numel(), COMPARE_CHUNK):
        x, y = fa[start : start + COMPARE_CHUNK], fb[start : start + COMPARE_CHUNK]
        if bits is not None:
            x, y = x.contiguous().view(bits), y.contiguous().view(bits)
        if not torch.equal(x, y):
            return False
    return True


def changed_inputs(after: Any, pristine: Any) -> list[int]:
    """Indices of input leaves whose values differ between ``after`` and ``pristine``."""
    out = []
    for i, (a, p) in enumerate(zip(flatten(after), flatten(pristine), strict=False)):
        if isinstance(a, torch.Tensor) and isinstance(p, torch.Tensor):
            if not _same(a, p):
                out.append(i)
    return out


def poison_count(output: torch.Tensor, reference: torch.Tensor) -> int:
    """Elements of a floating-point ``output`` that hold the poison bit pattern where the
    reference is not NaN (a negated NaN has the same bits): memory the candidate never wrote."""
    bits = _BITS.get(output.dtype)
    if bits is None or output.shape != reference.shape or output.dtype != reference.dtype:
        return 0
    if reference.device != output.device:
        reference = reference.to(output.device)
    co, ro = output.reshape(-1), reference.reshape(-1)
    n = 0
    for start in range(0, co.numel(), COMPARE_CHUNK):
        c = co[start : start + COMPARE_CHUNK].contiguous().view(bits)
        r = ro[start : start + COMPARE_CHUNK]
        n += int(torch.count_nonzero((c == -1) & ~torch.isnan(r)))
    return n


def unwritten_problem(output: Any, reference: Any) -> str | None:
    """Why some of the candidate's output was never written (poison left in it), or None."""
    for i, (c, r) in enumerate(zip(flatten(output), flatten(reference), strict=False)):
        if isinstance(c, torch.Tensor) and isinstance(r, torch.Tensor):
            n = poison_count(c, r)
            if n:
                return f"output {i}: {n} of {c.numel()} values were never written (poison left)"
    return None


def poison_(t: torch.Tensor) -> None:
    """Overwrites a tensor's whole storage with the poison byte (before it is freed)."""
    storage = t.untyped_storage()
    if storage.nbytes():
        torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage).fill_(POISON_BYTE)


def poison_free_memory(device: torch.device, reserve_bytes: int) -> int:
    """Fills the CUDA caching allocator's free blocks of ``device`` with the poison byte, plus
    ``reserve_bytes`` of fresh memory, then frees them again (they stay cached, poisoned): what
    the candidate allocates next holds poison until it writes it. Each free block is claimed by an
    allocation of exactly its size (best fit). Returns the bytes poisoned; 0 off CUDA."""
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    sizes = [
        block["size"]
        for segment in torch.cuda.memory_snapshot()
        if segment.get("device") == index
        for block in segment.get("blocks", [])
        if block.get("state") == "inactive"
    ]
    held: list[torch.Tensor] = []
    done = 0
    try:
        for size in sorted(sizes, reverse=True):
            t = torch.empty(size, dtype=torch.uint8, device=device)
            t.fill_(POISON_BYTE)
            held.append(t)
            done += size
        free, _ = torch.cuda.mem_get_info(device)
        reserve = max(0, min(reserve_bytes, free - (1 << 30)))
        if reserve:
            t = torch.empty(reserve, dtype=torch.uint8, device=device)
            t.fill_(POISON_BYTE)
            held.append(t)
            done += reserve
    except torch.cuda.OutOfMemoryError:
        pass
    torch.cuda.synchronize(device)
    del held
    return done


@dataclass(frozen=True)
class ThreadSnapshot:
    """The threads and child processes of this process at one moment."""

    python: frozenset[int]  # idents of live Python threads
    native: frozenset[int]  # thread ids in /proc/self/task
    children: frozenset[int]  # child process ids


def thread_snapshot() -> ThreadSnapshot:
    """Threads and child processes of this process now."""
    native: set[int] = set()
    children: set[int] = set()
    try:
        for tid in os.listdir("/proc/self/task"):
            native.add(int(tid))
            try:
                with open(f"/proc/self/task/{tid}/children") as f:
                    children.update(int(p) for p in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    python = frozenset(t.ident for t in threading.enumerate() if t.ident is not None)
    return ThreadSnapshot(python, frozenset(native), frozenset(children))


def _thread_name(tid: int) -> str | None:
    """The name of native thread `tid` of this process; None when it has exited."""
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def _live_native(tids: frozenset[int], grace_s: float) -> list[str]:
    """Names of the threads in `tids` still alive after up to `grace_s` seconds (the CUDA
    driver's, named cuda*, left out). A joined thread's OS thread ends a moment after
    ``Thread.join`` returns, so a thread is counted only if it outlives the grace."""
    deadline = time.monotonic() + grace_s
    while True:
        names = [_thread_name(t) for t in tids]
        live = [n for n in names if n is not None and not n.startswith("cuda")]
        if not live or time.monotonic() >= deadline:
            return live
        time.sleep(0.005)


def threads_problem(
    before: ThreadSnapshot, after: ThreadSnapshot, grace_s: float = 0.5
) -> str | None:
    """What the candidate left running: Python threads, native threads (other than the CUDA
    driver's, named cuda*), child processes; None when nothing. A new native thread that exits
    within `grace_s` seconds (s) of the call is not counted: a joined thread's OS thread ends a
    moment after join returns."""
    parts = []
    if after.python - before.python:
        parts.append(f"{len(after.python - before.python)} Python thread(s)")
    native = _live_native(after.native - before.native, grace_s)
    if native:
        parts.append(f"{len(native)} native thread(s) ({', '.join(sorted(set(native)))[:80]})")
    if after.children - before.children:
        parts.append(f"{len(after.children - before.children)} child process(es)")
    return ("left running: " + ", ".join(parts)) if parts else None
