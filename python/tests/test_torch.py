"""tapewise.torch: every node as a torch.autograd.Function — gradcheck in float64 away from kinks, and
gradients equal to Tape.backward bit for bit, on CPU tensors and (where available) CUDA tensors."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import tapewise
from conftest import ARITY, POSITIVE, SCALARS, TABLE, assert_same_bits, assert_same_torch_bits, bits

torch = pytest.importorskip("torch", reason="PyTorch is not installed (tapewise.torch tests run where it is)")
twt = pytest.importorskip("tapewise.torch")

NODES = list(tapewise.NODE_NAMES)


@pytest.fixture(params=["native", "python"])
def nodes(request):
    """Runs a node test with tapewise.torch's C++ nodes (built against this torch on first use) and with
    its Python autograd.Functions: the two must give the same bits and errors."""
    twt._use_nodes(request.param)
    return request.param


def devices():
    params = ["cpu"]
    if torch.cuda.is_available() and tapewise.cuda_available():
        params.append("cuda")
    else:
        params.append(pytest.param("cuda", marks=pytest.mark.skip(reason="no CUDA device")))
    return params


def away_from_kinks(name, n, dtype, device, generator):
    """Inputs in the node's domain, at least 0.1 away from its kink (spec/ops.def): 0, ties, bounds."""
    def draw():
        v = torch.rand(n, dtype=dtype, generator=generator) * 1.8 + 0.2   # [0.2, 2.0]: away from 0
        sign = torch.where(torch.rand(n, generator=generator) < 0.5, -1.0, 1.0).to(dtype)
        return v if name in POSITIVE else v * sign
    inputs = [draw() for _ in range(ARITY[name])]
    kink = TABLE[name]["kink"]
    if kink == "tie":
        inputs[1] = torch.where((inputs[0] - inputs[1]).abs() < 0.1, inputs[1] + 0.3, inputs[1])
    if kink == "bounds":
        lo, hi = SCALARS[name]
        x = inputs[0]
        inputs[0] = torch.where(((x - lo).abs() < 0.1) | ((x - hi).abs() < 0.1), x + 0.25, x)
    return [x.to(device).requires_grad_() for x in inputs]


def call(name, inputs):
    return twt.NODES[name](*inputs, *SCALARS.get(name, []))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("name", NODES)
def test_gradcheck_float64(nodes, name, device):
    g = torch.Generator().manual_seed(NODES.index(name))
    inputs = away_from_kinks(name, 16, torch.float64, device, g)
    assert torch.autograd.gradcheck(lambda *xs: call(name, xs), inputs, eps=1e-6, atol=1e-7, rtol=1e-6)


def tape_gradients(backend, name, arrays, seed):
    """The node's gradients through Tape.backward on the same backend, as host arrays."""
    tape = tapewise.Tape(backend)
    ids = [tape.leaf(a.detach()) for a in arrays]
    out = getattr(tape, name)(*ids, *SCALARS.get(name, []))
    grads = tape.backward(out, seed)
    return tape.host(out), [grads.host(i) for i in ids]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("name", NODES)
def test_gradients_equal_tape_backward_bit_for_bit(nodes, name, device, dtype):
    gen = torch.Generator().manual_seed(100 + NODES.index(name))
    inputs = [(torch.randn(4096, dtype=dtype, generator=gen) * 3).to(device) for _ in range(ARITY[name])]
    if name in POSITIVE:
        inputs = [x.abs() for x in inputs]
    if ARITY[name] == 2:
        inputs[1][::5] = inputs[0][::5]  # ties
    inputs = [x.requires_grad_() for x in inputs]
    seed = (torch.randn(4096, dtype=dtype, generator=gen)).to(device)
    y = call(name, inputs)
    y.backward(seed)
    backend = twt.backend_for(inputs[0])
    y_tape, grads_tape = tape_gradients(backend, name, inputs, seed)
    assert_same_bits(y.detach().cpu().numpy(), y_tape, f"{name} forward")
    for x, d in zip(inputs, grads_tape):
        assert_same_bits(x.grad.cpu().numpy(), d, f"{name} gradient")


@pytest.mark.parametrize("device", devices())
def test_graph_gradients_equal_tape_backward(nodes, device):
    """A small graph with fan-out (two consumers per tensor, so the accumulation order cannot differ),
    ties, div and clamp: torch autograd over tapewise.torch nodes and the tape agree bit for bit."""
    gen = torch.Generator().manual_seed(5)
    a0 = torch.randn(10000, generator=gen).to(device)
    b0 = a0.clone()
    b0[1::2] = torch.randn(5000, generator=gen).to(device)   # half ties
    seed = torch.rand(10000, generator=gen).to(device) + 0.5
    a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    m, n = twt.maximum(a, b), twt.minimum(a, b)
    y = twt.div(twt.clamp(twt.mul(m, n), -1.5, 2.0), twt.add(twt.exp(m), twt.scale(n, 0.5)))
    y.backward(seed)

    tape = tapewise.Tape(twt.backend_for(a0))
    ta, tb = tape.leaf(a0), tape.leaf(b0)
    tm, tn = tape.max(ta, tb), tape.min(ta, tb)
    ty = tape.div(tape.clamp(tape.mul(tm, tn), -1.5, 2.0), tape.add(tape.exp(tm), tape.scale(tn, 0.5)))
    grads = tape.backward(ty, seed)
    assert_same_bits(a.grad.cpu().numpy(), grads.host(ta), "da")
    assert_same_bits(b.grad.cpu().numpy(), grads.host(tb), "db")


@pytest.mark.parametrize("device", devices())
def test_max_of_a_tensor_with_itself_matches_the_tape(nodes, device):
    a = torch.tensor([1.0, -2.0], device=device, requires_grad=True)
    g = torch.tensor([2.0**-149, 3.0], device=device)
    twt.maximum(a, a).backward(g)
    assert_same_bits(a.grad.cpu().numpy(), g.cpu().numpy(), "max(a, a)")


@pytest.mark.parametrize("device", devices())
def test_outputs_are_fresh_tensors_on_the_input_device(nodes, device):
    x = torch.randn(100, device=device, requires_grad=True)
    y = twt.sin(x)
    assert y.device == x.device and y.dtype == x.dtype and y.data_ptr() != x.data_ptr()
    y.sum().backward()  # an expanded (stride 0) upstream gradient is made contiguous
    torch.testing.assert_close(x.grad, torch.cos(x.detach()), rtol=1e-6, atol=1e-6)


# Dtypes tapewise does not take, each named in the error: 16-bit integers, complex32, the float8s.
BAD_DTYPES = [d for d in (torch.int16, getattr(torch, "uint16", None), getattr(torch, "complex32", None),
                          getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None), torch.int32)
              if d is not None]


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("dtype", BAD_DTYPES, ids=str)
def test_a_dtype_tapewise_does_not_take_is_named(nodes, dtype):
    bad = torch.zeros(3, dtype=dtype)
    for call in (lambda: twt.sin(bad), lambda: twt.add(bad, bad), lambda: twt.scale(bad, 2.0),
                 lambda: twt.region(twt.sin)(bad)):
        with pytest.raises(TypeError, match=f"is {dtype}; tapewise takes float32, float64, bfloat16 or float16"):
            call()


def test_errors_are_clear(nodes):
    with pytest.raises(ValueError, match="no broadcasting"):
        twt.add(torch.ones(3), torch.ones(1))
    with pytest.raises(ValueError, match="one shape, dtype and device"):
        twt.mul(torch.ones(3), torch.ones(3, dtype=torch.float64))


def test_non_contiguous_inputs_are_made_contiguous(nodes):
    x = torch.randn(8, 8, dtype=torch.float64).t().requires_grad_()
    y = twt.tanh(x)
    torch.testing.assert_close(y, torch.tanh(x.detach()), rtol=1e-15, atol=0)
    y.backward(torch.ones(8, 8, dtype=torch.float64))
    torch.testing.assert_close(x.grad, 1 - torch.tanh(x.detach()) ** 2, rtol=1e-14, atol=0)


@pytest.mark.skipif(not tapewise.cuda_available(), reason="no CUDA device")
def test_backends_follow_the_current_stream(nodes):
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    x = torch.randn(1 << 16, device="cuda", requires_grad=True)
    default = twt.backend_for(x)
    assert default.on_callers_stream
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())  # x was written on the default stream
    with torch.cuda.stream(side):
        other = twt.backend_for(x)
        assert other.stream == side.cuda_stream
        y = twt.gelu(x)
        y.backward(torch.ones_like(y))
    torch.cuda.synchronize()
    assert twt.backend_for(x) is default
    torch.testing.assert_close(y, torch.nn.functional.gelu(x.detach(), approximate="tanh"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", devices())
def test_empty_and_zero_dim_tensors(nodes, device):
    """An empty tensor may have no address: the nodes compute nothing for it, in both arities."""
    for shape in [(0,), (3, 0), ()]:
        a = torch.full(shape, 0.5, device=device).requires_grad_()
        b = torch.full(shape, 0.25, device=device).requires_grad_()
        y = twt.add(twt.sin(a), b)
        assert y.shape == a.shape
        y.sum().backward()
        assert a.grad.shape == a.shape and b.grad.shape == b.shape
        torch.testing.assert_close(a.grad, torch.cos(a.detach()), rtol=1e-6, atol=0)


def test_a_long_chain_of_nodes_is_freed_without_deep_recursion(nodes):
    """200,000 nodes in a chain, freed unused and freed after a backward: freeing one node at a time
    recursively would overflow the stack long before (PyTorch frees its own nodes iteratively)."""
    x = torch.ones(1, requires_grad=True)
    y = x
    for _ in range(200_000):
        y = twt.relu(y)
    del y  # the whole graph goes unused
    y = x
    for _ in range(200_000):
        y = twt.scale(y, 1.0)
    y.backward()
    assert x.grad.item() == 1.0


def test_double_backward_is_refused_when_used(nodes):
    """backward(create_graph=True) runs (the gradient is the same), but differentiating it raises,
    whether or not the seed requires grad (test_torch_ops.py has the Hessians); without create_graph
    the lean path gives the same bits."""
    x = torch.linspace(-2, 2, 64, dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(twt.tanh(x).sum(), x, create_graph=True)
    (plain,) = torch.autograd.grad(twt.tanh(x).sum(), x)
    assert_same_bits(gx.detach().numpy(), plain.numpy(), "create_graph gradient")
    with pytest.raises(RuntimeError, match="differentiate twice a tapewise node"):
        gx.sum().backward()  # the seed does not require grad: the gradient still depends on x
    v = torch.ones(64, dtype=torch.float64, requires_grad=True)
    (gv,) = torch.autograd.grad(twt.tanh(x), x, grad_outputs=v, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        gv.sum().backward()


# ---------------------------------------------------------------------------------------------------
# Regions: tapewise.torch.region runs a function of tapewise.torch ops as one tape.


def nan_or_same_bits(x, y, what):
    """Identical up to NaN (the per-node path against the tape): equal bits, or both NaN."""
    x, y = np.asarray(x), np.asarray(y)
    assert x.dtype == y.dtype and x.shape == y.shape, what
    both_nan = np.isnan(x) & np.isnan(y)
    differ = np.nonzero((bits(x) != bits(y)) & ~both_nan)[0]
    assert differ.size == 0, f"{what}: {differ.size} elements differ, first at {differ[0]}"


def random_program(rng, n_inputs, rounds, chain):
    """Instructions (name, parent positions, scalars) over the values 0..n_inputs-1 (the inputs) and the results
    of earlier instructions: every node of the table `rounds` times, in random order. A chain takes
    the previous result as its first parent; a DAG any value. Each value is used at most twice, so
    that autograd's and the tape's accumulation orders cannot differ (a + b == b + a). To keep values
    finite and spread through dozens of nodes (a long composition of contractions would collapse
    every element onto one value, which relu or clamp would then zero), each result r goes on as
    sin(scale(r, 2.75)), and the nodes undefined at and below 0 read softplus(x)."""
    uses = [0] * n_inputs
    program = []

    def pick(other=None):
        """A value with a use left, not `other` (a node of one value twice, such as div(v, v), is a
        constant and would end the chain's information). A chain's second parents are inputs while
        any has a use left: they bring fresh values (and gradients) in along the chain."""
        free = [k for k, u in enumerate(uses) if u < 2 and k != other]
        fresh = [k for k in free if k < n_inputs]
        k = int(rng.choice(fresh if chain and fresh else free))
        uses[k] += 1
        return k

    def emit(name, parents, scalars=()):
        program.append((name, parents, list(scalars)))
        uses.append(0)
        return len(uses) - 1

    def random_scalars(name):
        if name == "clamp":
            return [-rng.uniform(0.3, 0.9), rng.uniform(0.3, 0.9)]
        if name == "scale":
            return [rng.choice([-1, 1]) * rng.uniform(0.5, 2.0)]
        if name == "safeLog":
            return [rng.choice([1e-6, 1e-3, 0.5])]
        return []

    names = [n for _ in range(rounds) for n in rng.permutation(NODES)]
    for name in names:
        if chain and uses[-1] < 2:
            uses[-1] += 1
            first = len(uses) - 1
        else:
            first = pick()
        parents = [first] + [pick(other=first) for _ in range(ARITY[name] - 1)]
        if name in POSITIVE:
            parents = [emit("softplus", [p]) for p in parents]
            for p in parents:
                uses[p] += 1
        result = emit(name, parents, random_scalars(name))
        uses[result] += 1
        spread = emit("scale", [result], [2.75])
        uses[spread] += 1
        emit("sin", [spread])
    return program


def run_program(program, inputs, node):
    """The program's last value, recording each instruction with node(name, parent values, scalars)."""
    values = list(inputs)
    for name, parents, scalars in program:
        values.append(node(name, [values[p] for p in parents], scalars))
    return values[-1]


def on_torch(program):
    """The program as a function of torch tensors written with tapewise.torch ops."""
    return lambda *xs: run_program(program, xs, lambda name, ps, scalars: twt.NODES[name](*ps, *scalars))


def tape_reference(backend, program, arrays, requires_grad, seed):
    """(output, {input position: gradient}) through Tape.backward(out, seed, wanted=[leaves])."""
    tape = tapewise.Tape(backend)
    leaves = [tape.leaf(a, requires_grad=r) for a, r in zip(arrays, requires_grad)]
    out = run_program(program, leaves, lambda name, ps, scalars: getattr(tape, name)(*ps, *scalars))
    wanted = [leaf for leaf, r in zip(leaves, requires_grad) if r]
    grads = tape.backward(out, seed, wanted=wanted)
    return tape.host(out), {k: grads.host(leaf) for k, leaf in enumerate(leaves) if leaf in grads}


def random_inputs(gen, n, dtype, device, count):
    return [(torch.rand(n, dtype=dtype, generator=gen) * 4 - 2).to(device) for _ in range(count)]


@pytest.mark.parametrize("shape", ["chain", "dag"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("trial", range(3))
def test_region_gradients_equal_tape_backward_bit_for_bit(trial, device, dtype, shape):
    """Random chains and DAGs over all 23 nodes (scalars included): the region's output and every
    input's gradient are Tape.backward's bits; the same function run node by node agrees up to NaN."""
    rng = np.random.default_rng(1000 * trial + (shape == "dag"))
    gen = torch.Generator().manual_seed(trial)
    program = random_program(rng, 8, rounds=2, chain=shape == "chain")
    inputs = random_inputs(gen, 4099, dtype, device, 8)
    requires_grad = [k != trial for k in range(8)]  # input `trial` needs no gradient
    seed = (torch.rand(4099, dtype=dtype, generator=gen) + 0.5).to(device)
    fn = on_torch(program)

    xs = [x.clone().requires_grad_(r) for x, r in zip(inputs, requires_grad)]
    y = twt.region(fn)(*xs)
    y.backward(seed)
    out_ref, grads_ref = tape_reference(twt.backend_for(inputs[0]), program, inputs, requires_grad, seed)
    assert_same_bits(y.detach().cpu().numpy(), out_ref, "region output")
    informative = 0  # finite, non-zero gradient elements
    for k, x in enumerate(xs):
        if k not in grads_ref:  # needs no gradient, or the output does not depend on it
            assert x.grad is None, f"input {k}"
            continue
        assert_same_bits(x.grad.cpu().numpy(), grads_ref[k], f"input {k}'s gradient")
        informative += int((np.isfinite(grads_ref[k]) & (grads_ref[k] != 0)).sum())
    assert informative > 400, f"only {informative} finite non-zero gradient elements: the comparison says little"

    per_node = [x.clone().requires_grad_(r) for x, r in zip(inputs, requires_grad)]
    y2 = fn(*per_node)
    y2.backward(seed)
    nan_or_same_bits(y2.detach().cpu().numpy(), out_ref, "per-node output")
    for k, x in enumerate(per_node):
        if k in grads_ref:
            nan_or_same_bits(x.grad.cpu().numpy(), grads_ref[k], f"per-node input {k}'s gradient")


def chain_of_the_issue(x, length=100):
    """sin, tanh, sigmoid, scale 0.9, relu repeated (the benchmarks' chain)."""
    for _ in range(length // 5):
        x = twt.relu(twt.scale(twt.sigmoid(twt.tanh(twt.sin(x))), 0.9))
    return x


@pytest.mark.parametrize("device", devices())
def test_region_output_is_a_zero_copy_tensor_feeding_torch_ops(device):
    gen = torch.Generator().manual_seed(3)
    x0 = (torch.rand(4096, generator=gen) * 4 - 2).to(device)
    x = x0.clone().requires_grad_()
    y = twt.region(chain_of_the_issue)(x)
    assert isinstance(y, torch.Tensor) and y.grad_fn is not None and y.device == x.device and y.dtype == x.dtype
    assert y.data_ptr() not in (x.data_ptr(),)
    loss = (y * 3.0).sum() + x.sum()  # torch ops after the region, and x used outside it too
    loss.backward()
    tape = tapewise.Tape(twt.backend_for(x0))
    leaf = tape.leaf(x0)
    out = chain_of_the_issue_on_tape(tape, leaf)
    grads = tape.backward(out, torch.full((4096,), 3.0, device=device), wanted=[leaf])
    expected = torch.from_dlpack(grads[leaf]) + 1.0  # torch adds x.sum()'s gradient to the region's
    assert_same_bits(x.grad.cpu().numpy(), expected.cpu().numpy(), "gradient through torch ops")


def chain_of_the_issue_on_tape(tape, h, length=100):
    for _ in range(length // 5):
        h = tape.relu(tape.scale(tape.sigmoid(tape.tanh(tape.sin(h))), 0.9))
    return h


def test_region_retain_graph_and_second_backward():
    x = torch.linspace(-3, 3, 1000, dtype=torch.float64, requires_grad=True)
    g = torch.rand(1000, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) + 0.5
    y = twt.region(lambda v: twt.mul(twt.sin(v), twt.exp(v)))(x)
    y.backward(g, retain_graph=True)
    first = x.grad.clone()
    y.backward(g)  # retained: a second backward runs the tape's backward again, and torch accumulates
    assert_same_bits(x.grad.numpy(), (first + first).numpy(), "accumulated over two backwards")
    with pytest.raises(RuntimeError, match="second time"):
        y.backward(g)  # the graph was freed by the backward without retain_graph


def test_region_no_grad_and_inputs_without_grad():
    a = torch.linspace(-1, 1, 64, requires_grad=True)
    b = torch.linspace(0.5, 2, 64)  # needs no gradient
    fn = twt.region(lambda u, v: twt.div(twt.tanh(u), v))
    y = fn(a, b)
    y.sum().backward()
    assert a.grad is not None and b.grad is None
    with torch.no_grad():
        z = fn(a, b)
    assert z.grad_fn is None and not z.requires_grad
    assert_same_bits(z.numpy(), y.detach().numpy(), "no_grad value")
    w = fn(a.detach(), b)
    assert w.grad_fn is None and not w.requires_grad


def test_region_input_modified_in_place_before_backward_is_refused():
    """The tape views the inputs: PyTorch's saved-tensor version check refuses a stale backward."""
    x = torch.linspace(-1, 1, 64)
    w = torch.ones(64, requires_grad=True)
    y = twt.region(twt.mul)(x, w)
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_region_arguments_tensor_twice_kwargs_scalars_and_returned_input():
    gen = torch.Generator().manual_seed(9)
    x0 = torch.rand(300, dtype=torch.float64, generator=gen) * 4 - 2
    c = 0.625

    def f(u, v, *, scale_by):
        return twt.maximum(twt.scale(u, scale_by), twt.sin(v))

    x = x0.clone().requires_grad_()
    y = twt.region(f)(x, x, scale_by=c)  # one tensor passed twice is one leaf
    y.sum().backward()
    tape = tapewise.Tape(tapewise.cpu())
    leaf = tape.leaf(x0)
    out = tape.max(tape.scale(leaf, c), tape.sin(leaf))
    grads = tape.backward(out, torch.ones(300, dtype=torch.float64), wanted=[leaf])
    assert_same_bits(x.grad.numpy(), grads.host(leaf), "x used twice")

    x.grad = None
    same = twt.region(lambda u, v: u)(x, x.detach() + 1)  # returns an input: its gradient is the seed
    assert same.data_ptr() == x.data_ptr()
    same.backward(torch.full((300,), 2.5, dtype=torch.float64))
    assert torch.equal(x.grad, torch.full((300,), 2.5, dtype=torch.float64))


def test_region_inside_region_records_onto_the_outer_tape():
    inner = twt.region(lambda v: twt.tanh(twt.sin(v)))
    outer = twt.region(lambda v: twt.relu(inner(twt.scale(v, 2.0))))
    flat = twt.region(lambda v: twt.relu(twt.tanh(twt.sin(twt.scale(v, 2.0)))))
    x1 = torch.linspace(-2, 2, 200, requires_grad=True)
    x2 = torch.linspace(-2, 2, 200, requires_grad=True)
    y1, y2 = outer(x1), flat(x2)
    assert len(y1.grad_fn.next_functions) == 1  # one region node, not two
    y1.sum().backward()
    y2.sum().backward()
    assert_same_bits(y1.detach().numpy(), y2.detach().numpy(), "value")
    assert_same_bits(x1.grad.numpy(), x2.grad.numpy(), "gradient")


def test_region_errors_are_clear():
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(TypeError, match="int16; tapewise takes float32, float64, bfloat16 or float16"):
        twt.region(twt.sin)(torch.ones(3, dtype=torch.int16))
    with pytest.raises(TypeError, match="int32; tapewise takes float32, float64, bfloat16 or float16"):
        twt.region(twt.sin)(torch.ones(3, dtype=torch.int32))
    with pytest.raises(ValueError, match="one device"):
        twt.region(twt.add)(torch.ones(3), torch.ones(3, device="meta"))
    on_meta = twt.region(twt.sin)(torch.ones(3, device="meta"))  # node by node: the custom op's fake kernel
    assert on_meta.device.type == "meta" and on_meta.shape == (3,)
    with pytest.raises(ValueError, match="no broadcasting"):
        twt.region(twt.add)(torch.ones(3), torch.ones(4))
    with pytest.raises(ValueError, match="no broadcasting"):
        twt.region(twt.mul)(torch.ones(3), torch.ones(3, dtype=torch.float64))
    with pytest.raises(TypeError, match="several outputs are not supported"):
        twt.region(lambda u: (twt.sin(u), twt.cos(u)))(x)
    with pytest.raises(TypeError, match="must return one value"):
        twt.region(lambda u: torch.ones(3))(x)
    with pytest.raises(TypeError, match="no torch tensor"):
        twt.region(twt.sin)(3.0)
    with pytest.raises(TypeError, match="torch.sin|sin was called"):
        twt.region(lambda u: twt.relu(torch.sin(u)))(x)
    with pytest.raises(TypeError, match="operator \\+"):
        twt.region(lambda u: twt.sin(u) + 1.0)(x)
    with pytest.raises(TypeError, match="control flow"):
        twt.region(lambda u: twt.sin(u) if u else u)(x)
    captured = torch.ones(3)
    with pytest.raises(TypeError, match="pass each torch tensor as an argument"):
        twt.region(lambda u: twt.add(u, captured))(x)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        twt.region(lambda u: twt.NODES["scale"](u))(x)
    escaped = []
    twt.region(lambda u: escaped.append(u) or twt.sin(u))(x)
    with pytest.raises(RuntimeError, match="has returned"):
        twt.sin(escaped[0])


def test_region_values_say_what_they_are():
    seen = {}

    def f(u):
        v = twt.sin(u)
        seen.update(shape=v.shape, dtype=v.dtype, text=repr(v))
        return v

    twt.region(f)(torch.ones(2, 3, dtype=torch.float64))
    assert seen["shape"] == torch.Size([2, 3]) and seen["dtype"] == torch.float64
    assert "node 1" in seen["text"] and "(2, 3) float64" in seen["text"]


def test_region_under_torch_compile_is_traced_node_by_node():
    """torch.compile (the aot_eager backend: Dynamo and AOTAutograd, no C++ compiler needed) traces the
    region's function node by node, each node its custom op: one graph with no break (fullgraph=True
    compiles), the region's bits (its gradients are the nodes' up to NaN; these inputs give none)."""
    dynamo = pytest.importorskip("torch._dynamo")
    block = twt.region(lambda u, w: twt.relu(twt.scale(twt.tanh(twt.mul(u, w)), 0.9)))

    def model(u, w):
        return (block(u * 2.0, w) * 3.0).sum()

    gen = torch.Generator().manual_seed(4)
    x0, w0 = torch.randn(256, generator=gen), torch.randn(256, generator=gen)
    results = []
    for run in (model, torch.compile(model, backend="aot_eager", fullgraph=True)):
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        loss = run(x, w)
        loss.backward()
        results.append((loss.detach(), x.grad, w.grad))
    for eager, compiled in zip(*results):
        assert_same_bits(compiled.numpy(), eager.numpy(), "compiled against eager")
    dynamo.reset()
    explained = dynamo.explain(model)(x0, w0)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_per_node_fast_path_gives_the_bits_of_the_tuple_pointer_api(nodes):
    """Each node through tapewise.torch (Backend._forward_raw/_vjp_raw) against Backend.forward_ptrs /
    vjp_fused_ptrs, the entry points it called before, on the same memory."""
    for k, name in enumerate(NODES):
        gen = torch.Generator().manual_seed(200 + k)
        for dtype in (torch.float32, torch.float64):
            inputs = [torch.randn(777, dtype=dtype, generator=gen) * 3 for _ in range(ARITY[name])]
            g = torch.randn(777, dtype=dtype, generator=gen)
            xs = [x.clone().requires_grad_() for x in inputs]
            y = call(name, xs)
            y.backward(g)
            backend, dtype_name = tapewise.cpu(), str(dtype).removeprefix("torch.")
            s = (SCALARS.get(name, []) + [0.0, 0.0])[:2]
            y_ref = torch.empty_like(inputs[0])
            grads_ref = [torch.empty_like(x) for x in inputs]
            backend.forward_ptrs(k, s[0], s[1], [x.data_ptr() for x in inputs], y_ref.data_ptr(), 777, dtype_name)
            backend.vjp_fused_ptrs(k, s[0], s[1], [x.data_ptr() for x in inputs], g.data_ptr(),
                                   [d.data_ptr() for d in grads_ref], 777, dtype_name)
            assert_same_bits(y.detach().numpy(), y_ref.numpy(), f"{name} {dtype} forward")
            if ARITY[name] == 2 and xs[0] is xs[1]:
                continue
            for x, d in zip(xs, grads_ref):
                assert_same_bits(x.grad.numpy(), d.numpy(), f"{name} {dtype} gradient")


@pytest.mark.skipif(not tapewise.cuda_available(), reason="no CUDA device")
def test_region_runs_on_the_current_stream():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    x0 = torch.randn(1 << 16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x = x0.clone().requires_grad_()
        y = twt.region(chain_of_the_issue)(x)
        y.backward(torch.ones_like(y))
        tape = tapewise.Tape(twt.backend_for(x0))
        assert tape.backend.stream == side.cuda_stream
        leaf = tape.leaf(x0)
        grads = tape.backward(chain_of_the_issue_on_tape(tape, leaf), torch.ones_like(x0), wanted=[leaf])
        expected = torch.from_dlpack(grads[leaf])
    torch.cuda.synchronize()
    assert_same_bits(x.grad.cpu().numpy(), expected.cpu().numpy(), "region on a side stream")


def test_bench_torch_nodes_runs_on_the_cpu_and_reports_every_variant(tmp_path):
    """A smoke run of bench/bench_torch_nodes.py at tiny sizes: it checks its variants against
    the tape before timing, exits 0, and writes a number for every node kind and chain variant."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[2] / "bench" / "bench_torch_nodes.py"
    out = tmp_path / "bench.json"
    run = subprocess.run([sys.executable, str(script), "--device", "cpu", "--out", str(out), "--node-log2", "6",
                          "--chain-sizes", "4", "6", "--chain-length", "20", "--reps", "1", "--chain-reps", "1",
                          "--warmup", "0", "--calls", "2"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert report["schema"] == "tapewise.bench_torch_nodes/1"
    kinds = {row["op"] for row in report["per_node"]}
    assert {"sin", "tanh", "sigmoid", "relu", "scale", "maximum", "mul", "clamp"} <= kinds
    for row in report["per_node"]:
        assert row["eager_fwd_bwd_us"] > 0 and row["tapewise_fwd_bwd_us"] > 0 and row["meets_target"] is None
        assert row["tapewise_python_node_fwd_bwd_us"] > 0 and row["graph_tapewise_fwd_bwd_us"] > 0
        assert row["graph_eager_fwd_bwd_us"] > 0 and row["graph_tapewise_python_node_fwd_bwd_us"] > 0
    assert [row["log2"] for row in report["chain_us_per_node"]] == [4, 6]
    for row in report["chain_us_per_node"]:
        for variant in ("eager", "tapewise.torch per node", "tapewise.torch per node (Python)", "tapewise.torch region",
                        "tapewise.Tape"):
            assert row[variant] > 0, variant
    if not torch.cuda.is_available():
        refused = subprocess.run([sys.executable, str(script), "--device", "cuda", "--out", str(tmp_path / "no.json")],
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and "needs a GPU" in refused.stderr
        assert not (tmp_path / "no.json").exists()


def test_region_double_backward_is_refused():
    x = torch.linspace(-1, 1, 8, dtype=torch.float64, requires_grad=True)
    v = torch.ones(8, dtype=torch.float64, requires_grad=True)
    y = twt.region(twt.tanh)(x)
    (gx,) = torch.autograd.grad(y, x, grad_outputs=v, create_graph=True)
    (plain,) = torch.autograd.grad(twt.region(twt.tanh)(x), x, grad_outputs=v.detach())
    assert_same_bits(gx.detach().numpy(), plain.numpy(), "create_graph gradient")
    with pytest.raises(RuntimeError, match="once_differentiable"):
        gx.sum().backward()


def test_a_tensor_sharing_a_tapes_memory_alive_at_exit_is_no_leak_report(tmp_path):
    """A torch tensor over a tape's value, or a region's output, still referenced when the interpreter
    exits keeps its tape alive past nanobind's leak check: the script exits cleanly and prints nothing
    (nanobind would otherwise report 'leaked instances' of Tape, which nothing leaked)."""
    script = tmp_path / "alive_at_exit.py"
    script.write_text(
        "import torch, tapewise, tapewise.torch as twt\n"
        "tape = tapewise.Tape(tapewise.cpu())\n"
        "value = torch.from_dlpack(tape.value(tape.sin(tape.leaf([1.0, 2.0]))))\n"
        "x = torch.ones(4, dtype=torch.float64, requires_grad=True)\n"
        "out = twt.region(lambda v: twt.tanh(twt.sin(v)))(x)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr


# The C++ nodes: which code runs the nodes (TAPEWISE_TORCH_NATIVE, node_path()), in a fresh interpreter
# each (the choice is made once per process), and what a user sees when the C++ nodes cannot be had.

FIRST_NODE = ("import torch, tapewise.torch as twt\n"
              "x = torch.ones(3, requires_grad=True)\n"
              "twt.sin(x).sum().backward()\n"
              "kind, detail = twt.node_path()\n"
              "print(kind, type(twt.sin(x).grad_fn).__name__)\n")


def run_fresh(code, unset=(), **env):
    """Runs `code` in a fresh interpreter with this environment, less `unset`, plus `env`."""
    environment = {k: v for k, v in os.environ.items() if k not in unset}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                          env={**environment, **env})
    return done.returncode, done.stdout.strip(), done.stderr


def test_the_cpp_nodes_are_the_default(nodes):
    # The fixture has built (or found) the C++ nodes in the cache this process uses, as a user's first call does.
    code, out, err = run_fresh(FIRST_NODE, unset=("TAPEWISE_TORCH_NATIVE",))
    assert code == 0, err
    assert out.split() == ["native", "CppFunction"], out + err
    assert "Warning" not in err, err


def test_grad_fn_says_which_nodes_ran(nodes):
    y = twt.sin(torch.ones(3, requires_grad=True))
    assert twt.node_path()[0] == nodes
    assert "UnaryNodeBackward" in y.grad_fn.name()  # tapewise::UnaryNodeBackward or _UnaryNodeBackward
    assert (type(y.grad_fn).__name__ == "CppFunction") == (nodes == "native")


def test_the_python_nodes_by_choice_and_a_bad_choice_named():
    code, out, err = run_fresh(FIRST_NODE, TAPEWISE_TORCH_NATIVE="0")
    assert code == 0 and out.split() == ["python", "_UnaryNodeBackward"], out + err
    assert "Warning" not in err and "building" not in err, err
    code, out, err = run_fresh(FIRST_NODE, TAPEWISE_TORCH_NATIVE="maybe")
    assert code != 0 and "TAPEWISE_TORCH_NATIVE='maybe' is not auto" in err, err


def test_a_build_that_fails_falls_back_with_a_warning_or_raises_when_required(tmp_path):
    """No working C++ compiler (CXX names none): auto warns, saying why, and runs the Python nodes with
    the same results; TAPEWISE_TORCH_NATIVE=1 raises instead."""
    broken = {"TAPEWISE_TORCH_NATIVE_DIR": str(tmp_path), "CXX": str(tmp_path / "no-such-compiler")}
    code, out, err = run_fresh(FIRST_NODE, **broken)
    assert code == 0 and out.split() == ["python", "_UnaryNodeBackward"], out + err
    assert "RuntimeWarning" in err and "could not be built or loaded" in err, err
    code, out, err = run_fresh(FIRST_NODE, TAPEWISE_TORCH_NATIVE="1", **broken)
    assert code != 0 and "TAPEWISE_TORCH_NATIVE=1, but its C++ nodes could not be built" in err, err


def test_a_corrupt_cached_library_falls_back_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TAPEWISE_TORCH_NATIVE_DIR", str(tmp_path))
    name, build_dir = twt._native_build_dir()
    build_dir.mkdir(parents=True)
    library = build_dir / f"{name}.so"
    library.write_bytes(b"not a shared library")
    code, out, err = run_fresh(FIRST_NODE, TAPEWISE_TORCH_NATIVE_DIR=str(tmp_path))
    assert code == 0 and out.split()[0] == "python", out + err
    assert "RuntimeWarning" in err and name in err and "remove the cache folder" in err, err


# bfloat16 and float16: the nodes run on 16-bit tensors, results of the same dtype, gradients equal to
# Tape.backward's bits (node by node and in regions), forwards as spec/conventions.md 0.3 says.

HALF = [torch.bfloat16, torch.float16]
# The nodes whose forward is a staging of several 16-bit roundings, not one float32 op rounded once.
STAGED_FORWARD = {"silu", "gelu", "softplus", "safeLog"}


def every_16bit_pattern(dtype):
    """All 65536 bit patterns of a 16-bit dtype (every NaN payload, ±0, ±inf, subnormals)."""
    return torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)


def tape_run_torch(backend, name, arrays, seed, scalars):
    """(output, [gradients]) of one node through Tape.backward, as torch tensors (bfloat16 has no numpy)."""
    tape = tapewise.Tape(backend)
    ids = [tape.leaf(a.detach()) for a in arrays]
    out = getattr(tape, name)(*ids, *scalars)
    grads = tape.backward(out, seed)
    return torch.from_dlpack(tape.value(out)).clone(), [torch.from_dlpack(grads[i]).clone() for i in ids]


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("name", NODES)
def test_16bit_gradients_equal_tape_backward_bit_for_bit(nodes, name, device, dtype):
    gen = torch.Generator().manual_seed(200 + NODES.index(name))
    inputs = [(torch.randn(4096, generator=gen) * 3).to(dtype).to(device) for _ in range(ARITY[name])]
    if name in POSITIVE:
        inputs = [x.abs() for x in inputs]
    if ARITY[name] == 2:
        inputs[1][::5] = inputs[0][::5]  # ties
    inputs = [x.requires_grad_() for x in inputs]
    seed = torch.randn(4096, generator=gen).to(dtype).to(device)
    y = call(name, inputs)
    assert y.dtype == dtype and y.device == inputs[0].device
    y.backward(seed)
    y_tape, grads_tape = tape_run_torch(twt.backend_for(inputs[0]), name, inputs, seed, SCALARS.get(name, []))
    assert_same_torch_bits(y, y_tape, f"{name} forward")
    informative = 0
    for x, d in zip(inputs, grads_tape):
        assert x.grad.dtype == dtype
        assert_same_torch_bits(x.grad, d, f"{name} gradient")
        informative += int((d.float().isfinite() & (d != 0)).sum())
    assert informative > 400, f"{name}: only {informative} finite non-zero gradient elements"


def rounded_scalar(c, dtype):
    """R16(R32(c)): a scalar as tapewise rounds it to a 16-bit dtype (through float32, as ATen does)."""
    return torch.tensor(c, dtype=torch.float32).to(dtype).item()


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("name", [n for n in NODES if n not in STAGED_FORWARD])
def test_16bit_forward_is_the_float32_forward_rounded_once(nodes, name, device, dtype):
    """For a node whose forward is one op, the 16-bit forward of x is R16(forward32(widened x)) with
    the scalars R16(R32(c)) (spec/conventions.md 0.3): tapewise's float32 forward of the widened
    inputs, rounded by torch's .to(dtype), on every 16-bit pattern (paired with a shuffle of them for
    two-input nodes). NaN matches NaN (the payload of a rounded NaN is not specified)."""
    x = every_16bit_pattern(dtype)
    gen = torch.Generator().manual_seed(NODES.index(name))
    inputs = [x] + [x[torch.randperm(x.numel(), generator=gen)] for _ in range(ARITY[name] - 1)]
    inputs = [t.to(device) for t in inputs]
    scalars = [rounded_scalar(c, dtype) for c in SCALARS.get(name, [])]
    y16 = twt.NODES[name](*inputs, *SCALARS.get(name, []))  # the node rounds its scalars itself
    expected = twt.NODES[name](*[t.float() for t in inputs], *scalars).to(dtype)
    assert_same_torch_bits(y16, expected, f"{name} {dtype} forward", nan_matches_nan=True)
    tape = tapewise.Tape(twt.backend_for(inputs[0]))
    ids = [tape.leaf(t) for t in inputs]
    via_tape = torch.from_dlpack(tape.value(getattr(tape, name)(*ids, *SCALARS.get(name, []))))
    # The tape runs this size as a program, whose NaN * NaN may keep the other operand's payload.
    assert_same_torch_bits(via_tape, y16, f"{name} {dtype} forward through the tape", nan_matches_nan=True)


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("device", devices())
def test_16bit_scalars_round_through_float32(nodes, device, dtype):
    """scale's scalar is R16(R32(c)): a c that rounds differently straight to 16 bits tells them apart."""
    significand_bits = 8 if dtype is torch.bfloat16 else 11
    c = 1 + 2.0**-significand_bits + 2.0**-40  # just above a 16-bit tie, which float32 rounds onto
    mantissa, exponent = math.frexp(c)
    straight = round(mantissa * 2**significand_bits) * 2.0 ** (exponent - significand_bits)  # RNE, once
    assert straight != rounded_scalar(c, dtype), "c does not tell one rounding from two"
    x = torch.tensor([1.0, -3.0, 0.5], dtype=dtype, device=device)
    expected = (x.float() * rounded_scalar(c, dtype)).to(dtype)
    assert_same_torch_bits(twt.scale(x, c), expected, "scale by R16(R32(c))")


@pytest.mark.parametrize("shape", ["chain", "dag"])
@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("device", devices())
def test_16bit_region_gradients_equal_tape_backward_bit_for_bit(device, dtype, shape):
    """A random program over all the nodes as a region on 16-bit tensors: the output and gradients are
    Tape.backward's bits and of the inputs' dtype; node by node agrees up to NaN."""
    rng = np.random.default_rng(16 + (shape == "dag"))
    gen = torch.Generator().manual_seed(16)
    program = random_program(rng, 8, rounds=1, chain=shape == "chain")
    inputs = [x.to(dtype) for x in random_inputs(gen, 4099, torch.float32, device, 8)]
    seed = (torch.rand(4099, generator=gen) + 0.5).to(dtype).to(device)
    fn = on_torch(program)
    xs = [x.clone().requires_grad_() for x in inputs]
    y = twt.region(fn)(*xs)
    assert y.dtype == dtype
    y.backward(seed)
    tape = tapewise.Tape(twt.backend_for(inputs[0]))
    leaves = [tape.leaf(a) for a in inputs]
    out = run_program(program, leaves, lambda name, ps, scalars: getattr(tape, name)(*ps, *scalars))
    grads = tape.backward(out, seed)
    assert_same_torch_bits(y, torch.from_dlpack(tape.value(out)), "region output")
    informative = 0
    for k, x in enumerate(xs):
        if leaves[k] not in grads:
            assert x.grad is None, f"input {k}"
            continue
        d = torch.from_dlpack(grads[leaves[k]])
        assert x.grad.dtype == dtype
        assert_same_torch_bits(x.grad, d, f"input {k}'s gradient")
        informative += int((d.float().isfinite() & (d != 0)).sum())
    assert informative > 400, f"only {informative} finite non-zero gradient elements: the comparison says little"
    per_node = [x.clone().requires_grad_() for x in inputs]
    y2 = fn(*per_node)
    y2.backward(seed)
    assert_same_torch_bits(y2, y, "per-node output", nan_matches_nan=True)
    for x, x_region in zip(per_node, xs):
        if x_region.grad is not None:
            assert_same_torch_bits(x.grad, x_region.grad, "per-node gradient", nan_matches_nan=True)
