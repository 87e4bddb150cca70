"""tapewise.torch — every tapewise node as a torch.autograd.Function: the forward and the fused VJP
are tapewise's kernels, run in place on the tensors' memory (no copies), on PyTorch's current CUDA
stream (or the CPU backend for CPU tensors).

    import torch, tapewise.torch as twt
    x = torch.randn(1 << 20, device="cuda", requires_grad=True)
    y = twt.maximum(twt.sin(x), twt.clamp(x, -0.5, 0.5))
    y.sum().backward()                       # x.grad: tapewise's fused VJPs

Inputs must be float32 or float64 tensors of one shape, dtype and device (no broadcasting); they are
made contiguous first. Double backward is not supported. Gradients are identical to
tapewise.Tape.backward's up to NaN (equal bits, or both NaN: a NaN's sign and payload may differ):
each backward is the node's fused VJP, and contributions accumulate as the tape's do (maximum(a, a)
and minimum(a, a) contribute the upstream gradient once, as the tape does).

Streams: the backend for a CUDA tensor is bound to PyTorch's current stream on that device (one
backend cached per (device, stream)), so tapewise's kernels are ordered with PyTorch's work exactly as
a native op's would be, and no synchronisation is needed. PyTorch runs each backward on its forward's
stream.
"""

from __future__ import annotations

try:
    import torch
    from torch.autograd.function import once_differentiable
except ImportError as e:  # tapewise itself works without torch; only this module needs it
    raise ImportError("tapewise.torch needs PyTorch (pip install torch); the rest of tapewise works without it") from e

import tapewise

_OP_INDEX = {name: i for i, (name, _, _) in enumerate(tapewise.ops())}
_DTYPE_NAMES = {torch.float32: "float32", torch.float64: "float64"}
# The dtype as the int code Backend._forward_raw/_vjp_raw take (no string parsing per call).
_DTYPE_CODES = {dtype: tapewise._tapewise.DTYPE_CODES[name] for dtype, name in _DTYPE_NAMES.items()}
_TIE_NODES = (_OP_INDEX["max"], _OP_INDEX["min"])

_cpu_backend = None
_cuda_backends: dict[tuple[int, int], tapewise.Backend] = {}
# PyTorch's current cudaStream_t of a device as an int, without building a torch.cuda.Stream object
# (a private torch function, ~10x cheaper; torch.cuda.current_stream(...).cuda_stream where absent).
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
if _current_raw_stream is None:  # pragma: no cover (every torch since 1.x has it)
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
        raise TypeError(f"tapewise.torch: {what} is {t.dtype}; tapewise takes float32 or float64")
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


def _unary(name):
    op_index = _OP_INDEX[name]

    def node(x: torch.Tensor) -> torch.Tensor:
        return _UnaryNode.apply(x, op_index, 0.0, 0.0)

    node.__name__ = node.__qualname__ = name
    node.__doc__ = f"tapewise's {name}(x) as a differentiable torch op (see the module docstring)."
    return node


def _binary(name, alias):
    op_index = _OP_INDEX[name]

    def node(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _BinaryNode.apply(a, b, op_index)

    node.__name__ = node.__qualname__ = alias
    node.__doc__ = f"tapewise's {name}(a, b) as a differentiable torch op (same shape, dtype and device)."
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


def scale(x: torch.Tensor, c: float) -> torch.Tensor:
    """tapewise's scale: x * R(c), c rounded once to x's dtype."""
    return _UnaryNode.apply(x, _OP_INDEX["scale"], float(c), 0.0)


def clamp(x: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """tapewise's clamp: fmin(fmax(x, R(lo)), R(hi)); gradient g strictly inside (lo, hi), +0 elsewhere."""
    return _UnaryNode.apply(x, _OP_INDEX["clamp"], float(lo), float(hi))


def safeLog(x: torch.Tensor, eps: float) -> torch.Tensor:  # noqa: N802 (the spec's name)
    """tapewise's safeLog: log(softplus(x) + R(eps))."""
    return _UnaryNode.apply(x, _OP_INDEX["safeLog"], float(eps), 0.0)


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
    name, op_index, scalar_names = row["name"], row["index"], row["scalars"]
    if row["arity"] == 2:
        return _binary(name, name)

    def node(x: torch.Tensor, *scalars: float) -> torch.Tensor:
        if len(scalars) != len(scalar_names):
            raise TypeError(f"tapewise.torch.{name} takes x and {len(scalar_names)} scalar(s) "
                            f"({', '.join(scalar_names) or 'none'}), got {len(scalars)}")
        s = [float(v) for v in scalars] + [0.0, 0.0]
        return _UnaryNode.apply(x, op_index, s[0], s[1])

    node.__name__ = node.__qualname__ = name
    node.__doc__ = f"tapewise's {name}(x{''.join(', ' + n for n in scalar_names)}) as a differentiable torch op."
    return node


# Every node of the op table under its spec name (tapewise.NODE_NAMES): NODES["max"] is maximum; a
# node added to the table without a function above is still here.
NODES = {row["name"]: _DEFINED.get(row["name"]) or _from_table(row) for row in tapewise.op_table()}
_stale = set(_DEFINED) - set(NODES)
if _stale:
    raise ImportError(f"tapewise.torch defines nodes the op table does not have: {sorted(_stale)}")

__all__ = ["backend_for", "NODES", "maximum", "minimum", "safe_log"] + [n for n in tapewise.NODE_NAMES if n in _DEFINED]
