"""tapewise._errors — the exceptions tapewise raises: TapewiseError and one subclass per error code of
the C++ API (include/tapewise/core.hpp), each carrying `.code` (the code's name) and `.message`."""

from __future__ import annotations


class TapewiseError(Exception):
    """An error reported by tapewise. `code` is the C++ ErrorCode's name (e.g. "ShapeMismatch"),
    `message` names the op and the offending ids, shapes or dtypes. The tape's nodes, ids, values
    and requires_grad are as before the call; only its `pending` count may have changed (a call that
    flushes before it fails, such as a staged backward, has run the pending forwards: see
    tapewise.Tape)."""

    code: str = "TapewiseError"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __reduce__(self):
        # Rebuilt from (code, message), not from Exception's args (the joined text, which __init__
        # does not take): errors cross pickle, and so multiprocessing and concurrent.futures.
        return (type(self), (self.code, self.message))


class InvalidNodeIdError(TapewiseError, IndexError):
    """A node id that is not on the tape."""


class InvalidShapeError(TapewiseError, ValueError):
    """A shape with a negative dimension or too many elements."""


class ShapeMismatchError(TapewiseError, ValueError):
    """Inputs of one node with different shapes."""


class DTypeMismatchError(TapewiseError, TypeError):
    """Inputs of one node with different dtypes, or a dtype other than float32/float64/bfloat16/float16."""


class SeedShapeMismatchError(TapewiseError, ValueError):
    """A backward seed whose shape is not the output's."""


class SeedDTypeMismatchError(TapewiseError, TypeError):
    """A backward seed whose dtype is not the output's."""


class BackendMismatchError(TapewiseError, ValueError):
    """Memory on another device than the backend's, or a buffer of another backend."""


class InvalidArgumentError(TapewiseError, ValueError):
    """An argument out of its domain (unknown op or path, non-contiguous array, ...)."""


class OutOfMemoryError(TapewiseError, MemoryError):
    """An allocation failed."""


class DeviceUnavailableError(TapewiseError, RuntimeError):
    """No usable CUDA device (or a build without CUDA)."""


class CudaFailureError(TapewiseError, RuntimeError):
    """A CUDA call failed."""


ERRORS_BY_CODE: dict[str, type[TapewiseError]] = {
    cls.__name__[: -len("Error")]: cls
    for cls in (InvalidNodeIdError, InvalidShapeError, ShapeMismatchError, DTypeMismatchError,
                SeedShapeMismatchError, SeedDTypeMismatchError, BackendMismatchError, InvalidArgumentError,
                OutOfMemoryError, DeviceUnavailableError, CudaFailureError)
}


def make_error(code: str, message: str) -> TapewiseError:
    """The exception for an error code (called by the C++ module when a call fails)."""
    return ERRORS_BY_CODE.get(code, TapewiseError)(code, message)
