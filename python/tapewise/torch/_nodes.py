"""tapewise.torch._nodes — the Python autograd nodes: every tapewise node as a torch.autograd.Function
(_UnaryNode, _BinaryNode: the forward and the fused VJP are tapewise's kernels, run in place on the
tensors' memory), and what they and the rest of tapewise.torch share: the op indices, the dtype codes,
the backend for a tensor (backend_for) and the input checks."""

from __future__ import annotations

import numbers

try:
    import torch
except ImportError as e:  # tapewise itself works without torch; only tapewise.torch needs it
    raise ImportError("tapewise.torch needs PyTorch (pip install torch); the rest of tapewise works without it") from e

import tapewise

_OP_INDEX = {name: i for i, (name, _, _) in enumerate(tapewise.ops())}
_DTYPE_NAMES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16",
                torch.float16: "float16"}
# The dtype as the int code Backend._forward_raw/_vjp_raw take (no string parsing per call).
_DTYPE_CODES = {dtype: tapewise._tapewise.DTYPE_CODES[name] for dtype, name in _DTYPE_NAMES.items()}
_TIE_NODES = (_OP_INDEX["max"], _OP_INDEX["min"])

# Differentiating a gradient (a second derivative) raises this, on every path: tapewise defines first
# derivatives only, and a gradient left undifferentiable would read as zero to a Hessian.
SECOND_DERIVATIVE_ERROR = (
    "tapewise.torch: trying to differentiate twice a tapewise node: its gradient is differentiable once "
    "(once_differentiable's rule, stricter), since tapewise defines first derivatives only: no second "
    "derivative, Hessian or double backward goes through tapewise.torch")

_cpu_backend = None
_cuda_backends: dict[tuple[int, int, str], tapewise.Backend] = {}
# PyTorch's current cudaStream_t of a device as an int, without building a torch.cuda.Stream object
# per call (torch._C._cuda_getCurrentRawStream, private, what torch's compiled code calls; a CPU-only
# torch build lacks it, and a future torch might: torch.cuda.current_stream(...).cuda_stream then).
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
if _current_raw_stream is None:
    def _current_raw_stream(device: int) -> int:
        return torch.cuda.current_stream(device).cuda_stream


_cuda_math = "aten"


def set_math(math: str) -> None:
    """The math mode of the nodes on CUDA tensors from now on, process-wide: "aten" (the default: CUDA's
    libm, ATen's bits) or "exact" (tapewise's own exp, log, sin, cos and tanh, float32 correctly rounded:
    the CPU backend's bits on every node). CPU tensors always run exact mode, the CPU backend's only one.
    Work already queued keeps the mode it was queued with."""
    global _cuda_math
    if not isinstance(math, str) or math not in ("aten", "exact"):
        raise ValueError(f"tapewise.torch.set_math: math is {math!r}; it takes 'aten' or 'exact'")
    tapewise._tapewise._set_node_math(math)  # the C++ nodes' and custom ops' kernel table
    _cuda_math = math


def get_math() -> str:
    """The math mode of the nodes on CUDA tensors (set_math): "aten" or "exact"."""
    return _cuda_math


def backend_for(t: torch.Tensor) -> tapewise.Backend:
    """The backend that runs `t`'s nodes: the CPU backend, or a CUDA backend on PyTorch's current stream
    of `t`'s device in the math mode of set_math (cached per (device, stream, mode))."""
    global _cpu_backend
    if t.is_cuda:
        device = t.get_device()
        stream = _current_raw_stream(device)
        backend = _cuda_backends.get((device, stream, _cuda_math))
        if backend is None:
            backend = tapewise.cuda(device=device, stream=stream, math=_cuda_math)
            _cuda_backends[(device, stream, _cuda_math)] = backend
        return backend
    if t.is_cpu:
        if _cpu_backend is None:
            _cpu_backend = tapewise.cpu()
        return _cpu_backend
    raise TypeError(f"tapewise.torch: tensors on {t.device} are not supported (cpu or cuda)")


# Where the nodes run: on plain memory only. _routed(t) is True for what goes to the nodes' custom ops
# instead (tapewise.torch._custom_ops): a tensor subclass dispatched in Python (fake tensors), a meta
# tensor (the custom op's fake kernel gives its shape), anything while a torch.func transform (its
# wrappers), a dispatch mode (FakeTensorMode, make_fx) or a forward-mode dual level is in effect. The
# Python twin of the C++ nodes' plain() (torch_nodes.cpp); the common case, a torch.Tensor or a
# Parameter, costs a few attribute reads.
_PLAIN_CLASSES = {torch.Tensor, torch.nn.Parameter}
_KEY = torch._C.DispatchKey
_dispatch_keys = torch._C._dispatch_keys
_functorch_active = torch._C._are_functorch_transforms_active
_dispatch_modes = torch._C._len_torch_dispatch_stack
_forward_ad = torch.autograd.forward_ad


def _routed_tensor(t) -> bool:
    """What of _routed depends on the tensor (TypeError for a non-tensor, as the C++ nodes' binding)."""
    return (t.__class__ not in _PLAIN_CLASSES and _dispatch_keys(t).has(_KEY.Python)) or t.is_meta


def _routed_context() -> bool:
    """What of _routed depends on the thread's state, whatever the tensors."""
    return _functorch_active() or _dispatch_modes() > 0 or _forward_ad._current_level >= 0


def _routed(t) -> bool:
    return _routed_tensor(t) or _routed_context()


def _dtype_code(t: torch.Tensor, what: str) -> int:
    code = _DTYPE_CODES.get(t.dtype)
    if code is None:
        raise TypeError(f"tapewise.torch: {what} is {t.dtype}; tapewise takes float32, float64, bfloat16 or float16")
    return code


def _check_same(a: torch.Tensor, b: torch.Tensor, node: str) -> None:
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"tapewise.torch.{node}: inputs must have one shape, dtype and device (no broadcasting), "
                         f"got {tuple(a.shape)} {a.dtype} {a.device} and {tuple(b.shape)} {b.dtype} {b.device}")


# A Python number beside a tensor, where torch takes one (torch.add, sub, mul, div: either side);
# torch.maximum and torch.minimum take tensors only, and so do these.
NUMBER_NODES = {"add", "sub", "mul", "div"}


def _check_numbers(node: str, a, b, operand: type) -> tuple[bool, bool]:
    """Whether a and b are operands (instances of `operand`: tensors, or region values); raises the
    TypeError naming the argument for anything but an operand or, where node takes one, a real Python
    number (int, float, bool, numpy's) beside an operand."""
    a_operand, b_operand = isinstance(a, operand), isinstance(b, operand)
    for what, v, is_operand in (("a", a, a_operand), ("b", b, b_operand)):
        if is_operand:
            continue
        if node not in NUMBER_NODES and isinstance(v, numbers.Real):
            raise TypeError(f"tapewise.torch.{node}: {what} is a number ({type(v).__name__}); {node} takes two "
                            f"tensors, as torch.{node} does (add, sub, mul and div take a number beside a tensor)")
        if not isinstance(v, numbers.Real):
            raise TypeError(f"tapewise.torch.{node}: {what} is {type(v).__name__}; {node} takes two tensors" +
                            (", or a real Python number beside a tensor" if node in NUMBER_NODES else ""))
    if not (a_operand or b_operand):
        raise TypeError(f"tapewise.torch.{node}: a and b are both numbers; one must be a tensor (it gives the "
                        "result's shape, dtype and device)")
    return a_operand, b_operand


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
# _vjp_raw (fixed arity, int dtype code). differentiable_once's no_grad context and output marking
# are only needed when the backward itself records a graph (backward(create_graph=True)): the
# backward takes that path then and the lean one otherwise, with the same result.


class _UnaryNode(torch.autograd.Function):
    """y = op(x, scalars); backward: tapewise's fused VJP."""

    @staticmethod
    def forward(ctx, x, op_index, s0, s1):
        code = _dtype_code(x, "x")
        ctx.save_for_backward(x)  # the input itself: differentiable_once links to its history
        x = x.contiguous()
        y = torch.empty_like(x)
        backend = backend_for(x)
        n = x.numel()
        if n:  # an empty tensor has nothing to compute (and may have no address)
            backend._forward_raw(op_index, s0, s1, x.data_ptr(), 0, y.data_ptr(), n, code)
        ctx.node = (op_index, s0, s1, code, backend)
        return y

    @staticmethod
    def backward(ctx, g):
        if torch.is_grad_enabled():
            return _unary_backward_once(ctx, g)
        return _unary_backward(ctx, g)


def _unary_backward(ctx, g):
    (x,) = ctx.saved_tensors
    x = x.contiguous()
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
        ctx.save_for_backward(a, b)  # the inputs themselves: differentiable_once links to their history
        a, b = a.contiguous(), b.contiguous()
        y = torch.empty_like(a)
        backend = backend_for(a)
        n = a.numel()
        if n:
            backend._forward_raw(op_index, 0.0, 0.0, a.data_ptr(), b.data_ptr(), y.data_ptr(), n, code)
        ctx.node = (op_index, code, backend)
        return y

    @staticmethod
    def backward(ctx, g):
        if torch.is_grad_enabled():
            return _binary_backward_once(ctx, g)
        return _binary_backward(ctx, g)


def _binary_backward(ctx, g):
    a, b = ctx.saved_tensors
    a, b = a.contiguous(), b.contiguous()
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


class _DifferentiableOnce(torch.autograd.Function):
    """Gradients computed under create_graph=True, as outputs of a node whose edges are the backward
    node's saved inputs and the upstream gradient, and whose own backward raises: differentiating them
    with respect to anything they depend on raises SECOND_DERIVATIVE_ERROR. (once_differentiable
    links them to fresh leaves, and only when the upstream gradient requires grad: a Hessian, whose
    seed does not, would read zeros.)"""

    @staticmethod
    def forward(ctx, backward, node_ctx, g, *inputs):
        return backward(node_ctx, g)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(SECOND_DERIVATIVE_ERROR)


def differentiable_once(backward):
    """backward(ctx, g) whose gradients, made with grad mode on (create_graph=True), raise if
    differentiated; ctx.saved_tensors must be the node's inputs (what the gradients depend on)."""
    def marked(ctx, g):
        if not torch.is_grad_enabled():
            return backward(ctx, g)
        return _DifferentiableOnce.apply(backward, ctx, g, *ctx.saved_tensors)
    return marked


_unary_backward_once = differentiable_once(_unary_backward)
_binary_backward_once = differentiable_once(_binary_backward)
