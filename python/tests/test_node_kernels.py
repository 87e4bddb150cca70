"""The kernel table tapewise._tapewise hands out for compiled extensions (tapewise/native/node_kernels.h,
the capsule behind tapewise.torch's C++ nodes), called through ctypes as a C caller would: its runs
give Backend.forward_ptrs' and vjp_fused_ptrs' bits, and bad arguments come back as a non-zero status
with a message naming them, never a crash."""

import ctypes

import numpy as np
import pytest

import tapewise
from conftest import assert_same_bits


class Place(ctypes.Structure):
    _fields_ = [("is_cuda", ctypes.c_int), ("device", ctypes.c_int), ("stream", ctypes.c_void_p)]


COMMON = [Place, ctypes.c_int, ctypes.c_double, ctypes.c_double]
FORWARD = ctypes.CFUNCTYPE(ctypes.c_int, *COMMON, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                           ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
VJP = ctypes.CFUNCTYPE(ctypes.c_int, *COMMON, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)


class Table(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int), ("size", ctypes.c_size_t), ("dtype_float32", ctypes.c_int),
                ("dtype_float64", ctypes.c_int), ("dtype_bfloat16", ctypes.c_int), ("dtype_float16", ctypes.c_int),
                ("forward", FORWARD), ("vjp", VJP)]


@pytest.fixture(scope="module")
def table():
    capsule = tapewise._tapewise._node_kernels()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    t = ctypes.cast(get(capsule, b"tapewise.node_kernels"), ctypes.POINTER(Table)).contents
    assert t.version == 1 and t.size == ctypes.sizeof(Table)
    assert [t.dtype_float32, t.dtype_float64, t.dtype_bfloat16, t.dtype_float16] == \
        [tapewise._tapewise.DTYPE_CODES[n] for n in ("float32", "float64", "bfloat16", "float16")]
    return t


CPU = Place(0, 0, None)
OPS = {name: k for k, (name, _, _) in enumerate(tapewise.ops())}


def ptr(a):
    return a.ctypes.data


def forward(table, op, a, b, out, numel, dtype=None, place=CPU, s0=0.0):
    error = ctypes.create_string_buffer(512)
    status = table.forward(place, op, s0, 0.0, a, b, out, numel, table.dtype_float32 if dtype is None else dtype,
                           error, len(error))
    return status, error.value.decode()


def test_runs_give_the_pointer_apis_bits(table):
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(257).astype(np.float32), rng.standard_normal(257).astype(np.float32)
    g = rng.standard_normal(257).astype(np.float32)
    backend = tapewise.cpu()
    for name in ("sin", "max", "scale"):
        op, binary = OPS[name], name == "max"
        out, ref = np.empty_like(x), np.empty_like(x)
        status, error = forward(table, op, ptr(x), ptr(y) if binary else None, ptr(out), 257, s0=0.9)
        assert status == 0, error
        backend.forward_ptrs(op, 0.9, 0.0, [ptr(x)] + ([ptr(y)] if binary else []), ptr(ref), 257, "float32")
        assert_same_bits(out, ref, f"{name} forward")
        da, db, ref_a, ref_b = (np.empty_like(x) for _ in range(4))
        message = ctypes.create_string_buffer(512)
        status = table.vjp(CPU, op, 0.9, 0.0, ptr(x), ptr(y) if binary else None, ptr(g), ptr(da),
                           ptr(db) if binary else None, 257, table.dtype_float32, message, len(message))
        assert status == 0, message.value
        backend.vjp_fused_ptrs(op, 0.9, 0.0, [ptr(x)] + ([ptr(y)] if binary else []), ptr(g),
                               [ptr(ref_a)] + ([ptr(ref_b)] if binary else []), 257, "float32")
        assert_same_bits(da, ref_a, f"{name} da")
        if binary:
            assert_same_bits(db, ref_b, f"{name} db")


def test_bad_arguments_are_a_status_and_a_message(table):
    x = np.ones(8, dtype=np.float32)
    out = np.full(8, 7.0, dtype=np.float32)
    sin, add = OPS["sin"], OPS["add"]
    cases = [
        (dict(op=-1), "op index -1 out of range"),
        (dict(op=len(OPS)), f"op index {len(OPS)} out of range"),
        (dict(dtype=99), "dtype code 99"),
        (dict(dtype=-1), "dtype code -1"),
        (dict(numel=-5), "numel -5 < 0"),
        (dict(a=None), "null or not aligned"),
        (dict(a=ptr(x) + 1), "null or not aligned"),
        (dict(out=None), "null or not aligned"),
        (dict(b=ptr(x)), "sin takes 1 input(s)"),      # a second input for a unary node
        (dict(op=add), "add takes 2 input(s)"),        # none for a binary one
    ]
    for change, expected in cases:
        args = dict(op=sin, a=ptr(x), b=None, out=ptr(out), numel=8, dtype=None) | change
        status, error = forward(table, args["op"], args["a"], args["b"], args["out"], args["numel"], args["dtype"])
        assert status != 0 and expected in error, (change, error)
        assert (out == 7.0).all(), f"{change}: the output was written"
    tiny = ctypes.create_string_buffer(8)  # a message longer than the buffer is cut, NUL-terminated
    assert table.forward(CPU, -1, 0.0, 0.0, ptr(x), None, ptr(out), 8, table.dtype_float32, tiny, 8) != 0
    assert len(tiny.value) == 7
    assert table.forward(CPU, -1, 0.0, 0.0, ptr(x), None, ptr(out), 8, table.dtype_float32, None, 0) != 0
    status, error = forward(table, sin, None, None, None, numel=0)  # no elements: nothing to read or write
    assert status == 0, error


@pytest.mark.skipif(tapewise.cuda_available(), reason="checks the error where no CUDA device can be opened")
def test_a_cuda_place_without_a_device_is_an_error(table):
    x = np.ones(4, dtype=np.float32)
    status, error = forward(table, OPS["sin"], ptr(x), None, ptr(x), 4, place=Place(1, 0, None))
    assert status != 0 and "DeviceUnavailable" in error, error
