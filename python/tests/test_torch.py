"""tapewise.torch: every node as a torch.autograd.Function — gradcheck in float64 away from kinks, and
gradients equal to Tape.backward bit for bit, on CPU tensors and (where available) CUDA tensors."""

import numpy as np
import pytest

import tapewise
from conftest import ARITY, POSITIVE, SCALARS, TABLE, assert_same_bits

torch = pytest.importorskip("torch", reason="PyTorch is not installed (tapewise.torch tests run where it is)")
twt = pytest.importorskip("tapewise.torch")

NODES = list(tapewise.NODE_NAMES)


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
def test_gradcheck_float64(name, device):
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
def test_gradients_equal_tape_backward_bit_for_bit(name, device, dtype):
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
def test_graph_gradients_equal_tape_backward(device):
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
def test_max_of_a_tensor_with_itself_matches_the_tape(device):
    a = torch.tensor([1.0, -2.0], device=device, requires_grad=True)
    g = torch.tensor([2.0**-149, 3.0], device=device)
    twt.maximum(a, a).backward(g)
    assert_same_bits(a.grad.cpu().numpy(), g.cpu().numpy(), "max(a, a)")


@pytest.mark.parametrize("device", devices())
def test_outputs_are_fresh_tensors_on_the_input_device(device):
    x = torch.randn(100, device=device, requires_grad=True)
    y = twt.sin(x)
    assert y.device == x.device and y.dtype == x.dtype and y.data_ptr() != x.data_ptr()
    y.sum().backward()  # an expanded (stride 0) upstream gradient is made contiguous
    torch.testing.assert_close(x.grad, torch.cos(x.detach()), rtol=1e-6, atol=1e-6)


def test_errors_are_clear():
    with pytest.raises(TypeError, match="float32 or float64"):
        twt.sin(torch.ones(3, dtype=torch.float16))
    with pytest.raises(ValueError, match="no broadcasting"):
        twt.add(torch.ones(3), torch.ones(1))
    with pytest.raises(ValueError, match="one shape, dtype and device"):
        twt.mul(torch.ones(3), torch.ones(3, dtype=torch.float64))


def test_non_contiguous_inputs_are_made_contiguous():
    x = torch.randn(8, 8, dtype=torch.float64).t().requires_grad_()
    y = twt.tanh(x)
    torch.testing.assert_close(y, torch.tanh(x.detach()), rtol=1e-15, atol=0)
    y.backward(torch.ones(8, 8, dtype=torch.float64))
    torch.testing.assert_close(x.grad, 1 - torch.tanh(x.detach()) ** 2, rtol=1e-14, atol=0)


@pytest.mark.skipif(not tapewise.cuda_available(), reason="no CUDA device")
def test_backends_follow_the_current_stream():
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
def test_empty_and_zero_dim_tensors(device):
    """An empty tensor may have no address: the nodes compute nothing for it, in both arities."""
    for shape in [(0,), (3, 0), ()]:
        a = torch.full(shape, 0.5, device=device).requires_grad_()
        b = torch.full(shape, 0.25, device=device).requires_grad_()
        y = twt.add(twt.sin(a), b)
        assert y.shape == a.shape
        y.sum().backward()
        assert a.grad.shape == a.shape and b.grad.shape == b.shape
        torch.testing.assert_close(a.grad, torch.cos(a.detach()), rtol=1e-6, atol=0)


def test_double_backward_is_refused_when_used():
    """backward(create_graph=True) runs (the gradient is the same), but differentiating it raises, as
    once_differentiable says; without create_graph the lean path gives the same bits."""
    x = torch.linspace(-2, 2, 64, dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(twt.tanh(x).sum(), x, create_graph=True)
    (plain,) = torch.autograd.grad(twt.tanh(x).sum(), x)
    assert_same_bits(gx.detach().numpy(), plain.numpy(), "create_graph gradient")
    with pytest.raises(RuntimeError, match="does not require grad"):
        gx.sum().backward()  # nothing of the gradient requires grad (the seed does not)
    v = torch.ones(64, dtype=torch.float64, requires_grad=True)
    (gv,) = torch.autograd.grad(twt.tanh(x), x, grad_outputs=v, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        gv.sum().backward()
