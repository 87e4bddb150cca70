"""tapewise.torch._custom_ops — every node's forward and fused VJP as a torch.library custom op
(torch.ops.tapewise.<node> and torch.ops.tapewise.<node>_vjp), with fake kernels, autograd and vmap
rules: what tapewise.torch's ops call where its eager nodes cannot run — under torch.compile and
torch.export (Dynamo and AOTAutograd trace these ops into the graph), under torch.func transforms,
on fake or meta tensors and under dispatch modes. The kernels are the eager nodes' kernels: same bits."""

from __future__ import annotations

import torch

import tapewise

from ._nodes import SECOND_DERIVATIVE_ERROR, _OP_INDEX, _TIE_NODES, _check_same, _dtype_code, _upstream, backend_for

NAMESPACE = "tapewise"

if not hasattr(getattr(torch.library, "CustomOpDef", None), "register_vmap"):
    raise ImportError(f"tapewise.torch needs PyTorch 2.5 or later (torch.library.custom_op with register_vmap); "
                      f"this is torch {torch.__version__}")


_cpp_kernels_pending = True


def _load_cpp_kernels():
    """The first call of a Python kernel below chooses the nodes as a node's first call does: loading
    the C++ nodes registers these ops' C++ kernels (torch_nodes.cpp), which serve the calls after it."""
    global _cpp_kernels_pending
    _cpp_kernels_pending = False
    from . import _ops  # here, not above: _ops imports this module
    _ops._choose_nodes()


def _run_forward(op_index, s0, s1, a, b=None):
    if _cpp_kernels_pending:
        _load_cpp_kernels()
    code = _dtype_code(a, "x" if b is None else "a")
    if b is not None:
        _check_same(a, b, tapewise.NODE_NAMES[op_index])
        b = b.contiguous()
    a = a.contiguous()
    y = torch.empty_like(a)
    n = a.numel()
    if n:
        backend_for(a)._forward_raw(op_index, s0, s1, a.data_ptr(), 0 if b is None else b.data_ptr(), y.data_ptr(),
                                    n, code)
    return y


def _run_vjp(op_index, s0, s1, g, a, b=None):
    if _cpp_kernels_pending:
        _load_cpp_kernels()
    code = _dtype_code(a, "x" if b is None else "a")
    a = a.contiguous()
    g = _upstream(g, a.dtype)
    da = torch.empty_like(a)
    db = None if b is None else torch.empty_like(a)
    if b is not None:
        b = b.contiguous()
    n = a.numel()
    if n:
        backend_for(a)._vjp_raw(op_index, s0, s1, a.data_ptr(), 0 if b is None else b.data_ptr(), g.data_ptr(),
                                da.data_ptr(), 0 if db is None else db.data_ptr(), n, code)
    return da if b is None else (da, db)


def _fake_like(name, a, b=None):
    """The fake (meta) kernel's result: the checks of the real kernel, then a contiguous tensor of a's
    shape, dtype and device (what the real kernel returns)."""
    _dtype_code(a, "x" if b is None else "a")
    if b is not None:
        _check_same(a, b, name)
    return torch.empty(a.shape, dtype=a.dtype, device=a.device)


def _batched(info, in_dims, args):
    """vmap: every tensor argument with its batch dimension first (an unbatched one expanded), since a
    node is elementwise over one shape; other arguments as they are."""
    out = []
    for arg, dim in zip(args, in_dims):
        if isinstance(arg, torch.Tensor):
            arg = arg.movedim(dim, 0) if dim is not None else arg.expand(info.batch_size, *arg.shape)
        out.append(arg)
    return out


def _refuse_second_derivative(ctx, *grads):
    raise RuntimeError(SECOND_DERIVATIVE_ERROR)


def _no_context(ctx, inputs, output):
    pass


def _register_rules(forward, vjp, backward, setup_context, vjp_out_dims):
    """Autograd (the forward's backward is its VJP op; the VJP's raises: no second derivatives) and vmap
    (elementwise: the batch dimension first, the op on the batch as one tensor)."""
    forward.register_autograd(backward, setup_context=setup_context)
    vjp.register_autograd(_refuse_second_derivative, setup_context=_no_context)
    forward.register_vmap(lambda info, in_dims, *args: (forward._opoverload(*_batched(info, in_dims, args)), 0))
    vjp.register_vmap(lambda info, in_dims, *args: (vjp._opoverload(*_batched(info, in_dims, args)), vjp_out_dims))


def _define_unary(name, scalar_names):
    op_index = _OP_INDEX[name]
    params = "".join(f", float {s}" for s in scalar_names)
    pad = [0.0] * (2 - len(scalar_names))

    def forward_kernel(x, *scalars):
        return _run_forward(op_index, *scalars, *pad, x)

    def vjp_kernel(x, g, *scalars):
        return _run_vjp(op_index, *scalars, *pad, g, x)

    forward = torch.library.custom_op(f"{NAMESPACE}::{name}", forward_kernel, mutates_args=(),
                                      schema=f"(Tensor x{params}) -> Tensor")
    vjp = torch.library.custom_op(f"{NAMESPACE}::{name}_vjp", vjp_kernel, mutates_args=(),
                                  schema=f"(Tensor x, Tensor g{params}) -> Tensor")
    forward.register_fake(lambda x, *scalars: _fake_like(name, x))
    vjp.register_fake(lambda x, g, *scalars: _fake_like(name, x))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.scalars = inputs[1:]

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (vjp._opoverload(x, g, *ctx.scalars), *[None] * len(scalar_names))

    _register_rules(forward, vjp, backward, setup_context, vjp_out_dims=0)
    return forward._opoverload


def _define_binary(name):
    op_index = _OP_INDEX[name]
    forward = torch.library.custom_op(f"{NAMESPACE}::{name}", lambda a, b: _run_forward(op_index, 0.0, 0.0, a, b),
                                      mutates_args=(), schema="(Tensor a, Tensor b) -> Tensor")
    vjp = torch.library.custom_op(f"{NAMESPACE}::{name}_vjp", lambda a, b, g: _run_vjp(op_index, 0.0, 0.0, g, a, b),
                                  mutates_args=(), schema="(Tensor a, Tensor b, Tensor g) -> (Tensor, Tensor)")
    forward.register_fake(lambda a, b: _fake_like(name, a, b))
    vjp.register_fake(lambda a, b, g: (_fake_like(name, a, b), _fake_like(name, a, b)))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.same_input = inputs[0] is inputs[1]

    def backward(ctx, g):
        a, b = ctx.saved_tensors
        if ctx.same_input and op_index in _TIE_NODES:
            # The tape's rule for max(a, a)/min(a, a), as the eager nodes: the upstream gradient once.
            return _upstream(g, a.dtype).clone(), None
        return vjp._opoverload(a, b, g)

    _register_rules(forward, vjp, backward, setup_context, vjp_out_dims=(0, 0))
    return forward._opoverload


# The forward ops by node name (torch.ops.tapewise.<name>.default, called with the node's tensors and
# scalars); each has torch.ops.tapewise.<name>_vjp beside it.
OPS = {row["name"]: _define_binary(row["name"]) if row["arity"] == 2 else _define_unary(row["name"], row["scalars"])
       for row in tapewise.op_table()}
VJPS = {name: getattr(torch.ops.tapewise, f"{name}_vjp").default for name in OPS}

# ---------------------------------------------------------------------------------------------------
# Outside torch.compile: torch.library's generated autograd for a custom op has no setup_context, which
# torch.func requires of an autograd.Function (PyTorch issues 168393, 170834, 179652: grad and jacrev
# raise), and no jvp to refuse forward mode with. So eagerly the tensors the nodes do not run on go
# through these two Functions, which call the same custom ops (vmap: generate_vmap_rule runs them on
# batched tensors, through the ops' vmap rules). Under torch.compile the ops are called directly.

FORWARD_MODE_ERROR = ("tapewise.torch: forward-mode differentiation (torch.func.jvp, jacfwd, torch.func.hessian, "
                      "forward_ad dual tensors) is not supported: tapewise's nodes have VJPs only")


class FuncNode(torch.autograd.Function):
    """A node under torch.func: forward is the custom op, backward its VJP op (through FuncVjp)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(name, scalars, *inputs):
        return OPS[name](*inputs, *scalars)

    @staticmethod
    def setup_context(ctx, inputs, output):
        name, scalars, *tensors = inputs
        ctx.save_for_backward(*tensors)
        ctx.node = (name, scalars, len(tensors) == 2 and tensors[0] is tensors[1])

    @staticmethod
    def backward(ctx, g):
        name, scalars, same_input = ctx.node
        inputs = ctx.saved_tensors
        if same_input and _OP_INDEX[name] in _TIE_NODES:
            return None, None, _upstream(g, inputs[0].dtype).clone(), None
        grads = FuncVjp.apply(name, scalars, g, *inputs)
        return (None, None, *grads) if isinstance(grads, tuple) else (None, None, grads)

    @staticmethod
    def jvp(ctx, *tangents):
        raise RuntimeError(FORWARD_MODE_ERROR)


class FuncVjp(torch.autograd.Function):
    """A node's VJP under torch.func: differentiating it raises (no second derivatives)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(name, scalars, g, *inputs):
        if len(inputs) == 1:
            return VJPS[name](inputs[0], g, *scalars)
        return VJPS[name](*inputs, g)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(SECOND_DERIVATIVE_ERROR)

    @staticmethod
    def jvp(ctx, *tangents):
        raise RuntimeError(FORWARD_MODE_ERROR)


def routed(name, inputs, scalars=()):
    """A node on tensors the eager nodes do not run on (torch.func wrappers, fake and meta tensors,
    dispatch modes, dual tensors): FuncNode, over the node's custom ops."""
    return FuncNode.apply(name, tuple(scalars), *inputs)
