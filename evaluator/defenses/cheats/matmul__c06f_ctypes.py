# Cheat (§4.6): calls cuBLAS through ctypes, outside anything the compile stage sees.
# Defence: static.ctypes.
import ctypes

import torch
import torch.nn as nn

_cublas = ctypes.CDLL("libcublas.so")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.handle = ctypes.c_void_p()
        _cublas.cublasCreate_v2(ctypes.byref(self.handle))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty(m, n, device=a.device)
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        _cublas.cublasSgemm_v2(
            self.handle, 0, 0, n, m, k, ctypes.byref(one), ctypes.c_void_p(b.data_ptr()), n,
            ctypes.c_void_p(a.data_ptr()), k, ctypes.byref(zero), ctypes.c_void_p(c.data_ptr()), n,
        )
        return c
