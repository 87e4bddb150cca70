"""Memory the Python door hands out or takes in stays valid and keeps its writability: a released
gradient leaves its Gradients and never dangles, read-only sources stay read-only, node values are
read-only (a write would corrupt the next backward), and read-only memory is never an output."""

import gc

import numpy as np
import pytest

import tapewise


def recorded_gradient():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.array([0.5, 1.0, 2.0]))
    y = tape.exp(x)
    return tape, x, tape.backward(y, np.ones(3))


@pytest.mark.parametrize("read", [
    lambda g, x: g[x],
    lambda g, x: g.host(x),
    lambda g, x: g.buffer(x),
])
def test_a_released_gradient_leaves_its_gradients(read):
    tape, x, grads = recorded_gradient()
    grads.buffer(x).release()
    assert x not in grads and x not in list(grads) and x not in grads.ids()
    assert grads.get(x) is None and grads.get(x, "none") == "none"
    with pytest.raises(KeyError, match="released"):
        read(grads, x)


def test_arrays_exported_before_a_release_stay_valid():
    backend = tapewise.cpu()
    tape = tapewise.Tape(backend)
    tape.program_threshold = 0  # one allocation per gradient, so that the statistics see each
    x = tape.leaf(np.array([0.5, 1.0, 2.0]))
    grads = tape.backward(tape.exp(x), np.ones(3))
    live = backend.stats()["gradient"]["count"]
    from_getitem = np.asarray(grads[x])
    buffer = grads.buffer(x)
    from_buffer = np.from_dlpack(buffer.array())
    buffer.release()
    del tape, grads
    gc.collect()
    assert backend.stats()["gradient"]["count"] == live - 1  # the output's slot went with grads, not x's
    np.testing.assert_array_equal(from_getitem, np.exp([0.5, 1.0, 2.0]))
    from_getitem[0] = -1.0  # a gradient is the caller's: writable, and shared with the other view
    assert from_buffer[0] == -1.0
    del from_getitem, from_buffer
    gc.collect()
    assert backend.stats()["gradient"]["count"] == live - 2  # the last array freed it


def test_a_released_buffer_is_refused_by_the_kernels_and_its_properties():
    backend = tapewise.cpu()
    a, out = backend.wrap(np.ones(3)), backend.allocate([3], "float64")
    a.release()
    assert a.released and not out.released
    for call in (lambda: backend.forward("sin", [a], out), lambda: a.shape, lambda: a.array(), lambda: a.host()):
        with pytest.raises(tapewise.InvalidArgumentError, match="released"):
            call()


def test_a_leaf_of_immutable_bytes_is_exported_read_only():
    source = bytes(24)
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.frombuffer(source))
    for view in (np.asarray(tape.value(x)), np.from_dlpack(tape.value(x))):
        assert not view.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            view[0] = 42.0
    assert source == bytes(24)


def test_a_leaf_of_a_read_only_memmap_is_exported_read_only(tmp_path):
    path = tmp_path / "values.f64"
    np.arange(4, dtype=np.float64).tofile(path)
    mapped = np.memmap(path, dtype=np.float64, mode="r")
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(mapped)
    view = np.asarray(tape.value(x))
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 42.0  # before the fix: a write to a PROT_READ mapping (SIGSEGV)
    np.testing.assert_array_equal(tape.host(tape.neg(x)), -np.arange(4.0))


def test_a_leaf_keeps_the_writability_of_its_source():
    tape = tapewise.Tape(tapewise.cpu())
    source = np.array([1.0, 2.0])
    view = np.asarray(tape.value(tape.leaf(source)))
    assert view.flags.writeable
    view[0] = 5.0  # the caller's own memory: writable as it was
    assert source[0] == 5.0
    copied = np.asarray(tape.value(tape.leaf(source, copy=True)))
    assert not copied.flags.writeable  # a copy belongs to the tape


def test_node_values_are_read_only_so_backward_cannot_be_corrupted():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.array([0.5, 1.5]))
    y = tape.mul(tape.sin(x), x)
    s = tape.sin(x)
    before = tape.backward(y).host(x)
    for exported in (np.asarray(tape.value(s)), np.from_dlpack(tape.value(s)), np.asarray(tape.value(y))):
        assert not exported.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            exported[...] = 0.0
    np.testing.assert_array_equal(tape.backward(y).host(x), before)


def test_forward_refuses_a_read_only_output():
    backend = tapewise.cpu()
    frozen = np.zeros(3)
    frozen.flags.writeable = False
    out = backend.wrap(frozen)
    assert out.read_only and not np.asarray(out.array()).flags.writeable
    with pytest.raises(tapewise.InvalidArgumentError, match="read-only"):
        backend.forward("sin", [backend.wrap(np.ones(3))], out)
    with pytest.raises(tapewise.InvalidArgumentError, match="read-only"):
        backend.vjp_fused("sin", [backend.wrap(np.ones(3))], backend.wrap(np.ones(3)), [out])
    assert not frozen.any()
    writable = backend.wrap(frozen, copy=True)  # a copy is fresh memory: an output like any other
    backend.forward("sin", [backend.wrap(np.ones(3))], writable)
    np.testing.assert_array_equal(writable.host(), np.sin(np.ones(3)))
