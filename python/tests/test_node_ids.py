"""A node belongs to one tape: Tape's methods return tapewise.Node objects carrying their tape, every other
tape (and the gradients of every other tape) refuses them, naming both tapes, and a Node is no number."""

import gc
import operator

import numpy as np
import pytest

import tapewise


def two_tapes():
    backend = tapewise.cpu()
    t1, t2 = tapewise.Tape(backend), tapewise.Tape(backend)
    a = t1.leaf(np.array([0.5, 1.0, 2.0]))
    b = t2.leaf(np.array([4.0, 5.0, 6.0]))
    return t1, t2, a, b


def snapshot(tape):
    return len(tape), tape.pending, [tape.host(node).tobytes() for node in tape.nodes()]


REFUSING_CALLS = {
    "sin": lambda t, a, b: t.sin(a),
    "add": lambda t, a, b: t.add(b, a),
    "clamp": lambda t, a, b: t.clamp(a, 0.0, 1.0),
    "apply": lambda t, a, b: t.apply("mul", [b, a]),
    "value": lambda t, a, b: t.value(a),
    "host": lambda t, a, b: t.host(a),
    "shape": lambda t, a, b: t.shape(a),
    "dtype": lambda t, a, b: t.dtype(a),
    "backward": lambda t, a, b: t.backward(a),
    "backward_dense": lambda t, a, b: t.backward_dense(a),
    "wanted": lambda t, a, b: t.backward(b, wanted=[b, a]),
    "by id": lambda t, a, b: t.sin(int(a)),
    "by numpy id": lambda t, a, b: t.exp(np.int64(a.id)),
}


@pytest.mark.parametrize("call", REFUSING_CALLS.values(), ids=REFUSING_CALLS.keys())
def test_another_tapes_node_is_refused_naming_both_tapes(call):
    t1, t2, a, b = two_tapes()
    t2.sin(b)  # pending: a refusal must not run it either
    assert t2.pending == 1
    with pytest.raises(tapewise.InvalidNodeIdError) as error:
        call(t2, a, b)
    assert f"of tape {t1.serial} used on tape {t2.serial}" in str(error.value)
    assert len(t2) == 2 and t2.pending == 1
    untouched = tapewise.Tape(tapewise.cpu())
    untouched.sin(untouched.leaf(np.array([4.0, 5.0, 6.0])))
    assert snapshot(t2) == snapshot(untouched)
    assert snapshot(t1) == (1, 0, [np.array([0.5, 1.0, 2.0]).tobytes()])


def test_same_positions_on_two_tapes_are_different_nodes():
    t1, t2, a, b = two_tapes()
    assert a.index == b.index == 0 and a.id != b.id and a != b
    assert a.tape is t1 and b.tape is t2 and t1.serial != t2.serial
    assert a.id >> 32 == t1.serial and int(a) == a.id
    assert repr(a) == f"<tapewise.Node #0 of tape {t1.serial}: float64 (3,)>"
    assert a.shape == (3,) and a.dtype == "float64"


def test_gradients_refuse_another_tapes_node():
    t1, t2, a, b = two_tapes()
    grads = t2.backward(t2.sin(b))
    assert b in grads and a not in grads and int(a) not in grads
    for read in (lambda: grads[a], lambda: grads.get(a), lambda: grads.host(a), lambda: grads.buffer(a)):
        with pytest.raises(tapewise.InvalidNodeIdError, match=f"of tape {t1.serial} used on tape {t2.serial}"):
            read()
    assert grads.tape is t2 and grads.ids() == t2.nodes() and list(grads) == [b, t2.nodes()[1]]


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow])
def test_a_node_is_not_a_number(op):
    tape = tapewise.Tape(tapewise.cpu())
    a = tape.leaf(np.ones(2))
    with pytest.raises(TypeError):
        op(a, a)
    with pytest.raises(TypeError):
        op(a, 1)
    with pytest.raises(TypeError):
        -a  # noqa: B018
    assert len(tape) == 1  # nothing recorded


def test_nodes_compare_and_hash_as_their_ids():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.ones(2))
    y = tape.sin(x)
    again = tape.nodes()
    assert again == [x, y] and again[1] is not y and hash(again[1]) == hash(y) == hash(y.id)
    assert {x: "x"}[again[0]] == "x" and x == x.id and x != y and x != x.index and x != "x"
    assert [n.index for n in tape.nodes()] == [0, 1]


def test_a_bare_position_is_no_node():
    tape = tapewise.Tape(tapewise.cpu())
    tape.leaf(np.ones(2))
    with pytest.raises(tapewise.InvalidNodeIdError, match="invalid node id 0"):
        tape.sin(0)


def test_a_node_keeps_its_tape_alive():
    backend = tapewise.cpu()
    tape = tapewise.Tape(backend)
    y = tape.exp(tape.leaf([0.0, 1.0], dtype="float64"))
    live = backend.stats()["value"]["count"]
    assert live > 0
    del tape
    gc.collect()
    assert np.array_equal(y.tape.host(y), np.exp([0.0, 1.0]))
    assert backend.stats()["value"]["count"] == live
    del y
    gc.collect()
    assert backend.stats()["value"]["count"] == 0
