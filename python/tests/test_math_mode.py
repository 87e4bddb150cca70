"""python/tests/test_math_mode.py — math modes through the Python door: tapewise.cpu() is exact,
tapewise.cuda(math=...) takes "aten" or "exact" and refuses anything else with a clear error, and a
CUDA backend in exact mode gives tapewise.cpu()'s bits on every node (GPU only)."""
import numpy as np
import pytest

import tapewise
from conftest import ARITY, SCALARS, bits, leaf, node_inputs


def test_the_cpu_backend_is_exact():
    assert tapewise.cpu().math == "exact"
    assert tapewise.cpu(threads=2).math == "exact"


def test_a_math_mode_is_checked_before_any_device_is_opened():
    with pytest.raises(tapewise.InvalidArgumentError, match="unknown math mode 'fast' \\(aten or exact\\)"):
        tapewise.cuda(math="fast")
    with pytest.raises(TypeError, match="math must be 'aten' or 'exact', not int"):
        tapewise.cuda(math=1)
    with pytest.raises(TypeError, match="not NoneType"):
        tapewise.cuda(math=None)


def _every_result(backend, name, dtype):
    rng = np.random.default_rng(20261205)
    inputs, g = node_inputs(name, dtype, rng, 5003)
    tape = tapewise.Tape(backend)
    ids = [leaf(tape, x) for x in inputs]
    y = tape.apply(name, ids, SCALARS.get(name, []))
    out = [tape.host(y)]
    for path in ("fused", "staged"):
        grads = tape.backward(y, g, path=path)
        out += [grads.host(i) for i in ids]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(ARITY))
def test_cuda_in_exact_mode_gives_the_cpu_backends_bits(name, dtype):
    if not tapewise.cuda_available():
        pytest.skip(f"no CUDA: {tapewise.cuda_unavailable_reason()}")
    cuda = tapewise.cuda(math="exact")
    assert cuda.math == "exact" and tapewise.cuda().math == "aten"
    for got, want in zip(_every_result(cuda, name, dtype), _every_result(tapewise.cpu(), name, dtype)):
        same = (bits(got) == bits(want)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), f"{name} {np.dtype(dtype).name}: {np.count_nonzero(~same)} elements differ"


# tapewise.torch: set_math chooses the CUDA nodes' mode; CPU tensors are exact whatever it says.
def test_tapewise_torch_set_math_is_checked_and_reported():
    pytest.importorskip("torch")
    import tapewise.torch as twt
    assert twt.get_math() == "aten"
    for bad in ("fast", 1, None):
        with pytest.raises(ValueError, match="set_math: math is .*; it takes 'aten' or 'exact'"):
            twt.set_math(bad)
    assert twt.get_math() == "aten"
    try:
        twt.set_math("exact")
        assert twt.get_math() == "exact"
    finally:
        twt.set_math("aten")


def _torch_sin_and_grad(twt, torch, x):
    x = x.clone().requires_grad_(True)
    y = twt.sin(twt.exp(twt.tanh(x)))
    (g,) = torch.autograd.grad(y, x, torch.full_like(y, 0.75))
    return y.detach().cpu(), g.cpu()


def test_tapewise_torch_cpu_tensors_run_exact_mode_in_either_setting():
    pytest.importorskip("torch")
    import tapewise.torch as twt
    import torch
    x = torch.linspace(-20, 20, 4099, dtype=torch.float32)
    tape = tapewise.Tape(tapewise.cpu())
    a = tape.leaf(x.numpy())
    want = np.asarray(tape.value(tape.sin(tape.exp(tape.tanh(a)))))
    try:
        for mode in ("aten", "exact"):
            twt.set_math(mode)
            y, _ = _torch_sin_and_grad(twt, torch, x)
            assert np.array_equal(bits(y.numpy()), bits(want)), mode
    finally:
        twt.set_math("aten")


@pytest.mark.skipif(not tapewise.cuda_available(), reason="no CUDA device")
def test_tapewise_torch_exact_mode_on_cuda_gives_the_cpu_bits():
    pytest.importorskip("torch")
    import tapewise.torch as twt
    import torch
    x = torch.linspace(-20, 20, 1 << 16, dtype=torch.float32)
    want = _torch_sin_and_grad(twt, torch, x)
    try:
        twt.set_math("exact")
        got = _torch_sin_and_grad(twt, torch, x.cuda())
    finally:
        twt.set_math("aten")
    for w, g in zip(want, got):
        assert np.array_equal(bits(w.numpy()), bits(g.numpy()))
