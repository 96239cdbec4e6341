"""Which kernels a forward ran and whose they are (RULES.md, ``dynamic.foreign_kernels``,
``dynamic.no_own_kernel``). A kernel is the candidate's own when its name is one of the
``__global__`` functions of the captured sources AND a function of that name is defined in one of
the extension libraries built from them (their ELF symbol tables), so that a decoy named like a
library kernel does not make cuBLAS the candidate's own."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_DATA_MOVEMENT = re.compile(
    r"^(Memcpy|Memset)|FillFunctor|direct_copy_kernel|copy_kernel|CatArrayBatchedCopy"
)


def base_name(kernel: str) -> str:
    """The function's own name in a (demangled) kernel name: ``void ns::k<float>(float*, int)``
    -> ``k``."""
    name = kernel.strip()
    if name.startswith("void "):
        name = name[5:]
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the argument list starts at the first top-level "("
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    name = name[:cut]
    out, depth = [], 0
    for ch in name:  # drop template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).split("::")[-1].strip()


def elf_function_names(path: Path) -> set[str]:
    """Names of the functions a shared library defines (.symtab and .dynsym), mangled. Empty if
    the file is not a 64-bit little-endian ELF."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return set()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    names: set[str] = set()
    for _name, sh_type, _f, _a, offset, size, link, _i, _al, entsize in sections:
        if sh_type not in (2, 11) or entsize == 0:  # SHT_SYMTAB, SHT_DYNSYM
            continue
        str_off, str_size = sections[link][4], sections[link][5]
        strtab = data[str_off : str_off + str_size]
        for k in range(size // entsize):
            st_name, st_info, _o, st_shndx, _v, _s = struct.unpack_from(
                "<IBBHQQ", data, offset + k * entsize
            )
            if st_info & 0xF == 2 and st_shndx != 0:  # STT_FUNC, defined
                end = strtab.find(b"\0", st_name)
                names.add(strtab[st_name:end].decode("utf-8", "replace"))
    return names


def signature(kernel: str) -> str:
    """A demangled name without its ``void`` prefix and spaces, for exact comparison."""
    name = kernel.strip()
    return (name[5:] if name.startswith("void ") else name).replace(" ", "")


@dataclass(frozen=True)
class OwnKernels:
    """How to recognize the candidate's kernels: exact signatures of the functions its libraries
    define, and the ``__global__`` names of its sources that those libraries also define."""

    signatures: frozenset[str]
    names: frozenset[str]

    def __contains__(self, kernel: str) -> bool:
        return signature(kernel) in self.signatures or base_name(kernel) in self.names


def own_kernel_names(
    kernels: Iterable[str], libraries: Iterable[Path], demangle: Callable[[str], str]
) -> tuple[OwnKernels, str]:
    """The candidate's own kernels (see OwnKernels). A kernel launched from the candidate's
    library has the signature of a function defined there (its host stub), templates and
    CUB/CUTLASS instantiations included. Returns a note when the libraries could not be read:
    then the source names alone decide."""
    declared = set(kernels)
    signatures: set[str] = set()
    bases: set[str] = set()
    unreadable = []
    for lib in libraries:
        try:
            for mangled in elf_function_names(lib):
                name = demangle(mangled)
                signatures.add(signature(name))
                bases.add(base_name(name))
        except (OSError, struct.error, IndexError) as e:
            unreadable.append(f"{lib.name}: {e}")
    if unreadable or not signatures:
        note = "extension symbols unreadable; kernels matched by source names only"
        return OwnKernels(frozenset(), frozenset(declared)), note
    return OwnKernels(frozenset(signatures), frozenset(declared & bases)), ""


@dataclass
class KernelShare:
    """GPU time of one forward split by whose kernels ran (microseconds)."""

    own_us: float = 0.0
    data_us: float = 0.0  # memset, memcpy, torch's fill and copy kernels
    foreign_us: float = 0.0
    own: list[str] = field(default_factory=list)
    foreign: list[tuple[str, float]] = field(default_factory=list)

    @property
    def total_us(self) -> float:
        return self.own_us + self.data_us + self.foreign_us

    @property
    def foreign_share(self) -> float:
        return self.foreign_us / self.total_us if self.total_us > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        top = sorted(self.foreign, key=lambda x: -x[1])[:5]
        return {
            "own_us": round(self.own_us, 3),
            "data_us": round(self.data_us, 3),
            "foreign_us": round(self.foreign_us, 3),
            "foreign_share": round(self.foreign_share, 4),
            "own_kernels": sorted(set(self.own))[:10],
            "foreign_kernels": [[n[:120], round(us, 3)] for n, us in top],
        }


def classify(
    events: Iterable[tuple[str, float]], own: OwnKernels | set[str] | frozenset[str]
) -> KernelShare:
    """Splits (kernel name, microseconds) events into the candidate's own kernels, data
    movement and the rest (torch, cuBLAS, cuDNN, ...). ``own``: OwnKernels, or base names."""
    share = KernelShare()
    for name, us in events:
        if (name in own) if isinstance(own, OwnKernels) else (base_name(name) in own):
            share.own_us += us
            share.own.append(base_name(name))
        elif _DATA_MOVEMENT.search(name):
            share.data_us += us
        else:
            share.foreign_us += us
            share.foreign.append((name, us))
    return share


def profile_forward(fn: Callable[[], Any]) -> list[tuple[str, float]]:
    """Runs ``fn`` once under torch.profiler (CUDA activity) and returns the (name, us) of every
    GPU activity it launched: kernels, memcpy, memset."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    out = []
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            out.append((e.name, float(e.time_range.elapsed_us())))
    return out
