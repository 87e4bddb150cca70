"""tapewise.torch._ops — the ops, tapewise.torch's public functions (add, ..., softplus, max, min,
safe_log) and its name table NODES, one function per node of the op table; the choice of the code
that runs them outside regions (the C++ nodes or the Python ones: node_path, _use_nodes), and where
those cannot run (torch.compile, torch.func, fake tensors), the nodes' custom ops (_custom_ops)."""

from __future__ import annotations

import threading
import warnings

import torch

import tapewise

from . import _native
from ._custom_ops import OPS, routed
from ._nodes import (_OP_INDEX, NUMBER_NODES, _BinaryNode, _check_numbers, _routed, _routed_context, _routed_tensor,
                     _UnaryNode)
from ._region import _record_binary, _record_unary, _region_unary, _Value

# ---------------------------------------------------------------------------------------------------
# Which nodes run: the ops below call _unary_apply/_binary_apply, which the first node call binds to
# the C++ nodes (_native) or to the Python Functions (_nodes) (TAPEWISE_TORCH_NATIVE, node_path()).
# They are this module's globals, read by the ops as globals, so that a bound node costs one lookup;
# _native's functions are read through that module, so that patching tapewise.torch._native reaches here.

_node_lock = threading.Lock()
_node_path: tuple[str, str] | None = None


def _bind_nodes(kind: str, detail: str, module=None) -> None:
    global _unary_apply, _binary_apply, _node_path
    if kind == "native":
        _unary_apply, _binary_apply = module.unary, module.binary
    else:
        _unary_apply, _binary_apply = _python_unary, _python_binary
    _node_path = (kind, detail)


# Both kinds of nodes run on plain memory only and return None for anything else (_routed), which the
# ops then hand to the node's custom op.
def _python_unary(x, op_index, s0, s1):
    return None if _routed(x) else _UnaryNode.apply(x, op_index, s0, s1)


def _python_binary(a, b, op_index):
    return None if _routed_tensor(a) or _routed_tensor(b) or _routed_context() else _BinaryNode.apply(a, b, op_index)


def _choose_nodes() -> None:
    with _node_lock:
        if _node_path is not None:
            return
        mode = _native._native_mode()
        if mode == "0":
            _bind_nodes("python", "TAPEWISE_TORCH_NATIVE=0")
            return
        try:
            module, library = _native._load_native()
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
            module, library = _native._load_native()
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
# The ops: each takes torch tensors (one autograd node per call) or region values (one tape node).
# Under torch.compile and torch.export's Dynamo they call the node's custom op, which Dynamo traces
# into the graph (is_dynamo_compiling() returns False, and Dynamo folds it to True: a cheaper test than
# is_compiling(), which reads two flags); eagerly the nodes run, and the custom ops (_custom_ops.routed)
# only where a node returns None: a tensor the node does not run on (_routed), such as the fake
# tensors of AOTAutograd or of non-strict export.

_compiling = torch.compiler.is_dynamo_compiling


def _unary_tensor(name, op_index, custom, x, s0, s1, scalars):
    if _compiling():
        return custom(x, *scalars)
    y = _unary_apply(x, op_index, s0, s1)
    return routed(name, (x,), scalars) if y is None else y


def _unary(name):
    op_index = _OP_INDEX[name]
    custom = OPS[name]

    def node(x: torch.Tensor) -> torch.Tensor:
        if x.__class__ is _Value:
            value = _region_unary(op_index, x, 0.0, 0.0)
            return value if value is not None else x._tape(name)  # _tape raises: the region has returned
        if _compiling():
            return custom(x)
        y = _unary_apply(x, op_index, 0.0, 0.0)
        return routed(name, (x,)) if y is None else y

    node.__name__ = node.__qualname__ = name
    node.__doc__ = f"tapewise's {name}(x) as a differentiable torch op (see the module docstring)."
    return node


def _operands(node, a, b):
    """a and b as two tensors: a Python number beside a tensor (where torch takes one: _check_numbers)
    becomes a tensor of that tensor's shape, dtype and device holding the number as tapewise rounds a
    node's scalars — R(c); R16(R32(c)) in bfloat16 and float16, spec/conventions.md 0.3 — with no
    gradient."""
    a_tensor, b_tensor = _check_numbers(node, a, b, torch.Tensor)
    if a_tensor and b_tensor:
        return a, b
    like = a if a_tensor else b
    # torch.full converts the fill value through float32 for bfloat16 and float16: R16(R32(c)).
    number = torch.full(like.shape, float(b if a_tensor else a), dtype=like.dtype, device=like.device)
    return (a, number) if a_tensor else (number, b)


def _binary(name, alias):
    op_index = _OP_INDEX[name]
    custom = OPS[name]

    def node(a, b) -> torch.Tensor:
        if a.__class__ is _Value or b.__class__ is _Value:
            return _record_binary(alias, op_index, a, b)
        if _compiling():
            return custom(*_operands(alias, a, b))
        try:
            y = _binary_apply(a, b, op_index)
        except TypeError:  # a number (or something else) beside a tensor; both tensors: the node's own error
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                raise
            a, b = _operands(alias, a, b)
            y = _binary_apply(a, b, op_index)
        return routed(name, (a, b)) if y is None else y

    node.__name__ = node.__qualname__ = alias
    node.__doc__ = (f"tapewise's {name}(a, b) as a differentiable torch op (same shape, dtype and device" +
                    ("; a Python number on either side, as torch takes it)." if alias in NUMBER_NODES else ")."))
    return node


def _with_scalars(name, scalar_names):
    """A node with scalars (one of the op table without a function of its own), called as (x, *scalars)."""
    op_index = _OP_INDEX[name]
    custom = OPS[name]

    def node(x, *scalars):
        if len(scalars) != len(scalar_names):
            raise TypeError(f"tapewise.torch.{name} takes x and {len(scalar_names)} scalar(s) "
                            f"({', '.join(scalar_names) or 'none'}), got {len(scalars)}")
        s = [float(v) for v in scalars]
        if x.__class__ is _Value:
            return _record_unary(name, op_index, x, *s)
        return _unary_tensor(name, op_index, custom, x, *(s + [0.0, 0.0])[:2], s)

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
_SCALE_OP, _CLAMP_OP, _SAFE_LOG_OP = OPS["scale"], OPS["clamp"], OPS["safeLog"]


def scale(x: torch.Tensor, c: float) -> torch.Tensor:
    """tapewise's scale: x * R(c), c rounded once to x's dtype."""
    if x.__class__ is _Value:
        return _record_unary("scale", _SCALE, x, float(c))
    c = float(c)
    if _compiling():
        return _SCALE_OP(x, c)
    y = _unary_apply(x, _SCALE, c, 0.0)  # inline, not through _unary_tensor: a call less per node
    return routed("scale", (x,), (c,)) if y is None else y


def clamp(x: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """tapewise's clamp: fmin(fmax(x, R(lo)), R(hi)); gradient g strictly inside (lo, hi), +0 elsewhere."""
    if x.__class__ is _Value:
        return _record_unary("clamp", _CLAMP, x, float(lo), float(hi))
    lo, hi = float(lo), float(hi)
    if _compiling():
        return _CLAMP_OP(x, lo, hi)
    y = _unary_apply(x, _CLAMP, lo, hi)  # inline, not through _unary_tensor: a call less per node
    return routed("clamp", (x,), (lo, hi)) if y is None else y


def safeLog(x: torch.Tensor, eps: float) -> torch.Tensor:  # noqa: N802 (the spec's name)
    """tapewise's safeLog: log(softplus(x) + R(eps))."""
    if x.__class__ is _Value:
        return _record_unary("safeLog", _SAFE_LOG, x, float(eps))
    eps = float(eps)
    if _compiling():
        return _SAFE_LOG_OP(x, eps)
    y = _unary_apply(x, _SAFE_LOG, eps, 0.0)  # inline, not through _unary_tensor: a call less per node
    return routed("safeLog", (x,), (eps,)) if y is None else y


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
