"""tapewise._bfloat16 — what a bfloat16 array on the host goes out as: numpy has no bfloat16, so the
tape's memory is handed out as a DLPack-only object (torch.from_dlpack, jax.dlpack.from_dlpack read
it without a copy) that refuses numpy conversion with a TypeError saying so, rather than letting
numpy.asarray wrap it silently as a 0-d object array."""

from __future__ import annotations

from typing import Any


class HostBFloat16Array:
    """A bfloat16 array in host memory, exported without a copy: use torch.from_dlpack(a) (or any
    DLPack consumer that knows bfloat16). It keeps the memory's owner (a tape, a gradient) alive.
    shape and dtype ("bfloat16") describe it; numpy.asarray(a) raises TypeError."""

    __slots__ = ("_array", "shape")

    def __init__(self, array: Any, shape: tuple):
        self._array = array  # nanobind's DLPack object over the memory; it holds the owner
        self.shape = shape

    @property
    def dtype(self) -> str:
        return "bfloat16"

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def __array__(self, *args, **kwargs):
        raise TypeError("numpy has no bfloat16: read this array through DLPack, e.g. torch.from_dlpack(a) "
                        "(then .float().numpy() for float32 values)")

    def __repr__(self):
        return f"<tapewise bfloat16 array {self.shape} on the host: read it with torch.from_dlpack>"
