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
