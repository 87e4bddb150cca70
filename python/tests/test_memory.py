"""Backend.memory_stats, trim and kept_memory_limit: kept gradients do not pin their tapes' slabs,
what is kept for the next tape stays within the limit, and trim gives it back, never a live buffer."""

import gc

import numpy as np
import pytest

import tapewise
from conftest import leaf

MiB = 1 << 20


def chain(backend, nodes):
    """A tape of `nodes` values of 2^16 float32 elements (256 KiB, 16 to a 4 MiB slab) after a leaf."""
    tape = tapewise.Tape(backend)
    tape.program_threshold = 0
    x = tape.leaf(np.full(1 << 16, 0.5, dtype=np.float32), copy=True)
    for _ in range(nodes):
        x = tape.neg(x)
    return tape


def test_kept_one_element_gradients_do_not_pin_their_tapes_slabs(backend):
    # Each tape fills more than a 4 MiB slab; carved from it, 300 kept 1-element gradients held 300
    # slabs (about 1.2 GB). Now they share slabs of their own size: a few KiB.
    kept = []
    for _ in range(300):
        tape = chain(backend, 20)
        x = leaf(tape, np.array([0.25], dtype=np.float32))
        kept.append(tape.backward(tape.sin(x), np.ones(1, dtype=np.float32))[x])
        del tape, x  # a Node holds its tape
    gc.collect()
    memory = backend.memory_stats()
    assert memory["live_bytes"] >= 300 * 4
    assert memory["reserved_bytes"] <= 8 * MiB + MiB // 4, memory
    assert memory["kept_bytes"] >= 8 * MiB  # the two slabs of 256 KiB values, for the next tape
    assert backend.trim() == memory["kept_bytes"]
    assert backend.memory_stats()["reserved_bytes"] <= 256 * 1024
    assert backend.stats()["gradient"]["count"] >= 300  # every kept gradient is still alive


def test_memory_stats_and_trim(backend):
    assert backend.memory_stats() == {"live_bytes": 0, "reserved_bytes": 0, "slab_bytes": 0, "kept_bytes": 0}
    live = backend.wrap(np.arange(3, dtype=np.float32), copy=True)  # 12 bytes: a 256-byte slot
    tape = chain(backend, 40)  # 41 values: three slabs
    during = backend.memory_stats()
    assert during["live_bytes"] == 12 + 41 * (1 << 18)
    assert during["slab_bytes"] == 12 * MiB + 4096
    assert during["reserved_bytes"] == during["slab_bytes"]
    assert during["kept_bytes"] == 0
    del tape
    gc.collect()
    before = backend.memory_stats()
    assert before["kept_bytes"] == 12 * MiB
    assert backend.trim() == 12 * MiB
    after = backend.memory_stats()
    assert after == {"live_bytes": 12, "reserved_bytes": 4096, "slab_bytes": 4096, "kept_bytes": 0}
    np.testing.assert_array_equal(live.host(), [0, 1, 2])
    assert backend.trim() == 0
    assert backend.stats()["value"] == {"count": 1, "bytes": 12}  # stats() keeps its shape


def test_kept_memory_limit(backend):
    assert backend.kept_memory_limit == (256 * MiB if backend.kind == "cpu" else None)
    backend.kept_memory_limit = 8 * MiB
    chain(backend, 100)  # 101 values: seven slabs, five given back as they empty
    gc.collect()
    assert backend.memory_stats()["kept_bytes"] == 8 * MiB
    backend.kept_memory_limit = 0  # what is kept beyond a new limit is given back at once
    assert backend.memory_stats()["reserved_bytes"] == 0
    backend.kept_memory_limit = None
    assert backend.kept_memory_limit is None
    with pytest.raises(tapewise.InvalidArgumentError, match="kept_memory_limit: -1 bytes is negative"):
        backend.kept_memory_limit = -1
    assert backend.kept_memory_limit is None


def test_the_environment_variable_sets_the_kept_memory_limit(monkeypatch):
    monkeypatch.setenv("TAPEWISE_KEPT_MEMORY_LIMIT", "64M")
    assert tapewise.cpu().kept_memory_limit == 64 * MiB
    monkeypatch.setenv("TAPEWISE_KEPT_MEMORY_LIMIT", "1000")
    assert tapewise.cpu(threads=1).kept_memory_limit == 1000
    monkeypatch.setenv("TAPEWISE_KEPT_MEMORY_LIMIT", "lots")
    with pytest.raises(tapewise.InvalidArgumentError, match="TAPEWISE_KEPT_MEMORY_LIMIT='lots' is not a byte count"):
        tapewise.cpu()
