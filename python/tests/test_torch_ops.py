"""tapewise.torch under PyTorch's machinery: second derivatives (refused on every path, never zeros),
the nodes' torch.library custom ops under torch.compile, torch.export, torch.func and fake tensors
(the eager bits), Python numbers beside tensors, and CUDA graph capture (run where CUDA is)."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import tapewise
from conftest import ARITY, POSITIVE, SCALARS, assert_same_torch_bits

torch = pytest.importorskip("torch", reason="PyTorch is not installed (tapewise.torch tests run where it is)")
twt = pytest.importorskip("tapewise.torch")

NODES = list(tapewise.NODE_NAMES)
TWICE = "differentiate twice a tapewise node"


@pytest.fixture(params=["native", "python"])
def nodes(request):
    """The C++ nodes (built against this torch on first use) and the Python ones: same bits, same errors."""
    twt._use_nodes(request.param)
    return request.param


def inputs_for(name, n=16, dtype=torch.float64, seed=0):
    """Inputs in the node's domain (|x| for the nodes singular at and below 0), away from ties."""
    gen = torch.Generator().manual_seed(seed)
    xs = [torch.rand(n, generator=gen, dtype=dtype) * 1.8 + 0.2 for _ in range(ARITY[name])]
    if name not in POSITIVE:
        xs = [x * torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0).to(dtype) for x in xs]
    if ARITY[name] == 2:
        xs[1] = xs[1] + 0.05  # never equal to xs[0]: no ties of max and min
    return xs


def call(name, *xs):
    return twt.NODES[name](*xs, *SCALARS.get(name, []))


def bits_equal(actual, expected, what):
    assert_same_torch_bits(actual.detach(), expected.detach(), what)


# ---------------------------------------------------------------------------------------------------
# Second derivatives: tapewise defines first derivatives only, so differentiating a gradient raises —
# through the C++ nodes, the Python nodes, regions and the custom ops. Before, a Hessian read zeros.

def paths():
    return {"node": lambda f: f, "region": twt.region}


@pytest.mark.parametrize("path", ["node", "region"])
@pytest.mark.parametrize("name", ["sin", "mul", "clamp"])
def test_hessian_raises_instead_of_zeros(nodes, path, name):
    xs = inputs_for(name, n=5)
    f = paths()[path](lambda *a: call(name, *a))
    with pytest.raises(RuntimeError, match=TWICE):
        torch.autograd.functional.hessian(lambda *a: f(*a).sum(), tuple(xs))


@pytest.mark.parametrize("path", ["node", "region"])
def test_grad_of_a_create_graph_gradient_raises(nodes, path):
    """create_graph=True gives the first derivative's bits; differentiating it raises, whether or not
    the seed requires grad (once_differentiable lets the first case through with no history)."""
    x = torch.linspace(-2, 2, 9, dtype=torch.float64, requires_grad=True)
    f = paths()[path](twt.tanh)
    (gx,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)
    (plain,) = torch.autograd.grad(f(x).sum(), x)
    bits_equal(gx, plain, "create_graph gradient")
    assert gx.requires_grad
    with pytest.raises(RuntimeError, match=TWICE):
        torch.autograd.grad(gx.sum(), x)


def eager_grads(name, xs, seed=None):
    """The gradients of call(name, *xs) through backward on the eager nodes (the reference bits)."""
    leaves = [x.detach().clone().requires_grad_() for x in xs]
    y = call(name, *leaves)
    y.backward(torch.ones_like(y) if seed is None else seed)
    return y.detach(), [leaf.grad for leaf in leaves]


def test_forward_mode_is_refused(nodes):
    x = torch.linspace(-1, 1, 4, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="forward-mode differentiation .* is not supported"):
        torch.func.jvp(twt.sin, (x,), (torch.ones_like(x),))
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(x, torch.ones_like(x))
        with pytest.raises(RuntimeError, match="forward-mode differentiation .* is not supported"):
            twt.mul(dual, x)


def test_torch_func_second_derivatives_raise(nodes):
    x = torch.linspace(-1, 1, 4, dtype=torch.float64)
    first = torch.func.grad(lambda a: twt.sin(a).sum())
    bits_equal(first(x), eager_grads("sin", [x])[1][0], "torch.func.grad against backward")
    with pytest.raises(RuntimeError, match=TWICE):
        torch.func.grad(lambda a: first(a).sum())(x)
    with pytest.raises(RuntimeError, match=TWICE):
        torch.func.jacrev(first)(x)
    with pytest.raises(RuntimeError, match="forward-mode"):  # jacfwd(jacrev): no forward-mode derivative either
        torch.func.hessian(lambda a: twt.sin(a).sum())(x)


# ---------------------------------------------------------------------------------------------------
# The custom ops: torch.ops.tapewise.<node> and <node>_vjp, what the ops run where the eager nodes
# cannot (torch.compile, torch.export, torch.func, fake and meta tensors). Bits: the eager nodes'.

def test_every_node_and_its_vjp_is_a_custom_op():
    for name in NODES:
        forward, vjp = getattr(torch.ops.tapewise, name).default, getattr(torch.ops.tapewise, f"{name}_vjp").default
        assert isinstance(forward, torch._ops.OpOverload) and isinstance(vjp, torch._ops.OpOverload)


@pytest.mark.parametrize("name", NODES)
def test_custom_ops_give_the_eager_bits(nodes, name):
    xs = inputs_for(name)
    y, grads = eager_grads(name, xs, seed=torch.linspace(-1, 3, 16, dtype=torch.float64))
    op = getattr(torch.ops.tapewise, name)
    vjp = getattr(torch.ops.tapewise, f"{name}_vjp")
    bits_equal(op(*xs, *SCALARS.get(name, [])), y, f"{name} custom op forward")
    g = torch.linspace(-1, 3, 16, dtype=torch.float64)
    if ARITY[name] == 1:
        custom_grads = [vjp(xs[0], g, *SCALARS.get(name, []))]
    else:
        custom_grads = list(vjp(*xs, g))
    for k, (custom, eager) in enumerate(zip(custom_grads, grads)):
        bits_equal(custom, eager, f"{name} custom op VJP, input {k}")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not (torch.cuda.is_available() and tapewise.cuda_available()), reason="no CUDA device"))])
@pytest.mark.parametrize("name", NODES)
def test_torch_func_grad_and_vmap_give_the_eager_bits(nodes, name, device):
    xs = [x.to(device) for x in inputs_for(name)]
    y, grads = eager_grads(name, xs)
    argnums = tuple(range(len(xs)))
    func_grads = torch.func.grad(lambda *a: call(name, *a).sum(), argnums=argnums)(*xs)
    for k, (func, eager) in enumerate(zip(func_grads, grads)):
        bits_equal(func, eager, f"{name} torch.func.grad, input {k}")
    rows = [x.reshape(4, 4) for x in xs]
    bits_equal(torch.func.vmap(lambda *a: call(name, *a))(*rows), y.reshape(4, 4), f"{name} vmap")
    if ARITY[name] == 2:  # one input batched, the other not: the unbatched one is expanded
        shared = xs[1][:4]
        expected = call(name, rows[0], shared.expand(4, 4))
        bits_equal(torch.func.vmap(lambda a: call(name, a, shared))(rows[0]), expected, f"{name} vmap, b unbatched")


def test_jacrev_of_a_graph_is_the_diagonal_of_the_eager_gradients(nodes):
    x = torch.linspace(-2, 2, 6, dtype=torch.float64)

    def f(a):
        return twt.mul(twt.sin(a), twt.softplus(a))

    leaf = x.clone().requires_grad_()
    f(leaf).sum().backward()
    bits_equal(torch.diagonal(torch.func.jacrev(f)(x)), leaf.grad, "jacrev diagonal")


def model(x, w):
    h = twt.mul(twt.tanh(x), w)
    h = twt.maximum(twt.clamp(h, -0.5, 0.5), twt.scale(twt.sin(x), 0.25))
    return twt.add(twt.safe_log(h, 1e-3), twt.gelu(w))


CUDA = pytest.mark.skipif(not (torch.cuda.is_available() and tapewise.cuda_available()), reason="no CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph_gives_the_eager_bits(nodes, device):
    """fullgraph=True: Dynamo traces every node as its custom op, with no graph break; forward and
    gradients are the eager nodes' bits (aot_eager: Dynamo and AOTAutograd, no C++ compiler)."""
    compile_and_compare("aot_eager", device)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_inductor_gives_the_eager_bits(device):
    """Inductor (a C++ compiler on the CPU; about 30 s here) keeps the custom ops as calls of their
    kernels: the eager bits. Under compile either kind of node runs the custom ops: one run is enough."""
    compile_and_compare("inductor", device)


def compile_and_compare(backend, device):
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(3)
    x0, w0 = torch.randn(64, generator=gen).to(device), torch.randn(64, generator=gen).to(device)
    results = []
    for run in (model, torch.compile(model, backend=backend, fullgraph=True)):
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        y = run(x, w)
        y.backward(torch.linspace(-1, 1, 64, device=device))
        results.append((y.detach(), x.grad, w.grad))
    for eager, compiled in zip(*results):
        bits_equal(compiled, eager, f"compiled ({backend}) against eager")
    explained = torch._dynamo.explain(model)(x0, w0)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_torch_export_sees_the_ops(nodes):
    class Block(torch.nn.Module):
        def forward(self, x, w):
            return twt.region(model)(x, w)  # a region is exported node by node

    gen = torch.Generator().manual_seed(5)
    x, w = torch.randn(32, generator=gen), torch.randn(32, generator=gen)
    exported = torch.export.export(Block(), (x, w))
    called = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    assert {"tapewise.tanh.default", "tapewise.mul.default", "tapewise.clamp.default", "tapewise.max.default",
            "tapewise.safeLog.default", "tapewise.gelu.default"} <= called, called
    bits_equal(exported.module()(x, w), model(x, w), "exported against eager")
    saved = io.BytesIO()
    torch.export.save(exported, saved)
    saved.seek(0)
    bits_equal(torch.export.load(saved).module()(x, w), model(x, w), "saved and loaded against eager")


def test_fake_and_meta_tensors_get_shapes_and_checks(nodes):
    meta = torch.empty(3, 4, dtype=torch.bfloat16, device="meta")
    out = twt.mul(twt.sin(meta), meta)
    assert out.device.type == "meta" and out.shape == (3, 4) and out.dtype == torch.bfloat16
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a, b = torch.empty(5), torch.empty(6)
        assert twt.clamp(a, -1, 1).shape == (5,)
        with pytest.raises(ValueError, match="one shape, dtype and device"):
            twt.add(a, b)
    with pytest.raises(TypeError, match="int32"):
        twt.sin(torch.empty(2, dtype=torch.int32, device="meta"))


def test_eager_nodes_still_record_their_own_autograd_node(nodes):
    y = twt.sin(torch.ones(3, requires_grad=True))
    expected = "tapewise::UnaryNodeBackward" if nodes == "native" else "_UnaryNodeBackward"
    assert y.grad_fn.name() == expected


def test_region_under_torch_func_runs_node_by_node():
    block = twt.region(lambda u, w: twt.relu(twt.scale(twt.tanh(twt.mul(u, w)), 0.9)))
    gen = torch.Generator().manual_seed(6)
    x, w = torch.randn(16, dtype=torch.float64, generator=gen), torch.randn(16, dtype=torch.float64, generator=gen)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    block(xr, wr).sum().backward()
    gx, gw = torch.func.grad(lambda u, v: block(u, v).sum(), argnums=(0, 1))(x, w)
    bits_equal(gx, xr.grad, "region x gradient under torch.func.grad")
    bits_equal(gw, wr.grad, "region w gradient under torch.func.grad")


# ---------------------------------------------------------------------------------------------------
# Python numbers: add, sub, mul and div take one on either side, as torch does; maximum and minimum
# refuse one, as torch.maximum does. A number c is the tensor full_like(x, c): R16(R32(c)) in 16 bits.

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_a_number_on_either_side_is_a_full_tensor(nodes, name, dtype):
    x = torch.linspace(0.5, 3, 8, dtype=dtype)
    op = twt.NODES[name]
    for c in (2.0, 3, True, np.float32(0.1), 1 + 2 ** -8 + 2 ** -30):
        full = torch.full_like(x, float(c))
        for with_number, with_tensor in ((lambda a: op(a, c), lambda a: op(a, full)),
                                         (lambda a: op(c, a), lambda a: op(full, a))):
            leaf, reference = x.clone().requires_grad_(), x.clone().requires_grad_()
            y, expected = with_number(leaf), with_tensor(reference)
            bits_equal(y, expected, f"{name} with {c!r}")
            y.backward(torch.ones_like(y))
            expected.backward(torch.ones_like(expected))
            bits_equal(leaf.grad, reference.grad, f"{name} with {c!r}: gradient")


def test_a_number_is_rounded_as_a_scalar_of_scale(nodes):
    c = 1 + 2 ** -8 + 2 ** -30  # R16(R32(c)) = 1 in bfloat16, R16(c) would be 1 + 2^-7
    x = torch.linspace(-3, 3, 64, dtype=torch.bfloat16)
    bits_equal(twt.mul(x, c), twt.scale(x, c), "mul(x, c) against scale(x, c)")


def test_numbers_where_torch_refuses_them_are_named(nodes):
    x = torch.ones(3)
    for op in (twt.maximum, twt.minimum):
        with pytest.raises(TypeError, match=rf"{op.__name__}: b is a number \(float\); .* as torch.{op.__name__}"):
            op(x, 2.0)
        with pytest.raises(TypeError, match=rf"{op.__name__}: a is a number \(int\)"):
            op(2, x)
    with pytest.raises(TypeError, match="mul: b is str"):
        twt.mul(x, "2")
    with pytest.raises(TypeError, match="add: a is complex"):
        twt.add(1j, x)
    with pytest.raises(TypeError, match="a and b are both numbers"):
        twt.sub(1.0, 2.0)
    with pytest.raises(ValueError, match="no broadcasting"):
        twt.mul(x, torch.tensor(2.0))  # a 0-dim tensor is a tensor, of another shape


def test_numbers_inside_a_region_and_under_compile(nodes):
    x = torch.linspace(-2, 2, 16, dtype=torch.float64)

    def f(a):
        return twt.div(1.0, twt.add(twt.mul(2, twt.exp(a)), 0.5))

    leaf = x.clone().requires_grad_()
    y = f(leaf)
    y.sum().backward()
    for run in (twt.region(f), torch.compile(f, backend="aot_eager", fullgraph=True)):
        other = x.clone().requires_grad_()
        out = run(other)
        out.sum().backward()
        bits_equal(out, y, "value")
        bits_equal(other.grad, leaf.grad, "gradient")
    with pytest.raises(TypeError, match="maximum: b is a number"):
        twt.region(lambda a: twt.maximum(a, 1.0))(x)


# ---------------------------------------------------------------------------------------------------
# CUDA graph capture (runs where CUDA is: the GPU machine).

@CUDA
def test_cuda_graph_capture_of_nodes_replays_the_eager_bits(nodes):
    """The nodes' kernels go on the capturing stream and their memory comes from PyTorch's allocator:
    forward and backward are captured and replayed with new input values, with the eager bits. The
    backend of a stream is made on the first call on it, so the warm-up runs there (as PyTorch asks)."""
    x = torch.randn(1 << 12, device="cuda", requires_grad=True)
    w = torch.randn(1 << 12, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            x.grad = None
            twt.mul(twt.sin(x), w).sum().backward()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    x.grad = None
    with torch.cuda.graph(graph, stream=side):
        y = twt.mul(twt.sin(x), w)
        y.sum().backward()
    fresh = torch.randn(1 << 12, device="cuda")
    with torch.no_grad():
        x.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    reference = fresh.clone().requires_grad_()
    expected = twt.mul(twt.sin(reference), w)
    expected.sum().backward()
    bits_equal(y, expected, "replayed forward")
    bits_equal(x.grad, reference.grad, "replayed gradient")


@CUDA
def test_a_region_refuses_cuda_graph_capture():
    x = torch.randn(256, device="cuda")
    twt.region(twt.sin)(x)  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="cannot be captured in a CUDA graph"):
        with torch.cuda.graph(graph):
            twt.region(twt.sin)(x)


def test_a_torch_without_custom_op_vmap_is_named():
    """On a torch older than 2.5 (simulated: register_vmap removed), importing tapewise.torch says so."""
    script = ("import torch; del torch.library.CustomOpDef.register_vmap\n"
              "try:\n    import tapewise.torch\nexcept ImportError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "tapewise.torch needs PyTorch 2.5 or later" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_a_tie_with_itself_passes_the_gradient_once_under_torch_func(nodes, name):
    """max(a, a): the upstream gradient once, as the tape and the eager nodes do (g*0.5 + g*0.5 would
    lose the smallest subnormal)."""
    x = torch.linspace(-1, 1, 4, dtype=torch.float64)
    g = torch.full((4,), 5e-324, dtype=torch.float64)  # the smallest subnormal: g*0.5 rounds to 0
    op = getattr(twt, name)
    _, pullback = torch.func.vjp(lambda a: op(a, a), x)
    leaf = x.clone().requires_grad_()
    op(leaf, leaf).backward(g)
    bits_equal(pullback(g)[0], leaf.grad, f"{name}(a, a) under torch.func.vjp")
    bits_equal(leaf.grad, g, f"{name}(a, a) eagerly")


def test_the_custom_ops_python_kernels_without_the_cpp_nodes(tmp_path):
    """TAPEWISE_TORCH_NATIVE=0: the custom ops keep their Python kernels (the C++ ones come with the C++
    nodes), and give every node's eager bits, forward and VJP."""
    script = tmp_path / "python_kernels.py"
    script.write_text(
        "import torch, tapewise, tapewise.torch as twt\n"
        "from conftest import ARITY, SCALARS\n"
        "assert 'torch_nodes.cpp' not in torch._C._dispatch_dump_table('tapewise::sin')\n"
        "def same(a, b):\n    return torch.equal(a.view(torch.int64), b.view(torch.int64))  # the bits\n"
        "gen = torch.Generator().manual_seed(9)\n"
        "for name in tapewise.NODE_NAMES:\n"
        "    xs = [(torch.rand(32, generator=gen, dtype=torch.float64) + 0.1).requires_grad_() for _ in range(ARITY[name])]\n"
        "    y = twt.NODES[name](*xs, *SCALARS.get(name, []))\n"
        "    g = torch.rand(32, generator=gen, dtype=torch.float64)\n"
        "    y.backward(g)\n"
        "    op, vjp = getattr(torch.ops.tapewise, name), getattr(torch.ops.tapewise, name + '_vjp')\n"
        "    plain = [x.detach() for x in xs]\n"
        "    assert same(op(*plain, *SCALARS.get(name, [])), y.detach()), name\n"
        "    grads = vjp(plain[0], g, *SCALARS.get(name, [])) if len(xs) == 1 else vjp(*plain, g)\n"
        "    for got, x in zip(grads if len(xs) == 2 else [grads], xs):\n"
        "        assert same(got, x.grad), name\n"
        "print('python kernels ok', twt.node_path()[0])\n")
    env = {**os.environ, "TAPEWISE_TORCH_NATIVE": "0",
           "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert "python kernels ok python" in done.stdout, done.stdout + done.stderr
