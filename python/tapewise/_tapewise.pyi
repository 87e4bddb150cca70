# tapewise/_tapewise.pyi — type stubs of the C++ module. Started from python -m nanobind.stubgen -m
# tapewise._tapewise; the aliases below (Literal types of the names the module takes, and NodeId) are
# written by hand: keep them when regenerating after a change to python/src. python/tests/test_stubs.py
# checks them against the module.
"""tapewise's C++ core (nanobind); use it through the `tapewise` package."""

from collections.abc import Iterator, Sequence
from typing import Any, Literal, Union

import numpy
import torch
from numpy.typing import NDArray
from typing_extensions import TypeAlias

# What the tape's node methods take: a Node (what they return, carrying its tape) or its int id.
NodeId: TypeAlias = Union["Node", int]
# The dtypes, by tapewise's names (Tape.dtype, Buffer.dtype).
DTypeName: TypeAlias = Literal["float32", "float64", "bfloat16", "float16"]
# What dtype= takes: tapewise's names, numpy's spellings of the same four, numpy and torch dtypes
# (np.float64, np.dtype("f8"), torch.float16) and ml_dtypes.bfloat16.
NumpyDTypeSpelling: TypeAlias = Literal["f2", "<f2", "e", "half", "f4", "<f4", "f", "single", "f8", "<f8", "d",
                                        "double", "float"]
DTypeArg: TypeAlias = Union[DTypeName, NumpyDTypeSpelling, numpy.dtype[Any], type[Any], torch.dtype]
# The nodes, in table order (tapewise.NODE_NAMES).
OpName: TypeAlias = Literal["add", "sub", "mul", "neg", "scale", "abs", "sqrt", "clamp", "max", "min", "div", "relu", "exp", "sin", "cos", "log", "inv", "safeLog", "sigmoid", "tanh", "silu", "gelu", "softplus"]
# Backend.math and tapewise.cuda(math=...).
MathMode: TypeAlias = Literal["aten", "exact"]
# backward(path=...): one kernel per node, or the spec's stages as separate buffer ops.
VjpPath: TypeAlias = Literal["fused", "staged"]


class Backend:
    """
    Where a tape's memory lives and its kernels run: tapewise.cpu() or tapewise.cuda(...).

    CUDA work is queued on the backend's stream. Arrays tapewise hands out (Tape.value, gradients,
    Buffer.array) are ready to read: a backend on its own stream synchronises before returning them; a
    backend created on the caller's stream (tapewise.cuda(stream=...)) does not need to, because work
    the caller queues on that stream runs after tapewise's. Consumers on any other stream must
    synchronise themselves. Inputs (leaves, seeds) imported from a framework's device array are
    requested with __dlpack__(stream=<this backend's stream>), so the producer orders its writes first.
    """

    @property
    def kind(self) -> Literal["cpu", "cuda"]:
        """"cpu" or "cuda"."""

    def describe(self) -> str:
        """
        A line naming the backend, e.g. "CUDA device 0: NVIDIA H200 (sm_90, 132 SMs)".
        """

    def __repr__(self) -> str: ...

    @property
    def device_id(self) -> int:
        """The CUDA ordinal (0 on the CPU)."""

    @property
    def threads(self) -> int:
        """The threads a CPU backend runs large tensors on (tapewise.cpu(threads=...)); 0 for CUDA."""

    @property
    def math(self) -> MathMode:
        """The kernels' exp, log, sin, cos and tanh: "exact" (the CPU backend's only mode) or "aten"."""

    def __dlpack_device__(self) -> tuple[int, int]:
        """
        (DLPack device type, device id): (1, 0) for the CPU, (2, ordinal) for CUDA.
        """

    @property
    def stream(self) -> int | None:
        """
        The cudaStream_t the backend queues its work on, as an int (None on the CPU).
        """

    @property
    def on_callers_stream(self) -> bool:
        """
        True when the backend was created on a stream the caller gave: handing out arrays then
        does not synchronise (see the class docstring).
        """

    def stats(self) -> dict:
        """
        Live allocations per tag: {"value"|"gradient"|"workspace": {"count": n, "bytes": b}}.
        Borrowed (wrapped) memory is not counted.
        """

    def memory_stats(self) -> dict:
        """
        The memory held for the live buffers, in bytes: {"live_bytes": the live buffers' (every tag's),
        "reserved_bytes": all the backend holds from the host heap or the CUDA pool (slabs, large
        buffers, kept blocks), "slab_bytes": the slabs' part (buffers of up to 256 KiB are carved from
        slabs), "kept_bytes": the part kept for reuse with no buffer in it (at most kept_memory_limit;
        trim() gives it back)}.
        """

    def trim(self) -> int:
        """
        Gives back to the system every empty slab and released block the backend keeps for reuse (as
        torch.cuda.empty_cache); live buffers are untouched. Returns the bytes given back. A CUDA
        backend then waits for its stream and returns its pool's unused memory.
        """

    @property
    def kept_memory_limit(self) -> int | None:
        """
        The most bytes kept for reuse with no buffer in them (memory_stats()["kept_bytes"]), None
        for no limit: at first TAPEWISE_KEPT_MEMORY_LIMIT when set, else 256 MiB on the CPU and no
        limit on CUDA. Setting it gives back what is kept beyond it; a negative value raises
        InvalidArgumentError.
        """

    @kept_memory_limit.setter
    def kept_memory_limit(self, bytes: int | None) -> None: ...

    def synchronize(self) -> None:
        """
        Waits for all queued work; raises CudaFailureError for an asynchronous failure.
        """

    def wrap(self, array: object, copy: bool = False, dtype: DTypeArg | None = None) -> Buffer:
        """
        A Buffer over `array`'s memory, no copy (see Tape.leaf for what is accepted); copy=True copies.
        A Python float or (nested) list of numbers is always copied, as dtype ("float32", the default,
        "float64", "bfloat16" or "float16"; a 16-bit dtype rounds each number to float32 first, then
        to 16 bits, as tapewise rounds scalars); an array keeps its own dtype (a dtype= that differs
        raises DTypeMismatchError).
        A view of read-only memory is read-only: its array() refuses writes and it cannot be an output.
        """

    def allocate(self, shape: Sequence[int], dtype: DTypeArg = 'float32') -> Buffer:
        """
        A fresh, uninitialised Buffer of this backend (tag "value"); dtype "float32", "float64",
        "bfloat16" or "float16".
        """

    def forward(self, op: OpName, inputs: Sequence[Buffer], out: Buffer, scalars: Sequence[float] = []) -> None:
        """
        Low level: out = op(*inputs, *scalars), one kernel on the backend's stream (not synchronised).
        Every buffer belongs to this backend and has one shape and dtype; a released buffer, or a
        read-only one as `out`, raises InvalidArgumentError.
        """

    def vjp_fused(self, op: OpName, inputs: Sequence[Buffer], g: Buffer, grads: Sequence[Buffer], scalars: Sequence[float] = []) -> None:
        """
        Low level: writes the node's fused VJP of upstream `g` into `grads` (one per input), one
        kernel on the backend's stream (not synchronised). Read-only `grads` raise InvalidArgumentError.
        """

    def forward_ptrs(self, op_index: int, s0: float, s1: float, inputs: Sequence[int], out: int, numel: int, dtype: DTypeName) -> None:
        """
        Low level, for framework adapters: forward on raw addresses of contiguous memory of this
        backend, each holding `numel` elements of `dtype` ("float32", "float64", "bfloat16" or
        "float16"). The caller keeps the memory alive and must be on the backend's stream (or
        synchronise).
        """

    def vjp_fused_ptrs(self, op_index: int, s0: float, s1: float, inputs: Sequence[int], g: int, grads: Sequence[int], numel: int, dtype: DTypeName) -> None:
        """Low level: the fused VJP on raw addresses (see forward_ptrs)."""

    def _forward_raw(self, op_index: int, s0: float, s1: float, a: int, b: int, out: int, numel: int, dtype_code: int) -> None:
        """
        forward_ptrs with fixed arity, for tapewise.torch's per-node path: b is 0 for a unary node;
        dtype_code is tapewise._tapewise.DTYPE_CODES[dtype]. Same checks and errors.
        """

    def _vjp_raw(self, op_index: int, s0: float, s1: float, a: int, b: int, g: int, da: int, db: int, numel: int, dtype_code: int) -> None:
        """vjp_fused_ptrs with fixed arity (see _forward_raw): b and db are 0 for a unary node."""

class Buffer:
    """
    A tapewise buffer owned by Python (a gradient, or Backend.wrap/allocate): move-only device or
    host memory. array() (or __dlpack__) exports it without a copy (on the host a numpy array; for
    bfloat16 an ml_dtypes.bfloat16 one, or without ml_dtypes a DLPack-only object); the arrays share
    the memory, so it stays valid
    while any of them lives, even after release(). A view of read-only memory (Backend.wrap of a
    read-only array) is exported read-only.
    """

    def __repr__(self) -> str: ...

    @property
    def shape(self) -> tuple: ...

    @property
    def dtype(self) -> DTypeName: ...

    @property
    def nbytes(self) -> int: ...

    @property
    def borrowed(self) -> bool:
        """
        True for a view of caller memory (wrap): not counted in Backend.stats().
        """

    @property
    def read_only(self) -> bool:
        """
        True for a view of read-only memory: exported read-only, refused as an output.
        """

    @property
    def released(self) -> bool:
        """True after release()."""

    @property
    def tag(self) -> str: ...

    @property
    def data_ptr(self) -> int:
        """The address of the first element (host or device), as an int."""

    def array(self) -> Any:
        """
        The buffer as an array (no copy, shares the memory): a numpy array on the host, an object
        exporting __dlpack__ on a device; bfloat16 as ml_dtypes.bfloat16 (without ml_dtypes a
        DLPack-only object: torch.from_dlpack reads it,
        numpy.asarray raises TypeError).
        Synchronises the backend first.
        """

    def host(self) -> NDArray:
        """
        A host copy as a new numpy array (bfloat16 as ml_dtypes.bfloat16; without ml_dtypes TypeError:
        use torch.from_dlpack(buffer)).
        """

    def __dlpack_device__(self) -> tuple[int, int]: ...

    def __dlpack__(self, **kwargs) -> object:
        """DLPack export of array() (torch.from_dlpack(buffer) works)."""

    def release(self) -> None:
        """
        Drops this Buffer's memory: freed now, or when the last array exported from it goes. The
        Buffer is then empty (its properties raise InvalidArgumentError), and a gradient's Buffer
        leaves its Gradients.
        """

DTYPE_CODES: dict[DTypeName, int] = {'float32' : 0, 'float64' : 1, 'bfloat16' : 2, 'float16' : 3}

def cpu(threads: int | None = None) -> Backend:
    """
    A new CPU backend: the same per-element code as the CUDA kernels, compiled for the host. Tensors
    of more than 2^15 elements run on `threads` threads, the calling thread included (None: the
    TAPEWISE_CPU_THREADS environment variable, else the CPUs this process may use; 1: the calling
    thread alone; at most 256). Results never depend on the thread count.
    """

def _node_kernels() -> object:
    """
    The capsule "tapewise.node_kernels" holding the per-node kernel table of
    tapewise/native/node_kernels.h, for compiled extensions (tapewise.torch's C++ nodes).
    """

def cuda_available() -> bool:
    """True when a CUDA device can be opened."""

def cuda_unavailable_reason() -> str:
    """Why no CUDA device can be opened ("" when one can)."""

class Node:
    """
    A node of one tape, as Tape's methods return it (tape.leaf, tape.sin, ...): pass it to that tape's
    methods and to its Gradients. It holds its tape (node.tape), so it keeps the tape alive; any other
    tape refuses it with InvalidNodeIdError naming both tapes. A Node is not a number: node + node and
    the other operators raise TypeError (record tape.add(a, b)). int(node) and node.id give its id
    (serial * 2**32 + position), which every method also takes; node.index its position on the tape.
    Nodes are equal when their ids are (a Node also equals its id), and hash as their id.
    """

    @property
    def tape(self) -> Tape:
        """The tape the node is on."""

    @property
    def id(self) -> int:
        """The node's id: its tape's serial * 2**32 + its position."""

    @property
    def index(self) -> int:
        """The node's position on its tape: 0 for the first node recorded."""

    @property
    def shape(self) -> tuple:
        """The node's shape."""

    @property
    def dtype(self) -> str:
        """The node's dtype."""

    def __int__(self) -> int: ...

    def __hash__(self) -> int: ...

    def __eq__(self, other: object) -> bool: ...

    def __repr__(self) -> str: ...

class Tape:
    """
    A reverse-mode tape on one backend. Nodes are recorded by method (tape.sin(x), tape.max(a, b),
    tape.clamp(x, lo, hi), ...), each returning a tapewise.Node of this tape; every method taking a node
    also takes its id, int(node) (a bool is not an id: TypeError). A node of another tape is refused
    with InvalidNodeIdError naming both tapes' serials, the tape left as it was. Every method
    either succeeds or raises (a TapewiseError, or TypeError for an argument of the wrong type) and
    leaves the tape's nodes, ids, values and requires_grad as they were. The one state a failing call
    can change is `pending`: a call that flushes before it fails (a backward, see there; a value or
    host read; recording a node of more than program_threshold elements) has still run the pending
    forwards. Not thread-safe.
    """

    def __init__(self, backend: Backend) -> None:
        """An empty tape on `backend` (tapewise.cpu() or tapewise.cuda())."""

    def __repr__(self) -> str: ...

    @property
    def backend(self) -> Backend:
        """The tape's backend."""

    def __len__(self) -> int:
        """The number of nodes (leaves included)."""

    @property
    def serial(self) -> int:
        """
        The tape's serial: a number no other tape of the process has, carried by its nodes' ids and
        named in errors (an id is serial * 2**32 + position).
        """

    def nodes(self) -> list[Node]:
        """Every node of the tape, in recording order (nodes()[i].index == i)."""

    @property
    def pending(self) -> int:
        """
        Small nodes whose forward is deferred into the next tape program (run by flush(), value(),
        backward(), or recording a larger node).
        """

    def flush(self) -> None:
        """Runs the pending nodes now (one program)."""

    @property
    def program_threshold(self) -> int:
        """
        Nodes of at most this many elements are recorded as a tape program (deferred, batched into one
        kernel); 0 turns programs off. Default 2**26 on CUDA, 16 on the CPU backend (where a node's own loop wins
        from about 32 elements up). A negative count raises InvalidArgumentError.
        """

    @program_threshold.setter
    def program_threshold(self, arg: int, /) -> None: ...

    @property
    def max_pending_nodes(self) -> int:
        """
        At most this many nodes wait for their forward; recording one more flushes first (1 .. 65536,
        default 448: one CUDA launch of program steps). Out of range: InvalidArgumentError.
        """

    @max_pending_nodes.setter
    def max_pending_nodes(self, arg: int, /) -> None: ...

    def leaf(self, array: object, requires_grad: bool = True, copy: bool = False, dtype: DTypeArg | None = None) -> Node:
        """
        Records `array` as a leaf and returns its Node. Any object exporting __dlpack__ or the buffer
        protocol (numpy, torch, jax, cupy), float32, float64, bfloat16 or float16, C-contiguous, on the
        backend's device (host memory for the CPU backend) is used in place, without a copy: it must
        stay unchanged while the tape lives (the tape keeps the object alive), and value(id) is
        writable only when the array is. copy=True copies it instead (value(id) is then read-only),
        also from host memory into a CUDA backend, and from a non-contiguous host array. Anything else
        raises a TapewiseError naming what is wrong (DTypeMismatchError, BackendMismatchError,
        InvalidArgumentError, OutOfMemoryError); an object that is not an array raises TypeError.
        A Python float or (nested) list of numbers is always copied (whatever `copy` says: a list has no
        memory to view), as dtype: "float32" (the default, as torch.tensor makes), "float64",
        "bfloat16" or "float16" (each number rounded to float32, then to 16 bits); its value is
        read-only; strings or ragged lists raise TypeError, another dtype DTypeMismatchError.
        An array keeps its own dtype: a dtype= that differs from it raises DTypeMismatchError.
        """

    def apply(self, op: OpName, parents: Sequence[NodeId], scalars: Sequence[float] = []) -> Node:
        """
        Records node `op` (its name, e.g. "clamp") of `parents` (nodes of this tape) with `scalars` (floats)
        and returns its Node.
        """

    def value(self, id: NodeId) -> Any:
        """
        The node's value, no copy: on the CPU backend a numpy array (a view of the tape's memory), on
        CUDA an object exporting __dlpack__ and __dlpack_device__; either way numpy.asarray(v) (host),
        torch.from_dlpack(v), jax.dlpack.from_dlpack(v) read it. bfloat16 on the CPU is an ml_dtypes.bfloat16 array, or without ml_dtypes a
        DLPack-only object (torch.from_dlpack(v) reads it, numpy.asarray raises).
        It keeps the tape alive. Read-only (the buffer protocol refuses writes, versioned DLPack
        capsules carry the read-only flag), except for a leaf that views writable caller memory.
        Flushes pending nodes first.
        """

    def host(self, id: NodeId) -> NDArray:
        """
        A host copy of the node's value as a new numpy array (from any backend); bfloat16 as ml_dtypes.bfloat16,
        and TypeError without ml_dtypes (read it with torch.from_dlpack(tape.value(id)) instead).
        """

    def shape(self, id: NodeId) -> tuple:
        """The node's shape."""

    def dtype(self, id: NodeId) -> DTypeName:
        """The node's dtype: "float32", "float64", "bfloat16" or "float16"."""

    def backward(self, out: NodeId, seed: object | None = None, path: VjpPath = 'fused', wanted: Sequence[NodeId] | None = None) -> Gradients:
        """
        Reverse pass from node `out` with upstream gradient `seed` (an array of the output's shape and dtype,
        used in place like a leaf, or copied when it is not on the backend's device or not contiguous;
        a list of numbers is copied in the output's dtype; None: ones). path: "fused" (one kernel per
        node, the default) or "staged" (the spec's stages); both give results
        identical up to NaN: equal bits, or both NaN (a NaN's sign and payload may differ between the paths).
        wanted: None (every node's gradient) or the nodes whose gradients to return: a node's VJP then runs
        only when it leads to one of them, and a tape program keeps the others in registers; the gradients
        returned are the full backward's, identical up to NaN; a node not on this tape raises InvalidNodeIdError.
        Returns a Gradients object; its arrays are ready to read (see Backend for the stream rule). On error the nodes, ids and values are as before; only
        `pending` may change: a backward whose arguments were valid but that failed later (e.g.
        OutOfMemoryError) on path "staged", or with an output of more than program_threshold elements,
        had already run the pending forwards, so `pending` is then 0.
        Sparse (training) convention: only nodes reachable from `out` that require grad get a gradient; the first contribution is kept bit-exact, later ones add.
        """

    def backward_dense(self, out: NodeId, seed: object | None = None, path: VjpPath = 'fused', wanted: Sequence[NodeId] | None = None) -> Gradients:
        """
        Reverse pass from node `out` with upstream gradient `seed` (an array of the output's shape and dtype,
        used in place like a leaf, or copied when it is not on the backend's device or not contiguous;
        a list of numbers is copied in the output's dtype; None: ones). path: "fused" (one kernel per
        node, the default) or "staged" (the spec's stages); both give results
        identical up to NaN: equal bits, or both NaN (a NaN's sign and payload may differ between the paths).
        wanted: None (every node's gradient) or the nodes whose gradients to return: a node's VJP then runs
        only when it leads to one of them, and a tape program keeps the others in registers; the gradients
        returned are the full backward's, identical up to NaN; a node not on this tape raises InvalidNodeIdError.
        Returns a Gradients object; its arrays are ready to read (see Backend for the stream rule). On error the nodes, ids and values are as before; only
        `pending` may change: a backward whose arguments were valid but that failed later (e.g.
        OutOfMemoryError) on path "staged", or with an output of more than program_threshold elements,
        had already run the pending forwards, so `pending` is then 0.
        Dense convention: every node that requires grad gets a gradient, starting from +0.
        """

    def add(self, a: NodeId, b: NodeId) -> Node:
        """
        add(a, b) -> Node: records the node add(a, b) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): da = copy(g); db = copy(g)
        """

    def sub(self, a: NodeId, b: NodeId) -> Node:
        """
        sub(a, b) -> Node: records the node sub(a, b) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): da = copy(g); ws z = full(+0); db = z - g
        """

    def mul(self, a: NodeId, b: NodeId) -> Node:
        """
        mul(a, b) -> Node: records the node mul(a, b) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): da = g * b; db = g * a
        """

    def neg(self, x: NodeId) -> Node:
        """
        neg(x) -> Node: records the node neg(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): dx = -g
        """

    def scale(self, x: NodeId, c: float) -> Node:
        """
        scale(x, c) -> Node: records the node scale(x, c) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): dx = g * R(c)
        """

    def abs(self, x: NodeId) -> Node:
        """
        abs(x) -> Node: records the node abs(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): native: dx = sign(x) * g, sign(+-0) = sign(NaN) = 0
        """

    def sqrt(self, x: NodeId) -> Node:
        """
        sqrt(x) -> Node: records the node sqrt(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): native: dx = x > 0 ? g * (1 / (sqrt(x) * 2)) : +0
        """

    def clamp(self, x: NodeId, lo: float, hi: float) -> Node:
        """
        clamp(x, lo, hi) -> Node: records the node clamp(x, lo, hi) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): native: dx = R(lo) < x && x < R(hi) ? g : +0
        """

    def max(self, a: NodeId, b: NodeId) -> Node:
        """
        max(a, b) -> Node: records the node max(a, b) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): native: a > b: (g, +0); b > a: (+0, g); else (g * 0.5, g * 0.5)
        """

    def min(self, a: NodeId, b: NodeId) -> Node:
        """
        min(a, b) -> Node: records the node min(a, b) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): native: a < b: (g, +0); b < a: (+0, g); else (g * 0.5, g * 0.5)
        """

    def div(self, a: NodeId, b: NodeId) -> Node:
        """
        div(a, b) -> Node: records the node div(a, b) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): da = g / b; ws q1 = a / b; ws q2 = q1 / b; ws t = g * q2; ws z = full(+0); db = z - t
        """

    def relu(self, x: NodeId) -> Node:
        """
        relu(x) -> Node: records the node relu(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): native: dx = x > 0 ? g : +0
        """

    def exp(self, x: NodeId) -> Node:
        """
        exp(x) -> Node: records the node exp(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): ws e = exp(x); dx = g * e
        """

    def sin(self, x: NodeId) -> Node:
        """
        sin(x) -> Node: records the node sin(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): ws c = cos(x); dx = c * g
        """

    def cos(self, x: NodeId) -> Node:
        """
        cos(x) -> Node: records the node cos(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): ws s = sin(x); ws d = s * (-1); dx = d * g
        """

    def log(self, x: NodeId) -> Node:
        """
        log(x) -> Node: records the node log(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): ws r = 1 / x; dx = g * r
        """

    def inv(self, x: NodeId) -> Node:
        """
        inv(x) -> Node: records the node inv(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): ws r = 1 / x; ws r2 = r * r; ws p = g * r2; dx = p * (-1)
        """

    def safeLog(self, x: NodeId, eps: float) -> Node:
        """
        safeLog(x, eps) -> Node: records the node safeLog(x, eps) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): ws E = full(R(eps)); ws sp = softplus(x); ws den = sp + E; ws sig = sigmoid(x); ws dl = sig / den; dx = g * dl
        """

    def sigmoid(self, x: NodeId) -> Node:
        """
        sigmoid(x) -> Node: records the node sigmoid(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): ws y = sigmoid(x); ws o = full(1); ws omy = o - y; ws dy = y * omy; dx = g * dy
        """

    def tanh(self, x: NodeId) -> Node:
        """
        tanh(x) -> Node: records the node tanh(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): ws y = tanh(x); ws o = full(1); ws y2 = y * y; ws dy = o - y2; dx = g * dy
        """

    def silu(self, x: NodeId) -> Node:
        """
        silu(x) -> Node: records the node silu(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): ws s = sigmoid_split(x); ws xs = x * s; ws o = full(1); ws oms = o - s; ws t = xs * oms; ws d = s + t; dx = g * d
        """

    def gelu(self, x: NodeId) -> Node:
        """
        gelu(x) -> Node: records the node gelu(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): ws t = tanh((x + ((x*c)*x)*x) * k) [6 ws]; ws tt = t * t; ws sech = 1 - tt; ws q = (x*c3)*x; ws id = (q + 1) * k; ws dt = (x*sech) * id; ws num = (t + 1) + dt; dx = (num * 0.5) * g
        """

    def softplus(self, x: NodeId) -> Node:
        """
        softplus(x) -> Node: records the node softplus(x) and returns it (scalars are rounded once to the dtype).
        Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one kernel): ws s = sigmoid(x); dx = g * s
        """

    def safe_log(self, x: NodeId, eps: float) -> Node:
        """Alias of safeLog."""

class Gradients:
    """
    The gradients of one backward pass, by node: grads[x], grads.get(x), x in grads (a Node of the tape,
    or its id; a node of another tape raises InvalidNodeIdError naming both tapes, and is never in them). Each array
    (a numpy array on the CPU backend, a DLPack object on CUDA) is exported without a copy, is
    writable, and shares its memory with the gradient's Buffer (grads.buffer(id)):
    the memory lives while either does, so it outlives this object. Releasing
    that Buffer takes the gradient out of this object (grads[id] then raises KeyError); arrays read
    before the release stay valid.
    """

    def __repr__(self) -> str: ...

    def __getitem__(self, id: NodeId) -> Any: ...

    def get(self, id: NodeId, default: object | None = None) -> object:
        """The gradient of node `id`, or `default` when it has none."""

    def buffer(self, id: NodeId) -> Buffer:
        """The gradient as a tapewise.Buffer (no copy)."""

    def host(self, id: NodeId) -> NDArray:
        """
        A host copy of the gradient as a new numpy array (from any backend); for bfloat16 an ml_dtypes.bfloat16
        array, TypeError without ml_dtypes (torch.from_dlpack(grads[id]) reads it then).
        """

    def __contains__(self, id: NodeId) -> bool: ...

    def __len__(self) -> int:
        """How many nodes have a gradient."""

    def __iter__(self) -> Iterator[Node]:
        """The ids with a gradient, ascending."""

    def ids(self) -> list[Node]:
        """The ids with a gradient, ascending."""

    @property
    def slots(self) -> int:
        """The tape's node count at the backward pass (positions 0 .. slots-1)."""

def ops() -> list[tuple[OpName, int, list[str]]]:
    """
    The nodes in table order (spec/ops.def): a list of (name, arity, scalar names); the index of
    a node is its op_index for Backend.forward_ptrs.
    """

def op_table() -> list:
    """
    Every column of the op table (spec/ops.def), one dict per node in table order: name, index,
    arity, scalars, scalar_contract, domain_log2_lo, domain_log2_hi (random magnitudes in
    [2^lo, 2^hi)), positive_only, kink, same_parent, bench_inputs, aten_parity, vjp_reads,
    sweep_reference, run_scalars, graded_scalars, edge_scalars
    (lists of {scalar name: value}) and staged. The same rows as `tapewise-conform ops --json`.
    """

spec_sha256: str = ...
