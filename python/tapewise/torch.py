"""tapewise.torch — every tapewise node as a differentiable torch op: the forward and the fused VJP
are tapewise's kernels, run in place on the tensors' memory (no copies), on PyTorch's current CUDA
stream (or the CPU backend for CPU tensors); and region(fn), which runs a function written with
these ops as one tapewise tape.

    import torch, tapewise.torch as twt
    x = torch.randn(1 << 20, device="cuda", requires_grad=True)
    y = twt.maximum(twt.sin(x), twt.clamp(x, -0.5, 0.5))
    y.sum().backward()                       # x.grad: tapewise's fused VJPs, one autograd node each

    @twt.region                              # the same ops, one tape: forward and backward as programs
    def block(x, w):
        return twt.relu(twt.scale(twt.tanh(twt.mul(x, w)), 0.9))
    block(x, w).sum().backward()             # x.grad, w.grad: Tape.backward's bits

Node by node: inputs must be float32, float64, bfloat16 or float16 tensors of one shape, dtype and
device (no broadcasting); they are made contiguous first. Results have the inputs' dtype; in bfloat16
and float16 each stage is computed in float32 and rounded once to 16 bits, as ATen does, and scalars
are the dtype's values R16(R32(c)) (spec/conventions.md 0.3). Double backward is not supported (backward with
create_graph=True runs, and differentiating its result raises). Gradients are identical to
tapewise.Tape.backward's up to NaN (equal bits, or both NaN: a NaN's sign and payload may differ):
each backward is the node's fused VJP, and contributions accumulate as the tape's do (maximum(a, a)
and minimum(a, a) contribute the upstream gradient once, as the tape does).

C++ nodes: each call records one C++ autograd node, as PyTorch's own ops do (grad_fn
tapewise::UnaryNodeBackward or BinaryNodeBackward), so a node costs what an eager op does and its
backward runs no Python. They live in native/torch_nodes.cpp, which the first node call builds against
the installed torch (torch.utils.cpp_extension: a C++ compiler and ninja; 18-50 s, once per torch
build, cached under TAPEWISE_TORCH_NATIVE_DIR or ~/.cache/tapewise/torch_nodes). Where that cannot
be done, each node is a Python torch.autograd.Function instead, with the same bits and errors but
PyTorch's autograd.Function cost per call, and a RuntimeWarning says why. TAPEWISE_TORCH_NATIVE=1
raises instead, =0 uses the Python nodes without trying; node_path() says which run.

Regions (region(fn)): each call records a fresh tape (no compile step; Python control flow is
followed afresh every call), a leaf per distinct tensor argument (a view, no copy), the nodes of fn,
and returns the output as an ordinary torch tensor sharing the tape's memory, with one grad_fn whose
backward is Tape.backward(out, g, wanted=[the inputs that need a gradient]) — one backward program.
Each input's gradient is Tape.backward's, bit for bit (and the node-by-node path's up to NaN).
Autograd: inputs that do not require grad get none (and under torch.no_grad(), or with no input
requiring grad, the output has no grad_fn); the output feeds any further torch op; the inputs are saved
for backward, so changing one in place before backward raises PyTorch's in-place error, and a second
backward needs retain_graph=True (then the tape's backward runs again and PyTorch accumulates) or
raises PyTorch's "backward through the graph a second time" error. The output shares the tape's
memory, so the tape's values (every node of the region) live as long as the output tensor or its
graph does. fn must return one value (Tape.backward seeds one output); torch functions, operators and
bool() on region values raise TypeError, and so does a torch tensor reaching an op without being an
argument. Double backward through a region is not supported, as node by node.

Streams: the backend for a CUDA tensor is bound to PyTorch's current stream on that device (one
backend cached per (device, stream)), so tapewise's kernels are ordered with PyTorch's work exactly as
a native op's would be, and no synchronisation is needed. PyTorch runs each backward on its forward's
stream, which is the stream the node's (or the region's tape's) backend is bound to.

torch.compile: a region is one graph break (it is torch.compiler.disable'd: Dynamo would otherwise
trace into the recording and fail on the tape's arrays); the graphs before and after it are compiled
and the region runs eagerly between them, with the same bits as without compile. A node called
directly under torch.compile is a graph break too (Dynamo cannot trace the kernel call), so a compiled
function of n nodes is n + 1 graphs: use a region there. Observed with torch 2.15 on the CPU, backends
eager, aot_eager and inductor.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import threading
import time
import warnings
from pathlib import Path

try:
    import torch
    from torch.autograd.function import once_differentiable
except ImportError as e:  # tapewise itself works without torch; only this module needs it
    raise ImportError("tapewise.torch needs PyTorch (pip install torch); the rest of tapewise works without it") from e

import tapewise

_OP_INDEX = {name: i for i, (name, _, _) in enumerate(tapewise.ops())}
_DTYPE_NAMES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16",
                torch.float16: "float16"}
# The dtype as the int code Backend._forward_raw/_vjp_raw take (no string parsing per call).
_DTYPE_CODES = {dtype: tapewise._tapewise.DTYPE_CODES[name] for dtype, name in _DTYPE_NAMES.items()}
_TIE_NODES = (_OP_INDEX["max"], _OP_INDEX["min"])

_cpu_backend = None
_cuda_backends: dict[tuple[int, int], tapewise.Backend] = {}
# PyTorch's current cudaStream_t of a device as an int, without building a torch.cuda.Stream object
# per call (torch._C._cuda_getCurrentRawStream, private, what torch's compiled code calls; a CPU-only
# torch build lacks it, and a future torch might: torch.cuda.current_stream(...).cuda_stream then).
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
if _current_raw_stream is None:
    def _current_raw_stream(device: int) -> int:
        return torch.cuda.current_stream(device).cuda_stream


def backend_for(t: torch.Tensor) -> tapewise.Backend:
    """The backend that runs `t`'s nodes: the CPU backend, or a CUDA backend on PyTorch's current stream
    of `t`'s device (cached per (device, stream))."""
    global _cpu_backend
    if t.is_cuda:
        device = t.get_device()
        stream = _current_raw_stream(device)
        backend = _cuda_backends.get((device, stream))
        if backend is None:
            backend = tapewise.cuda(device=device, stream=stream)
            _cuda_backends[(device, stream)] = backend
        return backend
    if t.is_cpu:
        if _cpu_backend is None:
            _cpu_backend = tapewise.cpu()
        return _cpu_backend
    raise TypeError(f"tapewise.torch: tensors on {t.device} are not supported (cpu or cuda)")


def _dtype_code(t: torch.Tensor, what: str) -> int:
    code = _DTYPE_CODES.get(t.dtype)
    if code is None:
        raise TypeError(f"tapewise.torch: {what} is {t.dtype}; tapewise takes float32, float64, bfloat16 or float16")
    return code


def _check_same(a: torch.Tensor, b: torch.Tensor, node: str) -> None:
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"tapewise.torch.{node}: inputs must have one shape, dtype and device (no broadcasting), "
                         f"got {tuple(a.shape)} {a.dtype} {a.device} and {tuple(b.shape)} {b.dtype} {b.device}")


def _upstream(g: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The upstream gradient as contiguous memory of the node's dtype (sum()'s backward, for one, hands
    an expanded, stride-0 g); no work when it already is."""
    if g.dtype is not dtype:
        g = g.to(dtype)
    return g.contiguous()


# The fast path of each node: the forward and backward below do no more per call than the kernels
# need — the backend is taken once in the forward and kept on ctx (PyTorch runs a node's backward on
# its forward's stream, the stream that backend is bound to), outputs are torch.empty_like of
# contiguous inputs (already contiguous), and the kernels are called through Backend._forward_raw /
# _vjp_raw (fixed arity, int dtype code). once_differentiable's no_grad context and output wrapping
# are only needed when the backward itself records a graph (backward(create_graph=True)): the
# backward takes that path then and the lean one otherwise, with the same result.


class _UnaryNode(torch.autograd.Function):
    """y = op(x, scalars); backward: tapewise's fused VJP."""

    @staticmethod
    def forward(ctx, x, op_index, s0, s1):
        code = _dtype_code(x, "x")
        x = x.contiguous()
        y = torch.empty_like(x)
        backend = backend_for(x)
        n = x.numel()
        if n:  # an empty tensor has nothing to compute (and may have no address)
            backend._forward_raw(op_index, s0, s1, x.data_ptr(), 0, y.data_ptr(), n, code)
        ctx.save_for_backward(x)
        ctx.node = (op_index, s0, s1, code, backend)
        return y

    @staticmethod
    def backward(ctx, g):
        if torch.is_grad_enabled():
            return _unary_backward_once(ctx, g)
        return _unary_backward(ctx, g)


def _unary_backward(ctx, g):
    (x,) = ctx.saved_tensors
    op_index, s0, s1, code, backend = ctx.node
    g = _upstream(g, x.dtype)
    dx = torch.empty_like(x)
    n = x.numel()
    if n:
        backend._vjp_raw(op_index, s0, s1, x.data_ptr(), 0, g.data_ptr(), dx.data_ptr(), 0, n, code)
    return dx, None, None, None


class _BinaryNode(torch.autograd.Function):
    """y = op(a, b); backward: tapewise's fused VJP (both gradients in one kernel)."""

    @staticmethod
    def forward(ctx, a, b, op_index):
        code = _dtype_code(a, "a")
        if a.shape != b.shape or a.dtype is not b.dtype or a.device != b.device:
            _check_same(a, b, tapewise.NODE_NAMES[op_index])
        ctx.same_input = a is b
        a, b = a.contiguous(), b.contiguous()
        y = torch.empty_like(a)
        backend = backend_for(a)
        n = a.numel()
        if n:
            backend._forward_raw(op_index, 0.0, 0.0, a.data_ptr(), b.data_ptr(), y.data_ptr(), n, code)
        ctx.save_for_backward(a, b)
        ctx.node = (op_index, code, backend)
        return y

    @staticmethod
    def backward(ctx, g):
        if torch.is_grad_enabled():
            return _binary_backward_once(ctx, g)
        return _binary_backward(ctx, g)


def _binary_backward(ctx, g):
    a, b = ctx.saved_tensors
    op_index, code, backend = ctx.node
    g = _upstream(g, a.dtype)
    if ctx.same_input and op_index in _TIE_NODES:
        # The tape's rule for max(a, a)/min(a, a): the upstream gradient once, not g*0.5 + g*0.5
        # (which differs from g where g*0.5 underflows).
        return g.clone(), None, None
    da = torch.empty_like(a)
    db = torch.empty_like(b)
    n = a.numel()
    if n:
        backend._vjp_raw(op_index, 0.0, 0.0, a.data_ptr(), b.data_ptr(), g.data_ptr(), da.data_ptr(), db.data_ptr(),
                         n, code)
    return da, db, None


_unary_backward_once = once_differentiable(_unary_backward)
_binary_backward_once = once_differentiable(_binary_backward)


# ---------------------------------------------------------------------------------------------------
# The native nodes: the same two Functions in C++ (tapewise/native/torch_nodes.cpp), built against the
# installed torch on the first node call and cached, so that PyTorch's autograd runs a node with no
# Python. The nodes below call _unary_apply/_binary_apply, which that first call binds to the C++
# nodes or to the Python Functions above (TAPEWISE_TORCH_NATIVE, node_path()).

_NATIVE_SOURCES = Path(__file__).resolve().parent / "native"
_STALE_LOCK_SECONDS = 15 * 60  # a build takes under a minute; an older lock was left by a killed one
_node_lock = threading.Lock()
_node_path: tuple[str, str] | None = None


def _native_mode() -> str:
    mode = os.environ.get("TAPEWISE_TORCH_NATIVE", "auto").strip().lower() or "auto"
    if mode not in ("auto", "1", "0"):
        raise ValueError(f"tapewise.torch: TAPEWISE_TORCH_NATIVE={os.environ['TAPEWISE_TORCH_NATIVE']!r} is not "
                         "auto (the default: the C++ nodes, else the Python ones with a warning), 1 (the C++ nodes, "
                         "or an error) or 0 (the Python nodes)")
    return mode


def _native_build_dir() -> tuple[str, Path]:
    """The extension's module name and build folder: one per (source, torch build, Python), so that a
    new torch or tapewise builds afresh and never loads a library built against another."""
    digest = hashlib.sha256()
    for part in (_NATIVE_SOURCES / "torch_nodes.cpp", _NATIVE_SOURCES / "node_kernels.h"):
        digest.update(part.read_bytes())
    for part in (torch.__version__, getattr(torch.version, "git_version", ""), sys.version,
                 str(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", ""))):
        digest.update(part.encode())
    name = f"tapewise_torch_nodes_{digest.hexdigest()[:16]}"
    root = os.environ.get("TAPEWISE_TORCH_NATIVE_DIR")
    if not root:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(cache, "tapewise", "torch_nodes")
    return name, Path(root) / name


_native_module = None  # (module, library path) once loaded: a process loads the library once


def _load_native():
    """The C++ nodes' module, initialised, and its library's path: imported from the cache, or built
    there first (18-50 s, once per torch build). Raises whatever stops either."""
    global _native_module
    if _native_module is not None:
        return _native_module
    name, build_dir = _native_build_dir()
    library = build_dir / f"{name}{'.pyd' if sys.platform == 'win32' else '.so'}"  # cpp_extension's LIB_EXT
    if library.is_file():
        spec = importlib.util.spec_from_file_location(name, library)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        from torch.utils import cpp_extension  # only to build: importing it costs a fresh process 0.1-0.5 s

        build_dir.mkdir(parents=True, exist_ok=True)
        lock = build_dir / "lock"
        if lock.exists() and time.time() - lock.stat().st_mtime > _STALE_LOCK_SECONDS:
            lock.unlink()  # older torch waits on a lock file's mere existence, for ever
        print(f"tapewise.torch: building its C++ autograd nodes against torch {torch.__version__}, once "
              f"(cached in {build_dir}; TAPEWISE_TORCH_NATIVE=0 skips this)", file=sys.stderr, flush=True)
        module = cpp_extension.load(name, [str(_NATIVE_SOURCES / "torch_nodes.cpp")],
                                    extra_include_paths=[str(_NATIVE_SOURCES)], extra_cflags=["-O2"],
                                    build_directory=str(build_dir), verbose=False)
    module.init(tapewise._tapewise._node_kernels(), _refuse, _OP_INDEX["max"], _OP_INDEX["min"])
    _native_module = (module, str(library))
    return _native_module


def _refuse(op_index, a, b):
    """Raises the Python path's error for inputs the C++ nodes do not take (they call this)."""
    node = tapewise.NODE_NAMES[op_index]
    _dtype_code(a, "x" if b is None else "a")
    if b is not None:
        _check_same(a, b, node)
    backend_for(a)  # a device other than cpu or cuda
    raise RuntimeError(f"tapewise.torch.{node}: the C++ node refused inputs that the Python node takes")


def _bind_nodes(kind: str, detail: str, module=None) -> None:
    global _unary_apply, _binary_apply, _node_path
    if kind == "native":
        _unary_apply, _binary_apply = module.unary, module.binary
    else:
        _unary_apply, _binary_apply = _UnaryNode.apply, _BinaryNode.apply
    _node_path = (kind, detail)


def _choose_nodes() -> None:
    with _node_lock:
        if _node_path is not None:
            return
        mode = _native_mode()
        if mode == "0":
            _bind_nodes("python", "TAPEWISE_TORCH_NATIVE=0")
            return
        try:
            module, library = _load_native()
            _bind_nodes("native", library, module)
        except Exception as failure:  # noqa: BLE001 (any failure to build or load: raised, or the Python nodes)
            why = f"{type(failure).__name__}: {failure}"
            if len(why) > 2000:  # a compiler's output; the end names the error
                why = "..." + why[-2000:]
            if mode == "1":
                raise RuntimeError("tapewise.torch: TAPEWISE_TORCH_NATIVE=1, but its C++ nodes could not be built "
                                   f"or loaded: {why}") from failure
            _bind_nodes("python", f"the C++ nodes could not be built or loaded ({why})")
            warnings.warn("tapewise.torch: each node runs as a Python autograd.Function, slower than PyTorch's own "
                          f"ops, because {_node_path[1]}. TAPEWISE_TORCH_NATIVE=0 chooses these nodes without "
                          "trying; remove the cache folder to retry a build.", RuntimeWarning, stacklevel=4)


def _use_nodes(kind: str) -> None:
    """Binds the nodes to "native" (loaded, or built, now: raises if it cannot be) or "python", whatever
    TAPEWISE_TORCH_NATIVE says: for tests and benchmarks that run both in one process."""
    with _node_lock:
        if kind == "native":
            module, library = _load_native()
            _bind_nodes("native", library, module)
        elif kind == "python":
            _bind_nodes("python", "chosen by tapewise.torch._use_nodes")
        else:
            raise ValueError(f"tapewise.torch._use_nodes: {kind!r} is not 'native' or 'python'")


def _first_unary(x, op_index, s0, s1):
    _choose_nodes()
    return _unary_apply(x, op_index, s0, s1)


def _first_binary(a, b, op_index):
    _choose_nodes()
    return _binary_apply(a, b, op_index)


_unary_apply, _binary_apply = _first_unary, _first_binary


def node_path() -> tuple[str, str]:
    """Which code runs the nodes outside regions, choosing it first if no node has run yet: ("native",
    the C++ nodes' library) or ("python", why not). TAPEWISE_TORCH_NATIVE picks: auto (the default)
    builds the C++ nodes against the installed torch on first use, 18-50 s once per torch build,
    cached under TAPEWISE_TORCH_NATIVE_DIR or ~/.cache/tapewise/torch_nodes, and falls back to the Python
    nodes with a RuntimeWarning saying why when it cannot (no C++ compiler or ninja, say); 1 raises
    instead; 0 uses the Python nodes. Both give the same bits and errors."""
    _choose_nodes()
    return _node_path


# ---------------------------------------------------------------------------------------------------
# Regions: a function written with these ops, run as one tape program.


# A region call and its values are the extension's (tapewise._tapewise._Region, _RegionValue): an op
# on a region value is then one call into it, which records the node and makes its value, with no
# Python object built in Python (a Python class's instance cost more than the node, per node).
_Region = tapewise._tapewise._Region
_region_unary = tapewise._tapewise._region_unary
_region_binary = tapewise._tapewise._region_binary


class _Value(tapewise._tapewise._RegionValue):
    """A tensor inside a region: a node of the region's tape. tapewise.torch's ops take it where they take
    a torch tensor and record a node instead of running kernels; nothing else does (a torch function
    called on it raises TypeError). Its value is computed when the region returns."""

    __slots__ = ()

    def _tape(self, what):
        tape = self._region.tape
        if tape is None:
            raise RuntimeError(f"tapewise.torch.{what}: this value belongs to region {self._region.name}, which has "
                               "returned; a region's values stay inside it (its output is a torch tensor)")
        return tape

    @property
    def shape(self) -> torch.Size:
        return torch.Size(self._tape("shape").shape(self._id))

    @property
    def dtype(self) -> torch.dtype:
        return getattr(torch, self._tape("dtype").dtype(self._id))

    def __repr__(self):
        tape = self._region.tape
        where = f"{tuple(tape.shape(self._id))} {tape.dtype(self._id)}" if tape is not None else "finished"
        return f"<tapewise.torch region value: node {self._id} of region {self._region.name}, {where}>"

    def __bool__(self):
        raise TypeError("tapewise.torch.region: a region's values are computed when it returns, so Python control "
                        "flow cannot depend on them")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        raise TypeError(f"tapewise.torch.region: {name} was called on a region value; inside a region only "
                        "tapewise.torch's ops record (torch functions and operators on region values are refused)")


def _refuse_operator(symbol):
    def refuse(self, *other):
        raise TypeError(f"tapewise.torch.region: operator {symbol} on a region value; use tapewise.torch's ops "
                        "(add, sub, mul, div, neg, scale) inside a region")
    return refuse


for _dunder, _symbol in [("add", "+"), ("radd", "+"), ("sub", "-"), ("rsub", "-"), ("mul", "*"), ("rmul", "*"),
                         ("truediv", "/"), ("rtruediv", "/"), ("neg", "unary -"), ("pow", "**"), ("rpow", "**"),
                         ("matmul", "@"), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">=")]:
    setattr(_Value, f"__{_dunder}__", _refuse_operator(_symbol))


def _value_or_tensor_error(node, *xs):
    kinds = ", ".join(type(x).__name__ for x in xs)
    return TypeError(f"tapewise.torch.{node}: inside a region every input must be a value of that region ({kinds} "
                     "given): pass each torch tensor as an argument of the region's function")


def _record_unary(node, op_index, x, s0=0.0, s1=0.0):
    value = _region_unary(op_index, x, s0, s1)
    if value is None:
        x._tape(node)  # raises: the region has returned
    return value


def _record_binary(node, op_index, a, b):
    if a.__class__ is not _Value or b.__class__ is not _Value:
        raise _value_or_tensor_error(node, a, b)
    try:
        value = _region_binary(op_index, a, b)
    except (tapewise.ShapeMismatchError, tapewise.DTypeMismatchError) as mismatch:
        raise ValueError(f"tapewise.torch.{node}: inputs must have one shape, dtype and device (no broadcasting), "
                         f"got {tuple(a.shape)} {a.dtype} and {tuple(b.shape)} {b.dtype}") from mismatch
    if value is None:
        if a._region is not b._region:
            raise ValueError(f"tapewise.torch.{node}: its inputs belong to different regions "
                             f"({a._region.name} and {b._region.name})")
        a._tape(node)  # raises: the region has returned
    return value


class _RegionNode(torch.autograd.Function):
    """The autograd node of one region call: forward hands out the tape's output value (recorded and
    flushed before), backward is the tape's one backward program for the inputs that need a gradient."""

    @staticmethod
    def forward(ctx, recorded, *inputs):
        tape, out_id, leaves = recorded
        ctx.recorded = recorded
        # The tape views the inputs' memory: saving them makes PyTorch refuse a backward after an
        # in-place change of one (as for any saved tensor), and free them with the graph.
        ctx.save_for_backward(*inputs)
        if out_id in leaves:  # the function returned one of its inputs
            returned = inputs[leaves.index(out_id)]
            return returned.view_as(returned)
        return torch.from_dlpack(tape.value(out_id))

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        ctx.saved_tensors  # raises for a second backward of a graph freed by the first (no retain_graph)
        tape, out_id, leaves = ctx.recorded
        needs = ctx.needs_input_grad[1:]
        wanted = [leaf for leaf, need in zip(leaves, needs) if need]
        grads = tape.backward(out_id, g.detach().contiguous(), wanted=wanted)
        return (None, *[torch.from_dlpack(grads[leaf]) if need and leaf in grads else None
                        for leaf, need in zip(leaves, needs)])


def _region_inputs(args, kwargs, name):
    """The distinct torch tensors among the arguments (a tensor passed twice is one leaf), checked."""
    tensors, seen = [], set()
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor) and id(a) not in seen:
            seen.add(id(a))
            tensors.append(a)
    if not tensors:
        raise TypeError(f"tapewise.torch.region {name}: no torch tensor among the arguments")
    first = tensors[0]
    for k, t in enumerate(tensors):
        _dtype_code(t, f"region {name}'s tensor argument {k}")
        if t.device != first.device:
            raise ValueError(f"tapewise.torch.region {name}: every tensor argument must be on one device "
                             f"(one tape), got {first.device} and {t.device}")
    return tensors


_compiler_disable = getattr(getattr(torch, "compiler", None), "disable", None) or torch._dynamo.disable


def _run_region(fn, name, args, kwargs):
    if any(a.__class__ is _Value for a in (*args, *kwargs.values())):
        return fn(*args, **kwargs)  # called inside another region: its ops record onto that tape
    tensors = _region_inputs(args, kwargs, name)
    tape = tapewise.Tape(backend_for(tensors[0]))
    region = _Region(tape, name)
    leaves = [tape.leaf(t.detach().contiguous(), requires_grad=t.requires_grad) for t in tensors]
    value_of = {id(t): _Value(region, leaf) for t, leaf in zip(tensors, leaves)}

    def lift(a):
        return value_of[id(a)] if isinstance(a, torch.Tensor) else a

    try:
        out = fn(*[lift(a) for a in args], **{k: lift(v) for k, v in kwargs.items()})
    finally:
        region.tape = None  # values that escape (closures, globals) refuse to record from now on
    if out.__class__ is not _Value or out._region is not region:
        several = isinstance(out, (tuple, list)) and any(v.__class__ is _Value for v in out)
        raise TypeError(
            f"tapewise.torch.region {name} must return one value computed by tapewise.torch ops on its arguments, "
            f"got {type(out).__name__}" +
            (": several outputs are not supported, since Tape.backward seeds one output per backward program "
             "(sum them with add, or use one region per output)" if several else ""))
    return _RegionNode.apply((tape, out._id, leaves), *tensors)


def region(fn):
    """Runs `fn`, written with tapewise.torch ops, as one tapewise tape: returns a function taking the
    same arguments. Each call records a fresh tape (no compile step, no caching: any Python control
    flow is followed afresh), with a leaf per distinct torch tensor argument (viewed, no copy;
    requires_grad as the tensor's), and returns the output as an ordinary torch tensor (zero-copy from
    the tape's memory) whose grad_fn runs Tape.backward(out, g, wanted=[the inputs that need a
    gradient]). The tape runs them as it always does: up to Tape.program_threshold elements (2^20 by
    default) the forward is a tape program per Tape.max_pending_nodes nodes (448) and the backward one
    program; larger tensors run a kernel per node.

        @twt.region
        def block(x, w):
            return twt.relu(twt.scale(twt.tanh(twt.mul(x, w)), 0.9))
        block(x, w).sum().backward()        # x.grad, w.grad: Tape.backward's bits

    Inside, `fn` sees region values in place of its tensor arguments: tapewise.torch ops record nodes
    on them; torch functions, operators and bool() on them raise TypeError. Non-tensor arguments pass
    through. `fn` must return one region value (Tape.backward seeds one output). Called inside another
    region, `fn` records onto that region's tape. Called without region(), the same `fn` runs node by
    node on torch tensors."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)

    @functools.wraps(fn)
    def run_region(*args, **kwargs):
        return _run_region(fn, name, args, kwargs)

    # torch.compile: Dynamo would trace into the recording and fail on the tape's arrays; disabled, the
    # region is one graph break, run eagerly between the compiled graphs before and after it.
    return _compiler_disable(run_region)


# ---------------------------------------------------------------------------------------------------
# The ops: each takes torch tensors (one autograd node per call) or region values (one tape node).


def _unary(name):
    op_index = _OP_INDEX[name]

    def node(x: torch.Tensor) -> torch.Tensor:
        if x.__class__ is _Value:
            value = _region_unary(op_index, x, 0.0, 0.0)
            return value if value is not None else x._tape(name)  # _tape raises: the region has returned
        return _unary_apply(x, op_index, 0.0, 0.0)

    node.__name__ = node.__qualname__ = name
    node.__doc__ = f"tapewise's {name}(x) as a differentiable torch op (see the module docstring)."
    return node


def _binary(name, alias):
    op_index = _OP_INDEX[name]

    def node(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if a.__class__ is _Value or b.__class__ is _Value:
            return _record_binary(alias, op_index, a, b)
        return _binary_apply(a, b, op_index)

    node.__name__ = node.__qualname__ = alias
    node.__doc__ = f"tapewise's {name}(a, b) as a differentiable torch op (same shape, dtype and device)."
    return node


def _with_scalars(name, scalar_names):
    """A node with scalars (one of the op table without a function of its own), called as (x, *scalars)."""
    op_index = _OP_INDEX[name]

    def node(x, *scalars):
        if len(scalars) != len(scalar_names):
            raise TypeError(f"tapewise.torch.{name} takes x and {len(scalar_names)} scalar(s) "
                            f"({', '.join(scalar_names) or 'none'}), got {len(scalars)}")
        s = [float(v) for v in scalars]
        if x.__class__ is _Value:
            return _record_unary(name, op_index, x, *s)
        s += [0.0, 0.0]
        return _unary_apply(x, op_index, s[0], s[1])

    return node


add = _binary("add", "add")
sub = _binary("sub", "sub")
mul = _binary("mul", "mul")
maximum = _binary("max", "maximum")
minimum = _binary("min", "minimum")
div = _binary("div", "div")
neg = _unary("neg")
abs = _unary("abs")  # noqa: A001 (the node's name)
sqrt = _unary("sqrt")
relu = _unary("relu")
exp = _unary("exp")
sin = _unary("sin")
cos = _unary("cos")
log = _unary("log")
inv = _unary("inv")
sigmoid = _unary("sigmoid")
tanh = _unary("tanh")
silu = _unary("silu")
gelu = _unary("gelu")
softplus = _unary("softplus")

_SCALE, _CLAMP, _SAFE_LOG = _OP_INDEX["scale"], _OP_INDEX["clamp"], _OP_INDEX["safeLog"]


def scale(x: torch.Tensor, c: float) -> torch.Tensor:
    """tapewise's scale: x * R(c), c rounded once to x's dtype."""
    if x.__class__ is _Value:
        return _record_unary("scale", _SCALE, x, float(c))
    return _unary_apply(x, _SCALE, float(c), 0.0)


def clamp(x: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """tapewise's clamp: fmin(fmax(x, R(lo)), R(hi)); gradient g strictly inside (lo, hi), +0 elsewhere."""
    if x.__class__ is _Value:
        return _record_unary("clamp", _CLAMP, x, float(lo), float(hi))
    return _unary_apply(x, _CLAMP, float(lo), float(hi))


def safeLog(x: torch.Tensor, eps: float) -> torch.Tensor:  # noqa: N802 (the spec's name)
    """tapewise's safeLog: log(softplus(x) + R(eps))."""
    if x.__class__ is _Value:
        return _record_unary("safeLog", _SAFE_LOG, x, float(eps))
    return _unary_apply(x, _SAFE_LOG, float(eps), 0.0)


safe_log = safeLog
max = maximum  # noqa: A001 (the spec's node names are aliases of the torch-style ones)
min = minimum  # noqa: A001

_DEFINED = {
    "add": add, "sub": sub, "mul": mul, "neg": neg, "scale": scale, "abs": abs, "sqrt": sqrt, "clamp": clamp,
    "max": maximum, "min": minimum, "div": div, "relu": relu, "exp": exp, "sin": sin, "cos": cos, "log": log,
    "inv": inv, "safeLog": safeLog, "sigmoid": sigmoid, "tanh": tanh, "silu": silu, "gelu": gelu,
    "softplus": softplus,
}


def _from_table(row):
    """A node of the op table without a function above: called as (x, *scalars) or (a, b)."""
    name = row["name"]
    if row["arity"] == 2:
        return _binary(name, name)
    node = _with_scalars(name, row["scalars"]) if row["scalars"] else _unary(name)
    node.__name__ = node.__qualname__ = name
    node.__doc__ = f"tapewise's {name}(x{''.join(', ' + n for n in row['scalars'])}) as a differentiable torch op."
    return node


# Every node of the op table under its spec name (tapewise.NODE_NAMES): NODES["max"] is maximum; a
# node added to the table without a function above is still here.
NODES = {row["name"]: _DEFINED.get(row["name"]) or _from_table(row) for row in tapewise.op_table()}
_stale = set(_DEFINED) - set(NODES)
if _stale:
    raise ImportError(f"tapewise.torch defines nodes the op table does not have: {sorted(_stale)}")

__all__ = ["backend_for", "node_path", "region", "NODES", "maximum", "minimum", "safe_log"] + \
    [n for n in tapewise.NODE_NAMES if n in _DEFINED]
