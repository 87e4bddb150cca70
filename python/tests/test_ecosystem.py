"""Python that fits its ecosystem: reprs that say what an object holds, CPU exports that are numpy
arrays (no copy), and Python lists accepted as copied arrays (float32, or dtype="float64", "bfloat16", "float16")."""

import numpy as np
import pytest

import tapewise
from conftest import assert_same_bits


def pointer(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


# --- reprs -----------------------------------------------------------------------------------------

def test_tape_repr_names_backend_nodes_and_pending():
    tape = tapewise.Tape(tapewise.cpu())
    s = tape.serial
    assert repr(tape) == f"<tapewise.Tape {s} on cpu: 0 nodes, 0 pending>"
    x = tape.leaf(np.ones(3))
    tape.sin(x)
    assert repr(tape) == f"<tapewise.Tape {s} on cpu: 2 nodes, {tape.pending} pending>"
    tape.flush()
    assert repr(tape) == f"<tapewise.Tape {s} on cpu: 2 nodes, 0 pending>"
    assert repr(tape.backend).startswith("<tapewise.Backend cpu: ")


def test_gradients_repr_names_tape_nodes_dtype_and_shape():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.ones(3, np.float32))
    grads = tape.backward(tape.exp(x))
    s = tape.serial
    assert repr(grads) == f"<tapewise.Gradients of tape {s}, 2 of 2 nodes: [#0, #1], float32 (3,)>"
    grads.buffer(x).release()
    assert repr(grads) == f"<tapewise.Gradients of tape {s}, 1 of 2 nodes: [#1], float32 (3,)>"


def test_gradients_repr_abbreviates_many_ids_and_omits_mixed_dtypes():
    tape = tapewise.Tape(tapewise.cpu())
    leaves = [tape.leaf(np.ones((2, 2))) for _ in range(12)]
    total = leaves[0]
    for x in leaves[1:]:
        total = tape.add(total, x)
    assert repr(tape.backward(total)) == (
        f"<tapewise.Gradients of tape {tape.serial}, 23 of 23 nodes: [#0, #1, #2, ..., #20, #21, #22], float64 (2, 2)>")
    mixed = tapewise.Tape(tapewise.cpu())
    a, b = mixed.leaf(np.ones(2)), mixed.leaf(np.ones(2, np.float32))
    mixed.sin(b)
    assert repr(mixed.backward_dense(a)) == f"<tapewise.Gradients of tape {mixed.serial}, 3 of 3 nodes: [#0, #1, #2]>"


def test_buffer_repr_names_shape_dtype_device_ownership_access_and_release():
    backend = tapewise.cpu()
    owned = backend.allocate([2, 3], "float64")
    assert repr(owned) == "<tapewise.Buffer (2, 3) float64 on cpu, owned, writable>"
    view = backend.wrap(np.frombuffer(bytes(16), np.float32))
    assert repr(view) == "<tapewise.Buffer (4,) float32 on cpu, borrowed, read-only>"
    owned.release()
    assert repr(owned) == "<tapewise.Buffer released>"


# --- CPU exports are numpy arrays ------------------------------------------------------------------

def test_cpu_values_are_read_only_numpy_views():
    tape = tapewise.Tape(tapewise.cpu())
    source = np.array([0.0, 1.0, 2.0])
    x = tape.leaf(source, requires_grad=True)
    y = tape.sin(x)
    value = tape.value(y)
    # A numpy array (HostView, a subclass whose only difference is its DLPack export of read-only memory)
    assert isinstance(value, np.ndarray) and not value.flags.writeable
    assert str(value) == str(np.sin(source)) and repr(value) == repr(np.sin(source))  # print() shows the numbers
    with pytest.raises(ValueError, match="read-only"):
        value[0] = 1.0
    assert pointer(tape.value(x)) == pointer(source)  # still no copy
    assert pointer(np.array(tape.value(y), copy=False)) == pointer(value)


def test_cpu_gradients_are_writable_numpy_arrays_sharing_the_buffer():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.array([0.25, 0.5]))
    grads = tape.backward(tape.exp(x))
    g = grads[x]
    assert type(g) is np.ndarray and g.flags.writeable
    assert pointer(g) == grads.buffer(x).data_ptr
    assert type(grads.buffer(x).array()) is np.ndarray
    g[0] = 7.0
    assert grads.host(x)[0] == 7.0


# --- Python lists --------------------------------------------------------------------------------

def test_lists_and_floats_are_copied_as_float32_by_default():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf([1.0, 2.0])
    assert tape.dtype(x) == "float32" and tape.shape(x) == (2,)
    m = tape.leaf([[1, 2], [3, 4]])
    assert tape.shape(m) == (2, 2)
    s = tape.leaf(3.0)
    assert tape.shape(s) == () and tape.value(s) == 3.0
    assert not tape.value(x).flags.writeable  # a copy: read-only like any copied leaf
    np.testing.assert_array_equal(tape.host(m), [[1.0, 2.0], [3.0, 4.0]])


def test_a_list_seed_takes_the_outputs_dtype():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.array([0.5, 1.5], np.float32))
    grads = tape.backward(tape.mul(x, x), [1.0, 2.0])
    np.testing.assert_array_equal(grads[x], np.array([1.0, 6.0], np.float32))


def test_backend_wrap_copies_a_list():
    backend = tapewise.cpu()
    owned = backend.wrap([[1.0, 2.0], [3.0, 4.0]], copy=True)
    assert owned.shape == (2, 2) and owned.dtype == "float32" and not owned.borrowed
    np.testing.assert_array_equal(owned.array(), [[1.0, 2.0], [3.0, 4.0]])
    assert backend.wrap([1.0]).shape == (1,)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_a_list_takes_the_dtype_the_user_chooses(dtype):
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf([0.1, 2.0], dtype=dtype)
    assert tape.dtype(x) == dtype
    # Rounded once to float32 or float64; to float16 through float32, as tapewise rounds scalars.
    expected = np.array([0.1, 2.0], dtype) if dtype != "float16" else np.array([0.1, 2.0], np.float32).astype(dtype)
    assert_same_bits(tape.host(x), expected, f"list as {dtype}")
    y = tape.leaf(0.1, dtype=dtype)
    assert tape.value(y).dtype == np.dtype(dtype)
    assert tapewise.cpu().wrap([[1, 2]], dtype=dtype).dtype == dtype


# numpy's aliases ("half", "double", "f8") name dtypes tapewise takes (test_errors.py); these do not.
# A numpy spelling is named as numpy names it ("i4" is int32).
@pytest.mark.parametrize("dtype, named", [("int32", "int32"), ("int16", "int16"), ("i4", "int32"),
                                          ("Float32", "Float32"), ("", ""), ("complex64", "complex64")])
def test_a_dtype_tapewise_does_not_take_is_refused_by_name(dtype, named):
    tape = tapewise.Tape(tapewise.cpu())
    with pytest.raises(tapewise.DTypeMismatchError, match=f"leaf: dtype='{named}' is not a dtype tapewise takes"):
        tape.leaf([1.0], dtype=dtype)
    with pytest.raises(tapewise.DTypeMismatchError, match=f"wrap: dtype='{named}'"):
        tapewise.cpu().wrap([1.0], dtype=dtype)
    assert len(tape) == 0


def test_an_array_keeps_its_dtype_and_a_different_dtype_is_refused():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.ones(2), dtype="float64")  # the array's own dtype: accepted, no copy
    assert tape.dtype(x) == "float64"
    with pytest.raises(tapewise.DTypeMismatchError, match="dtype='float32' was given for a float64 array"):
        tape.leaf(np.ones(2), dtype="float32")
    assert len(tape) == 1


@pytest.mark.parametrize("numbers", [["a"], [[1.0], [1.0, 2.0]], [None], [True], True])
def test_what_is_not_numbers_is_a_type_error(numbers):
    tape = tapewise.Tape(tapewise.cpu())
    with pytest.raises(TypeError, match="leaf: "):
        tape.leaf(numbers)
    assert len(tape) == 0
