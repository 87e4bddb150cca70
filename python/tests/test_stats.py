"""Backend.stats (live allocations per tag), programs (pending, flush) and the staged path's workspace."""

import gc

import numpy as np
import pytest

import tapewise
from conftest import assert_same_bits, leaf


def counts(backend):
    return {tag: (s["count"], s["bytes"]) for tag, s in backend.stats().items()}


def test_stats_count_values_and_gradients_not_borrowed_memory(backend):
    assert counts(backend) == {"value": (0, 0), "gradient": (0, 0), "workspace": (0, 0)}
    tape = tapewise.Tape(backend)
    x = tape.leaf(np.ones(1000), copy=backend.kind == "cuda")
    expected_leaf = (1, 8000) if backend.kind == "cuda" else (0, 0)  # a numpy view is borrowed
    assert counts(backend)["value"] == expected_leaf
    y = tape.exp(x)
    assert counts(backend)["value"] == (expected_leaf[0] + 1, expected_leaf[1] + 8000)
    grads = tape.backward(y, np.ones(1000))
    assert counts(backend)["gradient"][0] >= 1
    d = grads[x]
    del grads
    gc.collect()
    assert counts(backend)["gradient"][0] == 1  # the exported gradient is alive
    del d
    gc.collect()
    assert counts(backend)["gradient"] == (0, 0)
    del tape, x, y  # a Node keeps its tape alive
    gc.collect()
    assert counts(backend)["value"] == (0, 0)


def test_staged_path_releases_its_workspace(backend):
    tape = tapewise.Tape(backend)
    x = leaf(tape, np.linspace(0.1, 2.0, 100))
    y = tape.gelu(tape.div(tape.safeLog(x, 1e-3), tape.silu(x)))
    fused = tape.backward(y, np.ones(100), path="fused")
    staged = tape.backward(y, np.ones(100), path="staged")
    assert backend.stats()["workspace"] == {"count": 0, "bytes": 0}
    assert_same_bits(staged.host(x), fused.host(x), "staged vs fused")


def test_pending_and_flush(backend):
    tape = tapewise.Tape(backend)
    tape.program_threshold = 1 << 16
    x = leaf(tape, np.linspace(-1.0, 1.0, 64))
    y = tape.relu(tape.sin(x))
    assert tape.pending == 2 and len(tape) == 3
    tape.flush()
    assert tape.pending == 0
    z = tape.cos(y)
    assert tape.pending == 1
    np.testing.assert_allclose(tape.host(z), np.cos(np.maximum(np.sin(np.linspace(-1.0, 1.0, 64)), 0.0)),
                               rtol=1e-15)
    assert tape.pending == 0  # reading a value flushed


def test_program_threshold_zero_runs_nodes_at_once(backend):
    tape = tapewise.Tape(backend)
    tape.program_threshold = 0
    assert tape.program_threshold == 0
    tape.sin(leaf(tape, np.ones(8)))
    assert tape.pending == 0
    other = tapewise.Tape(backend)  # the option is the tape's, not the backend's: it starts at the default
    assert other.program_threshold == (16 if backend.kind == "cpu" else 2**26)
    other.sin(leaf(other, np.ones(8)))
    assert other.pending == 1


def test_max_pending_nodes_flushes_a_full_list(backend):
    tape = tapewise.Tape(backend)
    assert tape.max_pending_nodes == 4096
    tape.max_pending_nodes = 2
    y = leaf(tape, np.ones(8))
    for expected in [1, 2, 1]:
        y = tape.sin(y)
        assert tape.pending == expected


@pytest.mark.parametrize("name, value", [("program_threshold", -1), ("max_pending_nodes", 0),
                                         ("max_pending_nodes", 65537)])
def test_tape_options_out_of_range_are_refused_by_name(backend, name, value):
    tape = tapewise.Tape(backend)
    before = getattr(tape, name)
    with pytest.raises(tapewise.InvalidArgumentError, match=f"{name} {value}"):
        setattr(tape, name, value)
    assert getattr(tape, name) == before


def test_backend_description(backend):
    assert backend.kind in ("cpu", "cuda") and backend.describe()
    assert backend.__dlpack_device__()[0] == (1 if backend.kind == "cpu" else 2)
    assert (backend.stream is None) == (backend.kind == "cpu")
    assert "Backend" in repr(backend)


@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense"])
@pytest.mark.parametrize("path", ["fused", "staged"])
def test_wanted_returns_only_those_gradients_with_the_full_backwards_bits(backend, dense, path):
    tape = tapewise.Tape(backend)
    x = leaf(tape, np.linspace(-1.0, 1.0, 64))
    w = leaf(tape, np.linspace(0.5, 2.0, 64))
    y = tape.mul(tape.tanh(tape.sin(x)), w)
    run = tape.backward_dense if dense else tape.backward
    full = run(y, path=path)
    only = run(y, path=path, wanted=[x])
    assert x in only and w not in only and y not in only
    assert_same_bits(only.host(x), full.host(x), f"wanted dx, {path}")
    assert len([n for n in tape.nodes() if n in run(y, path=path, wanted=[])]) == 0
    with pytest.raises(tapewise.InvalidNodeIdError, match="wanted id 99"):
        run(y, path=path, wanted=[x, 99])


@pytest.mark.parametrize("wanted", [[True], [1.5], "ab", [2**70], [[0]]], ids=["bool", "float", "str", "huge", "nested"])
def test_wanted_of_the_wrong_type_is_a_type_error_and_runs_nothing(backend, wanted):
    tape = tapewise.Tape(backend)
    y = tape.sin(leaf(tape, np.ones(8)))
    before = backend.stats()
    with pytest.raises(TypeError):
        tape.backward(y, wanted=wanted)
    assert backend.stats() == before
