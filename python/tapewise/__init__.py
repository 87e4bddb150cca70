"""tapewise — a reverse-mode autograd tape of 23 elementwise nodes with TorchLean's conventions, on a
CUDA backend (production) or a CPU backend (the same per-element code compiled for the host).

    import numpy as np, tapewise
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.array([-1.0, 0.0, 2.0]))          # zero-copy: the tape views the array
    y = tape.mul(tape.sin(x), tape.relu(x))
    grads = tape.backward(y, np.ones(3))
    dx = grads[x]                                       # zero-copy: the array owns the gradient
    print(tape.value(y), tape, grads)                   # numpy arrays on the CPU backend; reprs

Nodes are tapewise.Node objects that carry their tape: any other tape refuses them (InvalidNodeIdError
naming both tapes), and they are no numbers (x + x raises TypeError; record tape.add(x, x)).

Arrays go in and out through DLPack without copies (numpy, torch, jax, cupy), in float32, float64,
bfloat16 or float16: on the CPU backend values and gradients come out as numpy arrays (values
read-only), on CUDA as DLPack objects. bfloat16, which numpy lacks, is ml_dtypes.bfloat16 in and out
(pip install tapewise[bfloat16]); without ml_dtypes it comes out on the CPU as a DLPack-only object
(torch.from_dlpack reads it; numpy.asarray and host() copies of it raise TypeError). jax.dlpack and
torch.from_dlpack read every host array tapewise hands out; a read-only one goes to a consumer of
DLPack's legacy capsule (JAX), which cannot say "read-only", as a copy.
A Python float or list of numbers is accepted wherever an array is, copied as float32
(dtype="float64", "bfloat16" or "float16" to choose another; a 16-bit dtype rounds each number to
float32, then to 16 bits; a seed takes its output's dtype). Errors raise
TapewiseError subclasses carrying the C++ error code. tapewise.torch exposes every node as a
torch.autograd.Function; tapewise.conform drives the conformance runner.

Streams: CUDA work is queued on the backend's stream. Arrays tapewise hands out are ready to read:
a backend on its own stream (tapewise.cuda()) synchronises before returning them; one created on
the consumer's stream (tapewise.cuda(stream=torch.cuda.current_stream())) does not need to, since
work queued later on that stream runs after tapewise's. Consumers on another stream synchronise.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from . import _tapewise
from ._errors import (BackendMismatchError, CudaFailureError, DeviceUnavailableError, DTypeMismatchError,
                      InvalidArgumentError, InvalidNodeIdError, InvalidShapeError, OutOfMemoryError,
                      SeedDTypeMismatchError, SeedShapeMismatchError, ShapeMismatchError, TapewiseError)
from ._tapewise import Backend, Buffer, Gradients, Node, Tape, cpu, cuda_available, cuda_unavailable_reason, op_table, ops

__version__: str = _tapewise.__version__
spec_sha256: str = _tapewise.spec_sha256

NODE_NAMES: tuple[str, ...] = tuple(name for name, _, _ in ops())


def _stream_handle(stream: Any) -> Optional[int]:
    """A cudaStream_t as an int from an int, an object with .cuda_stream (torch.cuda.Stream,
    cupy.cuda.Stream's .ptr is also accepted), or None."""
    if stream is None or isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr"):
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return handle
    raise TypeError(f"stream: expected an int cudaStream_t or an object with .cuda_stream, got {type(stream).__name__}")


def cuda(device: int = 0, stream: Union[int, Any, None] = None, math: Literal["aten", "exact"] = "aten") -> Backend:
    """A CUDA backend on `device`. stream=None: the backend creates a stream of its own and
    synchronises it before handing out arrays. stream=<int cudaStream_t> or an object with
    .cuda_stream (e.g. torch.cuda.current_stream()): all work is queued on that stream (0 is the
    legacy default stream), so consumers on the same stream are ordered after it without any
    synchronisation. The backend never changes the caller's current device.
    math="aten" (the default): exp, log, sin, cos and tanh are CUDA's libm, bit for bit ATen's;
    math="exact": tapewise's own (float32 correctly rounded), the same bits as tapewise.cpu().
    Raises DeviceUnavailableError where no GPU can be opened (or the build has no CUDA), and
    InvalidArgumentError for another math mode."""
    if not isinstance(math, str):
        raise TypeError(f"cuda: math must be 'aten' or 'exact', not {type(math).__name__}")
    return _tapewise._cuda(device, _stream_handle(stream), math)


__all__ = [
    "Backend", "Buffer", "Gradients", "Node", "Tape", "cpu", "cuda", "cuda_available", "cuda_unavailable_reason", "ops",
    "op_table",
    "NODE_NAMES", "TapewiseError", "InvalidNodeIdError", "InvalidShapeError", "ShapeMismatchError",
    "DTypeMismatchError", "SeedShapeMismatchError", "SeedDTypeMismatchError", "BackendMismatchError",
    "InvalidArgumentError", "OutOfMemoryError", "DeviceUnavailableError", "CudaFailureError",
]
