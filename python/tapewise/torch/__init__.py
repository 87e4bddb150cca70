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
are the dtype's values R16(R32(c)) (spec/conventions.md 0.3). add, sub, mul and div take a Python
number (int, float, bool, numpy's) on either side of a tensor, as torch.add etc. do: it stands for a
tensor of the other's shape, dtype and device holding the number rounded as a scalar is (R16(R32(c))
in 16 bits), with no gradient; maximum and minimum refuse a number, as torch.maximum does (TypeError
naming the argument). Gradients are identical to
tapewise.Tape.backward's up to NaN (equal bits, or both NaN: a NaN's sign and payload may differ):
each backward is the node's fused VJP, and contributions accumulate as the tape's do (maximum(a, a)
and minimum(a, a) contribute the upstream gradient once, as the tape does).

Second derivatives: none. tapewise defines first derivatives only, so a gradient is differentiable
once: backward(create_graph=True) and autograd.grad(..., create_graph=True) give the first
derivative's bits, and differentiating that gradient raises RuntimeError ("trying to differentiate
twice a tapewise node"), on every path (C++ nodes, Python nodes, regions, custom ops) and whether or
not the seed requires grad — so torch.autograd.functional.hessian, torch.func.grad(torch.func.grad(f))
and torch.func.jacrev(torch.func.grad(f)) raise, never return zeros. There is no forward-mode
derivative either: torch.func.jvp, jacfwd, torch.func.hessian (jacfwd of jacrev) and forward_ad's
dual tensors raise RuntimeError ("forward-mode differentiation ... is not supported").

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

Custom ops (torch.library): every node is torch.ops.tapewise.<node> (scalars as float arguments:
clamp(x, lo, hi)) and its fused VJP torch.ops.tapewise.<node>_vjp (binary nodes: both gradients), with
fake kernels, autograd (the forward's backward is the VJP op; the VJP op's backward raises, as above)
and vmap rules (elementwise: the batch as one tensor, an unbatched input expanded). Their CPU and
CUDA kernels are C++ once the C++ nodes load (native/torch_nodes.cpp registers them; the first node
or custom op call loads them), else Python, with the same bits. The ops above call
them where the eager nodes cannot run, with the eager nodes' bits: under torch.compile and torch.export
(torch.compiler.is_dynamo_compiling(): Dynamo traces the custom op), and where a node sees a tensor that is
not plain CPU or CUDA memory — a torch.func wrapper (grad, vmap, jacrev), a fake or meta tensor, a
dispatch mode (FakeTensorMode, make_fx), a forward-mode dual tensor (there through an
autograd.Function with setup_context over the custom ops, which torch.func requires and torch.library's
generated autograd lacks: PyTorch issues 168393, 170834, 179652). Eagerly on plain tensors the
nodes run as before (a custom op call costs PyTorch's dispatcher and autograd.Function, several
times a node). So torch.compile(fn, fullgraph=True) over the nodes is one graph with no break
(observed with torch 2.15 on the CPU, backends aot_eager and inductor, which calls the custom ops'
kernels), torch.export's graph holds tapewise.<node>.default calls, and torch.func.grad and vmap give
the eager bits. A region under torch.compile or torch.export, under a torch.func transform or on fake
or meta tensors runs its function node by node (each node's custom op: the region's values, its
gradients up to NaN), so a compiled function with regions is one graph too.

CUDA graphs: a node's kernels are queued on PyTorch's current stream (the capturing one) with no
synchronisation, and its outputs and gradients come from PyTorch's allocator (the graph's pool), so
the nodes' forward and backward can be captured and replayed; a CUDA backend is made the first time a
stream is used, so warm the capture stream up first, as PyTorch asks of any capture. A region refuses
capture with a RuntimeError: its tape allocates its own memory and records afresh on every call. (What
the code is written to do; python/tests/test_torch_ops.py's capture tests run on a GPU machine only and
had not run when this was written, 2026-12-05.)
"""

from __future__ import annotations

import tapewise

# Each idea in its module: _nodes (the Python autograd nodes, backend_for), _native (building and
# loading the C++ nodes), _custom_ops (the torch.library ops), _region (region), _ops (the ops, NODES,
# and which nodes run: node_path).
# _nodes comes first: it imports torch, or raises the ImportError that says tapewise.torch needs it.
from ._nodes import backend_for, get_math, set_math  # isort: skip
from ._native import _native_build_dir  # noqa: F401 (for tests: where the C++ nodes are cached)
from ._ops import (  # noqa: F401 (the ops; _use_nodes for tests and benchmarks)
    _DEFINED, NODES, _use_nodes, abs, add, clamp, cos, div, exp, gelu, inv, log, max, maximum, min, minimum, mul,
    neg, node_path, relu, safe_log, safeLog, scale, sigmoid, silu, sin, softplus, sqrt, sub, tanh)
from ._region import region


__all__ = ["backend_for", "get_math", "set_math", "node_path", "region", "NODES", "maximum", "minimum", "safe_log"] + \
    [n for n in tapewise.NODE_NAMES if n in _DEFINED]
