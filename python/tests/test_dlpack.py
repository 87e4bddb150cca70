"""Zero-copy DLPack interop: leaves and seeds used in place, values and gradients exported without a
copy (numpy here; JAX, PyTorch and CuPy where installed; CUDA where a device opens), lifetimes, and
wrong device, dtype or layout rejected; bfloat16 and float16 bit for bit, every pattern."""

import gc
import sys

import numpy as np
import pytest

import tapewise
from conftest import assert_same_bits, assert_same_torch_bits, bits


def pointer(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_numpy_leaf_and_value_share_memory():
    tape = tapewise.Tape(tapewise.cpu())
    a = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    x = tape.leaf(a)
    v = np.asarray(tape.value(x))
    assert pointer(v) == pointer(a) == a.ctypes.data
    assert v.shape == (3, 4) and tape.shape(x) == (3, 4) and tape.dtype(x) == "float64"
    y = tape.tanh(x)
    assert pointer(np.asarray(tape.value(y))) == pointer(np.asarray(tape.value(y)))  # one buffer, no copies


def test_gradient_arrays_own_their_buffer():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.array([0.25, 0.5, 0.75], dtype=np.float32))
    grads = tape.backward(tape.exp(x), np.ones(3, np.float32))
    d1, d2 = np.asarray(grads[x]), np.asarray(grads.get(x))
    assert pointer(d1) == pointer(d2) == grads.buffer(x).data_ptr
    expected = d1.copy()
    del tape, grads
    gc.collect()
    np.testing.assert_array_equal(d1, expected)  # the array keeps the gradient alive


def test_values_keep_the_tape_alive_and_leaves_keep_arrays_alive():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.full(4, 2.0))  # the temporary is held by the tape
    gc.collect()
    value = tape.value(tape.sqrt(x))
    del tape
    gc.collect()
    np.testing.assert_array_equal(np.asarray(value), np.sqrt(np.full(4, 2.0)))


def test_dlpack_protocol_of_exports():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.array([1.0, 4.0]))
    v = tape.value(x)
    assert v.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(v), [1.0, 4.0])
    assert pointer(np.from_dlpack(v)) == pointer(np.asarray(v))
    buf = tape.backward(x, np.ones(2)).buffer(x)
    np.testing.assert_array_equal(np.from_dlpack(buf), [1.0, 1.0])


def test_read_only_zero_size_and_scalar_arrays():
    tape = tapewise.Tape(tapewise.cpu())
    ro = np.array([1.0, 2.0])
    ro.flags.writeable = False
    assert pointer(np.asarray(tape.value(tape.leaf(ro)))) == pointer(ro)
    empty = tape.leaf(np.zeros((0, 3), np.float32))
    assert tape.host(tape.sin(empty)).shape == (0, 3)
    scalar = tape.leaf(np.array(0.5))
    assert tape.host(tape.exp(scalar)).shape == ()


def test_seed_is_used_in_place_or_copied_when_needed():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.array([1.0, 2.0, 3.0]))
    y = tape.scale(x, 3.0)
    strided_seed = np.arange(6, dtype=np.float64)[::2]
    np.testing.assert_array_equal(tape.backward(y, strided_seed).host(x), [0.0, 6.0, 12.0])


def test_jax_interop():
    jax = pytest.importorskip("jax", reason="JAX is not installed (pip install jax jaxlib)")
    jnp = jax.numpy
    tape = tapewise.Tape(tapewise.cpu())
    on_cpu = jax.devices("cpu")[0]  # JAX's default device is a GPU where one exists
    j = jax.device_put(jnp.asarray([0.5, -1.0, 2.0], dtype=jnp.float32), on_cpu)
    x = tape.leaf(j)
    assert pointer(np.asarray(tape.value(x))) == j.unsafe_buffer_pointer()
    y = tape.mul(tape.sin(x), x)
    grads = tape.backward(y, jax.device_put(jnp.ones(3, dtype=jnp.float32), on_cpu))
    back = jax.dlpack.from_dlpack(grads[x]) if hasattr(jax, "dlpack") else jnp.from_dlpack(grads[x])
    np.testing.assert_allclose(np.asarray(back), np.cos(np.asarray(j)) * np.asarray(j) + np.sin(np.asarray(j)),
                               rtol=1e-6)
    with pytest.raises(tapewise.DTypeMismatchError):
        tape.leaf(jax.device_put(jnp.asarray([1, 2], dtype=jnp.int32), on_cpu))


def test_torch_cpu_interop():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    tape = tapewise.Tape(tapewise.cpu())
    t = torch.randn(5, dtype=torch.float64)
    x = tape.leaf(t)
    assert torch.from_dlpack(tape.value(x)).data_ptr() == t.data_ptr()
    grads = tape.backward(tape.softplus(x), torch.ones(5, dtype=torch.float64))
    g = torch.from_dlpack(grads[x])
    assert g.data_ptr() == grads.buffer(x).data_ptr
    torch.testing.assert_close(g, torch.sigmoid(t), rtol=1e-14, atol=0)
    with pytest.raises(tapewise.InvalidArgumentError, match="not C-contiguous"):
        tape.leaf(torch.randn(4, 4, dtype=torch.float64).t())
    with pytest.raises(tapewise.DTypeMismatchError, match="int16"):
        tape.leaf(torch.ones(3, dtype=torch.int16))


def _torch_cuda():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available() or not tapewise.cuda_available():
        pytest.skip(f"no CUDA device: {tapewise.cuda_unavailable_reason() or 'torch.cuda.is_available() is False'}")
    return torch


@pytest.mark.parametrize("own_stream", [False, True], ids=["callers_stream", "own_stream"])
def test_torch_cuda_zero_copy(own_stream):
    torch = _torch_cuda()
    stream = None if own_stream else torch.cuda.current_stream()
    backend = tapewise.cuda(0, stream=stream)
    assert backend.on_callers_stream is not own_stream
    tape = tapewise.Tape(backend)
    t = torch.randn(1 << 20, device="cuda:0")
    x = tape.leaf(t)
    assert torch.from_dlpack(tape.value(x)).data_ptr() == t.data_ptr()
    y = tape.max(tape.sin(x), tape.scale(x, 0.5))
    seed = torch.rand(1 << 20, device="cuda:0") + 0.5
    grads = tape.backward(y, seed)
    g = torch.from_dlpack(grads[x])
    assert g.data_ptr() == grads.buffer(x).data_ptr and g.device == t.device
    expected = torch.where(torch.sin(t) > t * 0.5, torch.cos(t) * seed,
                           torch.where(t * 0.5 > torch.sin(t), seed * 0.5, seed * 0.5 * (torch.cos(t) + 0.5)))
    torch.testing.assert_close(g, expected, rtol=1e-5, atol=1e-6)


def test_torch_cuda_wrong_device_and_layout():
    torch = _torch_cuda()
    cpu_tape = tapewise.Tape(tapewise.cpu())
    with pytest.raises(tapewise.BackendMismatchError, match="cuda:0"):
        cpu_tape.leaf(torch.ones(3, device="cuda"))
    tape = tapewise.Tape(tapewise.cuda(0, stream=torch.cuda.current_stream()))
    with pytest.raises(tapewise.BackendMismatchError, match="copy=True"):
        tape.leaf(torch.ones(3))
    x = tape.leaf(torch.ones(3), copy=True)
    assert torch.from_dlpack(tape.value(x)).device.type == "cuda"
    with pytest.raises(tapewise.InvalidArgumentError, match="not C-contiguous"):
        tape.leaf(torch.ones(4, 4, device="cuda").t())
    with pytest.raises(tapewise.DTypeMismatchError, match="int16"):
        tape.leaf(torch.ones(3, device="cuda", dtype=torch.int16))
    if torch.cuda.device_count() > 1:
        with pytest.raises(tapewise.BackendMismatchError, match="cuda:1"):
            tape.leaf(torch.ones(3, device="cuda:1"))


def test_cupy_interop():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    if not tapewise.cuda_available():
        pytest.skip(f"no CUDA: {tapewise.cuda_unavailable_reason()}")
    tape = tapewise.Tape(tapewise.cuda(0))
    c = cupy.linspace(0.1, 2.0, 1000, dtype=cupy.float64)
    x = tape.leaf(c)
    v = cupy.from_dlpack(tape.value(x))
    assert v.data.ptr == c.data.ptr
    grads = tape.backward(tape.log(x), cupy.ones(1000))
    d = cupy.from_dlpack(grads[x])
    assert d.data.ptr == grads.buffer(x).data_ptr
    cupy.testing.assert_allclose(d, 1.0 / c, rtol=1e-15)


# bfloat16 and float16: every bit pattern through DLPack both ways (torch and numpy), and bfloat16's
# DLPack-only export on the host (numpy has no bfloat16).

HALF_DTYPES = ["bfloat16", "float16"]


def every_16bit_pattern(torch, name, device="cpu"):
    """All 65536 bit patterns of a 16-bit dtype (NaNs with every payload and sign included)."""
    return torch.arange(-32768, 32768, dtype=torch.int32, device=device).to(torch.int16).view(getattr(torch, name))


@pytest.mark.parametrize("name", HALF_DTYPES)
def test_every_16bit_pattern_round_trips_through_torch_dlpack(name):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    backend = tapewise.cpu()
    t = every_16bit_pattern(torch, name)
    buf = backend.wrap(t)  # zero copy: the buffer views the tensor
    assert buf.dtype == name and buf.shape == (65536,) and buf.data_ptr == t.data_ptr() and buf.borrowed
    back = torch.from_dlpack(buf)
    assert back.dtype == t.dtype and back.data_ptr() == t.data_ptr()
    assert_same_torch_bits(back, t, f"{name} wrap -> from_dlpack")
    tape = tapewise.Tape(backend)
    x = tape.leaf(t)
    assert tape.dtype(x) == name
    value = torch.from_dlpack(tape.value(x))
    assert value.data_ptr() == t.data_ptr()
    assert_same_torch_bits(value, t, f"{name} leaf value")
    # Copies (the backend's copy prim, a gradient seeded by the patterns) keep every non-NaN bit.
    assert_same_torch_bits(torch.from_dlpack(backend.wrap(t, copy=True)), t, f"{name} wrap(copy=True)",
                           nan_matches_nan=True)
    grads = tape.backward(x, t)
    assert_same_torch_bits(torch.from_dlpack(grads[x]), t, f"{name} gradient of a leaf", nan_matches_nan=True)
    assert torch.from_dlpack(grads[x]).data_ptr() == grads.buffer(x).data_ptr


def test_every_float16_pattern_round_trips_through_numpy():
    patterns = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(patterns)
    value = tape.value(x)
    assert isinstance(value, np.ndarray) and value.dtype == np.float16 and pointer(value) == pointer(patterns)
    assert_same_bits(value, patterns, "float16 leaf value")
    assert_same_bits(tape.host(x), patterns, "float16 host copy")
    assert_same_bits(np.from_dlpack(tapewise.cpu().wrap(patterns)), patterns, "float16 np.from_dlpack")
    grads = tape.backward(x, patterns)
    d = grads[x]
    assert isinstance(d, np.ndarray) and d.dtype == np.float16
    same = (bits(d) == bits(patterns)) | (np.isnan(d) & np.isnan(patterns))
    assert same.all(), f"{np.count_nonzero(~same)} float16 gradient patterns differ"


@pytest.mark.parametrize("name", HALF_DTYPES)
def test_allocate_and_dtype_codes_of_16bit(name):
    codes = tapewise._tapewise.DTYPE_CODES
    assert set(codes) == {"float32", "float64", "bfloat16", "float16"}
    assert len(set(codes.values())) == 4
    buf = tapewise.cpu().allocate([2, 3], dtype=name)
    assert buf.dtype == name and buf.shape == (2, 3) and buf.nbytes == 12 and not buf.borrowed
    assert name in repr(buf)


@pytest.mark.parametrize("name", HALF_DTYPES)
def test_16bit_lists_round_to_float32_then_to_16_bits(name):
    """A list with dtype="bfloat16"/"float16" is R16(R32(v)) per number, as tapewise rounds scalars
    (round_to): the float32 rounding by numpy, the 16-bit one by torch, compared bit for bit."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    rng = np.random.default_rng(16)
    numbers = list(rng.standard_normal(500) * 10.0 ** rng.integers(-9, 6, 500))
    numbers += [1 + 2**-8 + 2**-30, 1 + 2**-11 + 2**-40, 65519.99, 65520.0, 1e39, -0.0, 0.0, 3, -7, 2**-26]
    with np.errstate(over="ignore"):  # 1e39 overflows float32 (to inf), as it should
        expected = torch.from_numpy(np.array(numbers, dtype=np.float32)).to(getattr(torch, name))
        for how in ("wrap", "leaf"):
            if how == "wrap":
                got = torch.from_dlpack(tapewise.cpu().wrap(numbers, dtype=name))
            else:
                tape = tapewise.Tape(tapewise.cpu())
                got = torch.from_dlpack(tape.value(tape.leaf(numbers, dtype=name)))
            assert_same_torch_bits(got, expected, f"{name} list via {how}")
    nested = torch.from_dlpack(tapewise.cpu().wrap([[1, 2], [0.1, 3]], dtype=name))
    assert nested.shape == (2, 2) and nested.dtype == getattr(torch, name)


@pytest.mark.parametrize("name", HALF_DTYPES)
def test_default_seed_is_ones_of_the_16bit_dtype(name):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(torch.randn(7, dtype=getattr(torch, name)))
    y = tape.scale(x, 3.0)
    ones = torch.ones(7, dtype=getattr(torch, name))
    assert_same_torch_bits(torch.from_dlpack(tape.backward(x)[x]), ones, f"{name} default seed")
    assert_same_torch_bits(torch.from_dlpack(tape.backward(y)[x]), torch.from_dlpack(tape.backward(y, ones)[x]),
                           f"{name} default seed through scale")
    assert_same_torch_bits(torch.from_dlpack(tape.backward(y, [1.0] * 7)[x]),
                           torch.from_dlpack(tape.backward(y, ones)[x]), f"{name} list seed")


def test_bfloat16_goes_out_as_ml_dtypes_bfloat16_on_the_host():
    """With ml_dtypes (numpy's bfloat16, JAX's own), bfloat16 values, gradients and host copies are
    numpy arrays of ml_dtypes.bfloat16 (values read-only, no copy), which torch and JAX still read
    through DLPack, and such arrays go in as leaves and buffers without a copy."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed")
    backend = tapewise.cpu()
    tape = tapewise.Tape(backend)
    t = torch.randn(5, dtype=torch.bfloat16)
    x = tape.leaf(t)
    y = tape.exp(x)
    value = tape.value(y)
    assert isinstance(value, np.ndarray) and value.dtype == ml_dtypes.bfloat16 and value.shape == (5,)
    assert not value.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        value[0] = 1
    expected = torch.exp(t)
    assert_same_torch_bits(torch.from_dlpack(value), expected, "bfloat16 value through ml_dtypes")
    assert np.array_equal(value.view(np.uint16), expected.view(torch.int16).numpy().view(np.uint16))
    grads = tape.backward(y)
    assert grads[x].dtype == ml_dtypes.bfloat16 and grads[x].flags.writeable
    assert torch.from_dlpack(grads[x]).data_ptr() == grads.buffer(x).data_ptr == grads[x].ctypes.data
    for host in (tape.host(y), grads.host(x), grads.buffer(x).host(), backend.wrap(t).host()):
        assert host.dtype == ml_dtypes.bfloat16 and host.flags.writeable
    assert np.array_equal(tape.host(y).view(np.uint16), value.view(np.uint16))

    mine = np.array([0.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16)
    leaf = tape.leaf(mine)
    assert tape.dtype(leaf) == "bfloat16" and tape.value(leaf).ctypes.data == mine.ctypes.data
    assert backend.wrap(mine).data_ptr == mine.ctypes.data
    strided = np.arange(8, dtype=np.float32).astype(ml_dtypes.bfloat16)[::2]
    assert np.array_equal(tape.host(tape.leaf(strided, copy=True)).astype(np.float32), [0, 2, 4, 6])
    with pytest.raises(tapewise.DTypeMismatchError, match=r"for a float32 array.*x\.astype\(ml_dtypes\.bfloat16\)"):
        tape.leaf(np.ones(2, np.float32), dtype="bfloat16")
    with pytest.raises(tapewise.DTypeMismatchError, match="dtype='float32' was given for a bfloat16 array"):
        tape.leaf(mine, dtype="float32")


def test_bfloat16_without_ml_dtypes_goes_out_by_dlpack_only(monkeypatch):
    """Without ml_dtypes, values, gradients and buffers export as DLPack-only objects (zero copy), and
    numpy conversions and host copies raise a TypeError that says what to install or do instead."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes now raises ImportError
    backend = tapewise.cpu()
    tape = tapewise.Tape(backend)
    t = torch.randn(5, dtype=torch.bfloat16)
    x = tape.leaf(t)
    y = tape.exp(x)
    value = tape.value(y)
    assert not isinstance(value, np.ndarray) and value.__dlpack_device__() == (1, 0)
    assert value.shape == (5,) and value.dtype == "bfloat16"
    assert torch.from_dlpack(value).dtype == torch.bfloat16
    with pytest.raises(TypeError, match="ml_dtypes is not installed.*pip install ml_dtypes.*from_dlpack"):
        np.asarray(value)  # not a silent 0-d object array
    grads = tape.backward(y)
    buf = grads.buffer(x)
    assert torch.from_dlpack(buf.array()).data_ptr() == buf.data_ptr == torch.from_dlpack(grads[x]).data_ptr()
    with pytest.raises(TypeError, match="ml_dtypes is not installed"):
        np.asarray(grads[x])
    for host in (lambda: tape.host(y), lambda: grads.host(x), lambda: buf.host(), lambda: backend.wrap(t).host()):
        with pytest.raises(TypeError, match="numpy has no bfloat16.*pip install ml_dtypes.*from_dlpack"):
            host()


def legacy_consumer_copy(torch, exported) -> "torch.Tensor":
    """What a consumer of DLPack before 1.0 gets: the unversioned capsule, no read-only flag."""
    return torch.utils.dlpack.from_dlpack(exported.__dlpack__())


@pytest.mark.parametrize("ml", ["ml_dtypes", "without ml_dtypes"])
def test_read_only_bfloat16_is_copied_for_a_legacy_dlpack_consumer(ml, monkeypatch):
    """A legacy capsule cannot say "read-only": a consumer asking for one gets a copy of a node's
    value, never a writable view of the tape's memory (before, torch could write the value through it)."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if ml == "ml_dtypes":
        pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed")
    else:
        monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(torch.randn(4, dtype=torch.bfloat16))
    y = tape.exp(x)
    before = torch.from_dlpack(tape.value(y)).clone()
    legacy_consumer_copy(torch, tape.value(y)).add_(1)
    assert_same_torch_bits(torch.from_dlpack(tape.value(y)), before, "the value after a legacy consumer wrote")
    grads = tape.backward(y)  # writable memory (a gradient) is exported as it is, without a copy
    assert legacy_consumer_copy(torch, grads[x]).data_ptr() == grads.buffer(x).data_ptr


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_jax_reads_node_values_and_gradients(dtype):
    """jax.dlpack.from_dlpack of a node's value, on the CPU backend: JAX asks for DLPack's legacy
    capsule, which numpy refuses for read-only arrays (BufferError before), so it gets a copy."""
    jax = pytest.importorskip("jax", reason="JAX is not installed (pip install jax jaxlib)")
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed")
    jnp = jax.numpy
    numpy_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.array([0.5, -1.0, 2.0, 0.0], dtype=numpy_dtype))
    y = tape.sin(x)
    value = tape.value(y)
    assert not value.flags.writeable
    from_jax = jax.dlpack.from_dlpack(value)
    assert from_jax.shape == (4,)
    expected = np.asarray(value)
    assert np.array_equal(np.asarray(from_jax.astype(jnp.float32)), expected.astype(np.float32))
    assert np.array_equal(np.asarray(jax.dlpack.from_dlpack(value[1:3])).astype(np.float32), expected[1:3].astype(np.float32))
    grads = tape.backward(y)
    assert np.array_equal(np.asarray(jax.dlpack.from_dlpack(grads[x])).astype(np.float32),
                          np.asarray(grads[x]).astype(np.float32))
    assert np.asarray(jax.dlpack.from_dlpack(tape.value(x))).shape == (4,)


def test_host_views_behave_as_numpy_arrays():
    """A read-only value is a numpy array in every respect but its DLPack export: numpy's operations
    give plain arrays, its repr is numpy's, and it pickles as a plain array."""
    import pickle
    tape = tapewise.Tape(tapewise.cpu())
    y = tape.exp(tape.leaf(np.array([0.0, 1.0])))
    value = tape.value(y)
    assert isinstance(value, np.ndarray) and repr(value) == repr(np.asarray(value))
    assert type(value + 1) is np.ndarray and type(np.sin(value)) is np.ndarray
    assert type(pickle.loads(pickle.dumps(value))) is np.ndarray
    with pytest.raises(BufferError, match="only be exported as a copy"):
        value.__dlpack__(copy=False)
    assert value.__dlpack__(max_version=(1, 0), copy=False) is not None  # versioned: read-only, no copy


@pytest.mark.parametrize("name", HALF_DTYPES)
def test_torch_cuda_16bit_zero_copy(name):
    torch = _torch_cuda()
    backend = tapewise.cuda(0, stream=torch.cuda.current_stream())
    t = every_16bit_pattern(torch, name, device="cuda:0")
    buf = backend.wrap(t)
    assert buf.dtype == name and buf.data_ptr == t.data_ptr()
    back = torch.from_dlpack(buf)
    assert back.dtype == t.dtype and back.device == t.device and back.data_ptr() == t.data_ptr()
    assert_same_torch_bits(back, t, f"{name} on CUDA")
    tape = tapewise.Tape(backend)
    x = tape.leaf(t)
    grads = tape.backward(x, t)
    assert_same_torch_bits(torch.from_dlpack(grads[x]), t, f"{name} CUDA gradient", nan_matches_nan=True)
    host = tapewise.Tape(backend)
    assert host.dtype(host.leaf(t.cpu(), copy=True)) == name


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_host_views_honour_dlpacks_copy_and_device_requests(dtype):
    """copy=True gives a copy (for bfloat16 too, which numpy cannot export), a device other than the
    host is refused with BufferError, as the array API asks of __dlpack__."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed")
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.array([0.5, 2.0], dtype=ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype))
    grads = tape.backward(tape.exp(x))
    gradient = grads[x]  # writable: exported without a copy unless one is asked for
    shared = torch.utils.dlpack.from_dlpack(gradient.__dlpack__(max_version=(1, 0)))
    copied = torch.utils.dlpack.from_dlpack(gradient.__dlpack__(max_version=(1, 0), copy=True))
    assert shared.data_ptr() == gradient.ctypes.data and copied.data_ptr() != gradient.ctypes.data
    assert torch.equal(shared, copied)
    with pytest.raises(BufferError, match="not on device|unsupported device"):  # ours, or numpy's
        gradient.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
