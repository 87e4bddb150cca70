"""tapewise.torch._region — regions: region(fn) runs a function written with tapewise.torch's ops as
one tapewise tape (_Value, the region values the ops record onto; _RegionNode, the one autograd node
of a region call, whose backward is Tape.backward)."""

from __future__ import annotations

import functools

import torch

import tapewise

from ._nodes import _check_numbers, _dtype_code, _routed, backend_for, differentiable_once

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
        return f"<tapewise.torch region value: node {self._index} of region {self._region.name}, {where}>"

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


def _region_number(node, value, number):
    """A Python number beside a region value: a constant leaf of the value's shape and dtype (no
    gradient), holding the number as tapewise.torch's nodes do outside regions (R16(R32(c)) in 16 bits)."""
    tape = value._tape(node)
    constant = torch.full(value.shape, float(number), dtype=value.dtype)
    return _Value(value._region, tape.leaf(constant, requires_grad=False, copy=True))


def _record_binary(node, op_index, a, b):
    if a.__class__ is not _Value or b.__class__ is not _Value:
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            raise _value_or_tensor_error(node, a, b)
        a_value, _ = _check_numbers(node, a, b, _Value)
        a, b = (a, _region_number(node, a, b)) if a_value else (_region_number(node, b, a), b)
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
    @differentiable_once
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


_compiling = torch.compiler.is_dynamo_compiling  # Dynamo folds it to True (_ops says why this one)


def _run_region(fn, name, args, kwargs):
    if _compiling():
        # torch.compile and torch.export: fn is traced node by node, each node its custom op (no tape to
        # record: Dynamo cannot trace the tape's arrays), with the region's values, its gradients up to NaN.
        return fn(*args, **kwargs)
    if any(a.__class__ is _Value for a in (*args, *kwargs.values())):
        return fn(*args, **kwargs)  # called inside another region: its ops record onto that tape
    tensors = _region_inputs(args, kwargs, name)
    if any(_routed(t) for t in tensors):
        # torch.func transforms, fake tensors, dispatch modes: a tape cannot view their memory, so fn runs
        # node by node, each node its custom op (the region's values; its gradients up to NaN).
        return fn(*args, **kwargs)
    if tensors[0].is_cuda and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(f"tapewise.torch.region {name}: a region cannot be captured in a CUDA graph (its tape "
                           "allocates its own memory and records afresh on every call); call the nodes directly "
                           "inside the capture, each is captured as its kernels")
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
    gradient]). The tape runs them as it always does: up to Tape.program_threshold elements (2^26 by
    default) the forward is a tape program per Tape.max_pending_nodes nodes (4,096) and the backward one
    program; larger tensors run a kernel per node.

        @twt.region
        def block(x, w):
            return twt.relu(twt.scale(twt.tanh(twt.mul(x, w)), 0.9))
        block(x, w).sum().backward()        # x.grad, w.grad: Tape.backward's bits

    Inside, `fn` sees region values in place of its tensor arguments: tapewise.torch ops record nodes
    on them; torch functions, operators and bool() on them raise TypeError. Non-tensor arguments pass
    through. `fn` must return one region value (Tape.backward seeds one output). Called inside another
    region, `fn` records onto that region's tape. Called without region(), the same `fn` runs node by
    node on torch tensors, and so does a region under torch.compile or torch.export, under a torch.func
    transform, or on fake or meta tensors (each node its custom op: the region's values, gradients up to
    NaN). Differentiating a region's gradient raises (no second derivatives); a region refuses CUDA
    graph capture."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)

    @functools.wraps(fn)
    def run_region(*args, **kwargs):
        return _run_region(fn, name, args, kwargs)

    return run_region
