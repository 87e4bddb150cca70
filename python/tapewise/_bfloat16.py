"""tapewise._bfloat16 — what a bfloat16 array on the host goes out as where ml_dtypes is not installed:
numpy has no bfloat16 of its own, so the tape's memory is handed out as a DLPack-only object
(torch.from_dlpack, jax.dlpack.from_dlpack read it) that refuses numpy conversion with a TypeError
saying so, rather than letting numpy.asarray wrap it silently as a 0-d object array. With ml_dtypes,
bfloat16 goes out as an ml_dtypes.bfloat16 numpy array (tapewise._arrays.HostView) instead."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._arrays import INSTALL_ML_DTYPES, export_dlpack


class HostBFloat16Array:
    """A bfloat16 array in host memory, exported without a copy (read-only memory goes to a DLPack
    consumer before 1.0 as a copy): use torch.from_dlpack(a). It keeps the memory's owner (a tape, a
    gradient) alive. shape and dtype ("bfloat16") describe it; numpy.asarray(a) raises TypeError."""

    __slots__ = ("_bits",)

    def __init__(self, bits: np.ndarray):
        self._bits = bits  # a uint16 numpy array over the memory (bfloat16 bit patterns); it holds the owner

    @property
    def shape(self) -> tuple:
        return self._bits.shape

    @property
    def dtype(self) -> str:
        return "bfloat16"

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None):
        return export_dlpack(self._bits, stream, max_version, dl_device, copy, bfloat16_bits=True)

    def __dlpack_device__(self):
        return (1, 0)

    def __array__(self, *args, **kwargs):
        raise TypeError(f"numpy has no bfloat16 of its own and ml_dtypes is not installed ({INSTALL_ML_DTYPES}); "
                        "read this array through DLPack, e.g. torch.from_dlpack(a) "
                        "(then .float().numpy() for float32 values)")

    def __repr__(self):
        return (f"<tapewise bfloat16 array {self.shape} on the host: read it with torch.from_dlpack, "
                f"or install ml_dtypes for numpy>")
