"""proptest/test_c_api_ctypes.py — the C ABI from Python through ctypes: loads the shared library named
by $TAPEWISE_LIB (libtapewise.so of a BUILD_SHARED_LIBS=ON build), records a few nodes on the CPU
backend, runs backward, and checks values and gradients against numpy on easy points, and a failing
call's status and message; the version check a binding makes on load, with the version of the
<tapewise/version.h> installed beside the library; status sentences; the backend's stream. Skipped
when TAPEWISE_LIB is unset or names no file."""

import ctypes
import os
import pathlib
import re

import numpy as np
import pytest

TW_OK = 0
TW_INVALID_NODE_ID = 1
TW_INVALID_ARGUMENT = 8
TW_NULL_POINTER = 100
TW_INVALID_HANDLE = 101
TW_VERSION_MISMATCH = 103
TW_FLOAT32, TW_FLOAT64 = 0, 1
TW_PATH_FUSED, TW_PATH_STAGED = 0, 1

i64 = ctypes.c_int64
i64_p = ctypes.POINTER(ctypes.c_int64)
vp = ctypes.c_void_p


def load_library():
    path = os.environ.get("TAPEWISE_LIB")
    if not path:
        pytest.skip("TAPEWISE_LIB is not set (path to libtapewise.so of a BUILD_SHARED_LIBS=ON build)")
    if not os.path.isfile(path):
        pytest.skip(f"TAPEWISE_LIB={path} is not a file")
    lib = ctypes.CDLL(path)
    signatures = {
        "tw_last_error": (ctypes.c_char_p, []),
        "tw_status_name": (ctypes.c_char_p, [ctypes.c_int]),
        "tw_status_string": (ctypes.c_char_p, [ctypes.c_int]),
        "tw_version": (ctypes.c_int, []),
        "tw_version_string": (ctypes.c_char_p, []),
        "tw_check_version": (ctypes.c_int, [ctypes.c_int]),
        "tw_backend_stream": (ctypes.c_int, [vp, ctypes.POINTER(vp)]),
        "tw_op_count": (ctypes.c_int, []),
        "tw_op_name": (ctypes.c_char_p, [ctypes.c_int]),
        "tw_backend_create_cpu": (ctypes.c_int, [ctypes.POINTER(vp)]),
        "tw_backend_destroy": (ctypes.c_int, [vp]),
        "tw_tape_create": (ctypes.c_int, [vp, ctypes.POINTER(vp)]),
        "tw_tape_destroy": (ctypes.c_int, [vp]),
        "tw_tape_leaf_host": (ctypes.c_int, [vp, vp, ctypes.c_size_t, i64_p, ctypes.c_int, ctypes.c_int,
                                             ctypes.c_int, i64_p]),
        "tw_tape_apply": (ctypes.c_int, [vp, ctypes.c_int, i64_p, ctypes.c_int, ctypes.POINTER(ctypes.c_double),
                                         ctypes.c_int, i64_p]),
        "tw_tape_size": (ctypes.c_int, [vp, i64_p]),
        "tw_tape_value_host": (ctypes.c_int, [vp, i64, vp, ctypes.c_size_t]),
        "tw_tape_backward_host": (ctypes.c_int, [vp, i64, vp, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                                 ctypes.POINTER(vp)]),
        "tw_gradients_has": (ctypes.c_int, [vp, i64, ctypes.POINTER(ctypes.c_int)]),
        "tw_gradients_download": (ctypes.c_int, [vp, i64, vp, ctypes.c_size_t]),
        "tw_gradients_destroy": (ctypes.c_int, [vp]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class TapewiseError(Exception):
    def __init__(self, status, message):
        super().__init__(f"status {status}: {message}")
        self.status, self.message = status, message


class Tape:
    """A thin wrapper: a CPU backend and one tape, raising TapewiseError on a failing call."""

    def __init__(self, lib):
        self.lib = lib
        self.backend, self.tape = vp(), vp()
        self.check(lib.tw_backend_create_cpu(ctypes.byref(self.backend)))
        self.check(lib.tw_tape_create(self.backend, ctypes.byref(self.tape)))
        self.ops = {lib.tw_op_name(i).decode(): i for i in range(lib.tw_op_count())}

    def close(self):
        self.check(self.lib.tw_tape_destroy(self.tape))
        self.check(self.lib.tw_backend_destroy(self.backend))

    def check(self, status):
        if status != TW_OK:
            raise TapewiseError(status, self.lib.tw_last_error().decode())

    def leaf(self, array, requires_grad=True):
        array = np.ascontiguousarray(array)
        dtype = TW_FLOAT32 if array.dtype == np.float32 else TW_FLOAT64
        shape = (i64 * array.ndim)(*array.shape)
        out = i64()
        self.check(self.lib.tw_tape_leaf_host(self.tape, array.ctypes.data, array.nbytes, shape, array.ndim, dtype,
                                              int(requires_grad), ctypes.byref(out)))
        return out.value

    def apply(self, op, *parents, scalars=()):
        ids = (i64 * len(parents))(*parents)
        values = (ctypes.c_double * len(scalars))(*scalars)
        out = i64()
        self.check(self.lib.tw_tape_apply(self.tape, self.ops[op], ids, len(parents), values, len(scalars),
                                          ctypes.byref(out)))
        return out.value

    def value(self, node, like):
        out = np.empty_like(like)
        self.check(self.lib.tw_tape_value_host(self.tape, node, out.ctypes.data, out.nbytes))
        return out

    def backward(self, node, seed, path=TW_PATH_FUSED, dense=False):
        seed = np.ascontiguousarray(seed)
        grads = vp()
        self.check(self.lib.tw_tape_backward_host(self.tape, node, seed.ctypes.data, seed.nbytes, path, int(dense),
                                                  ctypes.byref(grads)))
        return grads

    def gradient(self, grads, node, like):
        has = ctypes.c_int()
        self.check(self.lib.tw_gradients_has(grads, node, ctypes.byref(has)))
        if not has.value:
            return None
        out = np.empty_like(like)
        self.check(self.lib.tw_gradients_download(grads, node, out.ctypes.data, out.nbytes))
        return out


@pytest.fixture
def tape():
    t = Tape(load_library())
    yield t
    t.close()


def test_library_queries(tape):
    lib = tape.lib
    assert lib.tw_version_string().decode().count(".") == 2
    assert lib.tw_op_count() == 23
    assert lib.tw_op_name(0) == b"add"
    assert lib.tw_op_name(-1) is None
    assert lib.tw_status_name(TW_INVALID_HANDLE) == b"TW_INVALID_HANDLE"


def installed_header_version(lib_path):
    """(major, minor, patch) from the tapewise/version.h installed with the library (prefix/lib/ and
    prefix/include/, or a build tree's include/ beside the library), or None when there is none."""
    lib_dir = pathlib.Path(lib_path).resolve().parent
    for include in (lib_dir.parent / "include", lib_dir / "include"):
        header = include / "tapewise" / "version.h"
        if header.is_file():
            text = header.read_text()
            return tuple(int(re.search(rf"#define TW_VERSION_{part} (\d+)", text).group(1))
                         for part in ("MAJOR", "MINOR", "PATCH"))
    return None


def test_version_check_on_load(tape):
    lib = tape.lib
    header = installed_header_version(os.environ["TAPEWISE_LIB"])
    if header is None:
        pytest.skip("no tapewise/version.h installed beside TAPEWISE_LIB")
    major, minor, patch = header
    packed = major * 10000 + minor * 100 + patch
    assert lib.tw_version() == packed
    assert lib.tw_version_string().decode() == f"{major}.{minor}.{patch}"
    assert lib.tw_check_version(packed) == TW_OK
    assert lib.tw_last_error() == b""
    assert lib.tw_check_version(major * 10000 + minor * 100 + 99) == TW_OK  # patches never matter
    newer_minor = major * 10000 + (minor + 1) * 100
    assert lib.tw_check_version(newer_minor) == TW_VERSION_MISMATCH
    other_major = (major + 1) * 10000 + minor * 100 + patch
    assert lib.tw_check_version(other_major) == TW_VERSION_MISMATCH
    message = lib.tw_last_error().decode()
    assert f"library {major}.{minor}.{patch} ({packed})" in message
    assert f"{major + 1}.{minor}.{patch} ({other_major})" in message
    assert lib.tw_status_name(TW_VERSION_MISMATCH) == b"TW_VERSION_MISMATCH"
    assert lib.tw_check_version(-5) == TW_INVALID_ARGUMENT


def test_status_sentences(tape):
    lib = tape.lib
    known = [0, *range(1, 12), 100, 101, 102, 103]
    sentences = [lib.tw_status_string(status).decode() for status in known]
    assert len(set(sentences)) == len(known)
    assert all(s and not s.startswith("unknown status") for s in sentences)
    assert lib.tw_status_string(TW_NULL_POINTER) == b"a required pointer argument is NULL"
    for status in (-7, 12, 104, 2**31 - 1):
        assert lib.tw_status_string(status).decode() == f"unknown status {status} (not a tw_status value)"


def test_cpu_backend_has_no_stream(tape):
    lib = tape.lib
    stream = vp(1234)
    tape.check(lib.tw_backend_stream(tape.backend, ctypes.byref(stream)))
    assert stream.value is None
    assert lib.tw_backend_stream(tape.backend, None) == TW_NULL_POINTER
    assert lib.tw_backend_stream(None, ctypes.byref(stream)) == TW_NULL_POINTER


@pytest.mark.parametrize("path", [TW_PATH_FUSED, TW_PATH_STAGED])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_and_gradients_match_numpy(tape, dtype, path):
    # Easy points: the expected results are exact or within a few ulps of numpy's.
    a_host = np.array([1.0, -2.0, 0.5, 4.0], dtype=dtype)
    b_host = np.array([2.0, 0.5, -4.0, 1.0], dtype=dtype)
    a, b = tape.leaf(a_host), tape.leaf(b_host)
    prod = tape.apply("mul", a, b)                   # a * b
    quot = tape.apply("div", a, b)                   # a / b
    scaled = tape.apply("scale", prod, scalars=(3.0,))
    total = tape.apply("add", scaled, quot)          # 3ab + a/b
    y = tape.apply("tanh", tape.apply("relu", total))
    np.testing.assert_array_equal(tape.value(prod, a_host), a_host * b_host)
    np.testing.assert_array_equal(tape.value(quot, a_host), a_host / b_host)
    t = 3 * a_host * b_host + a_host / b_host
    np.testing.assert_allclose(tape.value(y, a_host), np.tanh(np.maximum(t, 0)), rtol=4 * np.finfo(dtype).eps)

    grads = tape.backward(y, np.ones_like(a_host), path=path)
    try:
        dt = np.where(t > 0, 1 - np.tanh(t) ** 2, 0)
        da = dt * (3 * b_host + 1 / b_host)
        db = dt * (3 * a_host - a_host / b_host**2)
        rtol = 16 * np.finfo(dtype).eps
        np.testing.assert_allclose(tape.gradient(grads, a, a_host), da, rtol=rtol, atol=rtol)
        np.testing.assert_allclose(tape.gradient(grads, b, b_host), db, rtol=rtol, atol=rtol)
    finally:
        tape.check(tape.lib.tw_gradients_destroy(grads))


def test_sparse_and_dense_gradients(tape):
    x_host = np.array([-1.0, 2.0], dtype=np.float32)
    x = tape.leaf(x_host)
    frozen = tape.leaf(x_host, requires_grad=False)
    unused = tape.leaf(x_host)
    y = tape.apply("mul", x, frozen)                 # dy/dx = frozen
    for dense, unused_grad in ((False, None), (True, np.zeros(2, np.float32))):
        grads = tape.backward(y, np.ones(2, np.float32), dense=dense)
        np.testing.assert_array_equal(tape.gradient(grads, x, x_host), x_host)
        assert tape.gradient(grads, frozen, x_host) is None
        got = tape.gradient(grads, unused, x_host)
        assert (got is None) if unused_grad is None else np.array_equal(got, unused_grad)
        tape.check(tape.lib.tw_gradients_destroy(grads))


def test_an_id_of_another_tape_is_refused_naming_both_tapes(tape):
    other = Tape(tape.lib)
    try:
        x_host = np.array([1.0, 2.0], dtype=np.float32)
        x = tape.leaf(x_host)
        a = other.leaf(x_host)
        assert a != x  # both are their tape's first node: the id tells the tapes apart
        size_before = i64()
        tape.check(tape.lib.tw_tape_size(tape.tape, ctypes.byref(size_before)))
        for refused in (lambda: tape.apply("sin", a), lambda: tape.apply("add", x, a),
                        lambda: tape.value(a, x_host), lambda: tape.backward(a, x_host)):
            with pytest.raises(TapewiseError) as error:
                refused()
            assert error.value.status == TW_INVALID_NODE_ID
            assert f"of tape {a >> 32} used on tape {x >> 32}" in error.value.message
        size_after = i64()
        tape.check(tape.lib.tw_tape_size(tape.tape, ctypes.byref(size_after)))
        assert size_after.value == size_before.value
        np.testing.assert_array_equal(tape.value(x, x_host), x_host)
    finally:
        other.close()


def test_errors_have_a_status_and_a_message(tape):
    x = tape.leaf(np.array([1.0, 2.0], dtype=np.float32))
    size_before = i64()
    tape.check(tape.lib.tw_tape_size(tape.tape, ctypes.byref(size_before)))

    with pytest.raises(TapewiseError) as bad_parent:
        tape.apply("neg", 42)
    assert bad_parent.value.status == TW_INVALID_NODE_ID
    assert "invalid node id 42" in bad_parent.value.message
    assert "tw_tape_apply" in bad_parent.value.message

    with pytest.raises(TapewiseError) as arity:
        tape.apply("add", x)
    assert arity.value.status == TW_INVALID_ARGUMENT
    assert tape.lib.tw_status_name(arity.value.status) == b"TW_INVALID_ARGUMENT"

    with pytest.raises(TapewiseError) as wrong_size:
        tape.value(x, np.empty(3, np.float32))
    assert wrong_size.value.status == TW_INVALID_ARGUMENT

    size_after = i64()
    tape.check(tape.lib.tw_tape_size(tape.tape, ctypes.byref(size_after)))
    assert size_after.value == size_before.value
    assert tape.lib.tw_last_error() == b""  # reset by the successful call

    # A destroyed handle is refused, not dereferenced.
    grads = tape.backward(x, np.ones(2, np.float32))
    tape.check(tape.lib.tw_gradients_destroy(grads))
    assert tape.lib.tw_gradients_destroy(grads) == TW_INVALID_HANDLE
