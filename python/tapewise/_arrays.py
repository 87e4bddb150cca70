"""tapewise._arrays — the numpy arrays tapewise hands out on the host (node values, gradients, buffers,
host copies), where numpy's own DLPack export falls short: a read-only array, which numpy refuses to
consumers of DLPack before 1.0 (JAX asks that way), and bfloat16 as ml_dtypes.bfloat16, which numpy
cannot export at all."""

from __future__ import annotations

import importlib
from typing import Any, Optional

import numpy as np

INSTALL_ML_DTYPES = "pip install ml_dtypes, or tapewise[bfloat16]"


def ml_dtypes_bfloat16() -> Optional[Any]:
    """ml_dtypes.bfloat16 (numpy's bfloat16, JAX's own), or None where ml_dtypes is not installed."""
    try:
        return importlib.import_module("ml_dtypes").bfloat16
    except ImportError:
        return None


def is_bfloat16(array: np.ndarray) -> bool:
    return array.dtype.name == "bfloat16" and array.dtype.itemsize == 2


def wants_versioned(max_version: Any) -> bool:
    """Whether the consumer takes DLPack 1.0's versioned capsule, which can say "read-only"."""
    return max_version is not None and tuple(max_version)[0] >= 1


def bfloat16_dlpack(bits: np.ndarray, read_only: bool) -> Any:
    """A DLPack object of dtype bfloat16 over `bits`, a uint16 array of bfloat16 bit patterns (numpy
    cannot export the bfloat16 dtype itself); it keeps `bits` alive."""
    from . import _tapewise
    return _tapewise._bfloat16_dlpack(bits, read_only)


def export_dlpack(array: np.ndarray, stream: Any, max_version: Any, dl_device: Any, copy: Any,
                  bfloat16_bits: bool = False) -> Any:
    """The capsule of a host array that may be read-only or bfloat16 (an ml_dtypes array, or uint16 bit
    patterns where bfloat16_bits). A consumer that cannot be told the memory is read-only (no
    max_version: DLPack before 1.0, e.g. jax.dlpack.from_dlpack) gets a copy, so that nothing ever
    writes the tape's memory through it; so does one asking copy=True. copy=False where a copy is
    needed, or a device other than the host, raises BufferError."""
    plain = array.view(np.ndarray)
    read_only = not plain.flags.writeable
    if dl_device is not None and tuple(dl_device) != (1, 0):
        raise BufferError(f"this array is in host memory (DLPack device (1, 0)), not on device {tuple(dl_device)}")
    if copy is True or (read_only and not wants_versioned(max_version)):
        if copy is False:
            raise BufferError("this array is read-only and the consumer takes no versioned DLPack capsule, which "
                              "could say so: it can only be exported as a copy (copy=False was asked)")
        plain, read_only = plain.copy(), False
    versioning = {} if max_version is None else {"max_version": max_version}
    if bfloat16_bits or is_bfloat16(plain):
        return bfloat16_dlpack(plain.view(np.uint16), read_only).__dlpack__(stream=stream, **versioning)
    return plain.__dlpack__(stream=stream, **versioning)


class HostView(np.ndarray):
    """A numpy array over memory tapewise holds (a node's value, a gradient) or a bfloat16 host copy. It
    is a plain numpy array in every respect but its DLPack export: read-only memory goes to a consumer
    that cannot be told so (JAX) as a copy, and bfloat16 (ml_dtypes.bfloat16) goes out as DLPack's
    bfloat16, so torch.from_dlpack and jax.dlpack.from_dlpack read every array tapewise hands out.
    numpy's operations on it give plain numpy arrays."""

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None):
        return export_dlpack(self, stream, max_version, dl_device, copy)

    def __array_wrap__(self, array, *args, **kwargs):
        wrapped = super().__array_wrap__(array, *args, **kwargs)
        return wrapped.view(np.ndarray) if isinstance(wrapped, HostView) else wrapped

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))

    def __reduce__(self):  # a pickled value unpickles as a plain numpy array (a copy)
        return self.view(np.ndarray).__reduce__()


def host_view(array: np.ndarray, bfloat16: bool) -> Any:
    """What the extension hands out for a read-only or bfloat16 host array (bfloat16 arrives as its
    uint16 bits): a HostView, or without ml_dtypes a DLPack-only HostBFloat16Array for bfloat16."""
    if bfloat16:
        dtype = ml_dtypes_bfloat16()
        if dtype is None:
            from ._bfloat16 import HostBFloat16Array
            return HostBFloat16Array(array)
        array = array.view(dtype)
    return array.view(HostView)


def require_ml_dtypes(what: str) -> None:
    """The TypeError of a bfloat16 host copy without ml_dtypes, raised before the download."""
    if ml_dtypes_bfloat16() is None:
        raise TypeError(f"{what}: numpy has no bfloat16 of its own and ml_dtypes is not installed "
                        f"({INSTALL_ML_DTYPES}); without it, read the array through DLPack instead "
                        "(torch.from_dlpack(...) of the value, gradient or Buffer, then e.g. .float().numpy())")


def host_copy(array: np.ndarray, bfloat16: bool, what: str) -> np.ndarray:
    """A host copy the extension made (bfloat16 as its uint16 bits) as the numpy array handed out."""
    if not bfloat16:
        return array
    require_ml_dtypes(what)
    return array.view(ml_dtypes_bfloat16()).view(HostView)
