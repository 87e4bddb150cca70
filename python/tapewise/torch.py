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
_TIE_NODES = (_OP_INDEX["max"], _OP_INDEX["min"])

_cpu_backend = None
_cuda_backends: dict[tuple[int, int], tapewise.Backend] = {}


def backend_for(t: torch.Tensor) -> tapewise.Backend:
    """The backend that runs `t`'s nodes: the CPU backend, or a CUDA backend on PyTorch's current stream
    of `t`'s device (cached per (device, stream))."""
    global _cpu_backend
    if t.device.type == "cpu":
        if _cpu_backend is None:
            _cpu_backend = tapewise.cpu()
        return _cpu_backend
    if t.device.type != "cuda":
        raise TypeError(f"tapewise.torch: tensors on {t.device} are not supported (cpu or cuda)")
    device = t.device.index if t.device.index is not None else torch.cuda.current_device()
    stream = torch.cuda.current_stream(device).cuda_stream
    backend = _cuda_backends.get((device, stream))
    if backend is None:
        backend = tapewise.cuda(device=device, stream=stream)
        _cuda_backends[(device, stream)] = backend
    return backend


def _dtype_name(t: torch.Tensor, what: str) -> str:
    name = _DTYPE_NAMES.get(t.dtype)
    if name is None:
        raise TypeError(f"tapewise.torch: {what} is {t.dtype}; tapewise takes float32 or float64")
    return name


def _check_same(a: torch.Tensor, b: torch.Tensor, node: str) -> None:
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"tapewise.torch.{node}: inputs must have one shape, dtype and device (no broadcasting), "
                         f"got {tuple(a.shape)} {a.dtype} {a.device} and {tuple(b.shape)} {b.dtype} {b.device}")


class _UnaryNode(torch.autograd.Function):
    """y = op(x, scalars); backward: tapewise's fused VJP."""

    @staticmethod
    def forward(ctx, x, op_index, s0, s1):
        dtype = _dtype_name(x, "x")
        x = x.contiguous()
        y = torch.empty_like(x, memory_format=torch.contiguous_format)
        backend_for(x).forward_ptrs(op_index, s0, s1, (x.data_ptr(),), y.data_ptr(), x.numel(), dtype)
        ctx.save_for_backward(x)
        ctx.node = (op_index, s0, s1, dtype)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        op_index, s0, s1, dtype = ctx.node
        g = g.to(dtype=x.dtype).contiguous()  # e.g. sum()'s backward hands an expanded (stride 0) g
        dx = torch.empty_like(x, memory_format=torch.contiguous_format)
        backend_for(x).vjp_fused_ptrs(op_index, s0, s1, (x.data_ptr(),), g.data_ptr(), (dx.data_ptr(),), x.numel(), dtype)
        return dx, None, None, None


class _BinaryNode(torch.autograd.Function):
    """y = op(a, b); backward: tapewise's fused VJP (both gradients in one kernel)."""

    @staticmethod
    def forward(ctx, a, b, op_index):
        dtype = _dtype_name(a, "a")
        _check_same(a, b, tapewise.NODE_NAMES[op_index])
        ctx.same_input = a is b
        a, b = a.contiguous(), b.contiguous()
        y = torch.empty_like(a, memory_format=torch.contiguous_format)
        backend_for(a).forward_ptrs(op_index, 0.0, 0.0, (a.data_ptr(), b.data_ptr()), y.data_ptr(), a.numel(), dtype)
        ctx.save_for_backward(a, b)
        ctx.node = (op_index, dtype)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        op_index, dtype = ctx.node
        g = g.to(dtype=a.dtype).contiguous()
        if ctx.same_input and op_index in _TIE_NODES:
            # The tape's rule for max(a, a)/min(a, a): the upstream gradient once, not g*0.5 + g*0.5
            # (which differs from g where g*0.5 underflows).
            return g.clone(), None, None
        da = torch.empty_like(a, memory_format=torch.contiguous_format)
        db = torch.empty_like(b, memory_format=torch.contiguous_format)
        backend_for(a).vjp_fused_ptrs(op_index, 0.0, 0.0, (a.data_ptr(), b.data_ptr()), g.data_ptr(),
                                      (da.data_ptr(), db.data_ptr()), a.numel(), dtype)
        return da, db, None


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
