"""The software a timing depends on, beyond torch: the CUDA runtime torch was built with and the
GPU driver (PROTOCOL.md, "Reference timing")."""

from __future__ import annotations

import ctypes

import torch


def _nvml_driver() -> str | None:
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        buffer = ctypes.create_string_buffer(96)
        if nvml.nvmlSystemGetDriverVersion(buffer, ctypes.c_uint(96)) != 0:
            return None
        return buffer.value.decode()
    finally:
        nvml.nvmlShutdown()


def _cuda_driver_api() -> str | None:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int(0)
    if cuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None
    return f"cuda-api-{version.value // 1000}.{version.value % 1000 // 10}"


def software_versions(device: torch.device) -> dict[str, str]:
    """{"torch", "cuda", "driver"}: the driver's version from NVML (e.g. "580.159.04"), else the
    CUDA driver API version, else "none" (no GPU driver: CPU workers)."""
    driver = None
    if device.type == "cuda":
        driver = _nvml_driver() or _cuda_driver_api()
    return {
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "driver": driver or "none",
    }
