"""What candidates are compiled against: torch's headers, flags and libraries (PROTOCOL.md)."""

from __future__ import annotations

import os
import platform
import sysconfig
from typing import Any

import torch
from torch.utils import cpp_extension


def _abi_flags() -> list[str]:
    flags: list[str] = []
    pybind = getattr(cpp_extension, "_get_pybind11_abi_build_flags", None)
    if pybind is not None:
        flags += list(pybind())
    glibcxx = getattr(cpp_extension, "_get_glibcxx_abi_build_flags", None)
    if glibcxx is not None:
        flags += list(glibcxx())
    else:
        flags.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
    return flags


def _paths(fn_name: str) -> list[str]:
    fn = getattr(cpp_extension, fn_name)
    try:
        return list(fn(device_type="cuda"))
    except TypeError:
        return list(fn(cuda=True))


def toolchain() -> dict[str, Any]:
    """The toolchain record of PROTOCOL.md. Raises whatever torch raises if it is unusable."""
    common = ["-DTORCH_API_INCLUDE_EXTENSION_H", *_abi_flags()]
    library_paths = _paths("library_paths")
    cuda_home = cpp_extension.CUDA_HOME or os.environ.get("CUDA_HOME", "/usr/local/cuda")
    lib64 = os.path.join(cuda_home, "lib64")
    if os.path.isdir(lib64) and lib64 not in library_paths:
        library_paths.append(lib64)
    libs = ["c10", "c10_cuda", "torch_cpu", "torch_cuda", "torch", "torch_python", "cudart"]
    available = torch.cuda.is_available()
    count = torch.cuda.device_count() if available else 0
    return {
        "python": platform.python_version(),
        "python_include": sysconfig.get_paths()["include"],
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "cuda_available": available,
        "device_count": count,
        "device_names": [torch.cuda.get_device_name(i) for i in range(count)],
        "include_paths": _paths("include_paths"),
        "library_paths": library_paths,
        "cflags": common,
        "cuda_cflags": [*cpp_extension.COMMON_NVCC_FLAGS, *common],
        "ldflags": [f"-L{p}" for p in library_paths] + [f"-l{lib}" for lib in libs],
    }
