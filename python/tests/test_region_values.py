"""The region recording door of tapewise._tapewise (_Region, _RegionValue, _region_unary, _region_binary),
which tapewise.torch's regions record through: a node recorded there is the node Tape records, its value
is of the caller's class, a region that has returned records nothing, and bad arguments raise a Python
error naming them, the tape unchanged. Runs without torch, so in CI."""

import numpy as np
import pytest

import tapewise

_tw = tapewise._tapewise
OPS = {name: k for k, (name, _, _) in enumerate(tapewise.ops())}


class Value(_tw._RegionValue):
    """A subclass, as tapewise.torch derives its own: recorded values must be of it."""

    __slots__ = ()


def tape_with_leaves(*arrays):
    tape = tapewise.Tape(tapewise.cpu())
    return tape, [tape.leaf(np.asarray(a, dtype=np.float64)) for a in arrays]


def test_recording_gives_the_tapes_nodes_and_values_of_the_callers_class():
    x0 = np.linspace(-3, 3, 37)
    tape, (x,) = tape_with_leaves(x0)
    region = _tw._Region(tape, "block")
    v = Value(region, x)
    s = _tw._region_unary(OPS["sin"], v, 0.0, 0.0)
    c = _tw._region_unary(OPS["clamp"], s, -0.5, 0.25)
    m = _tw._region_binary(OPS["max"], c, v)
    assert type(s) is Value and type(m) is Value
    assert (s._id, c._id, m._id) == tuple(n.id for n in tape.nodes()[1:4]) and m._region is region and region.name == "block"

    ref = tapewise.Tape(tapewise.cpu())
    rx = ref.leaf(x0)
    rm = ref.max(ref.clamp(ref.sin(rx), -0.5, 0.25), rx)
    assert np.array_equal(tape.host(m._id).view(np.int64), ref.host(rm).view(np.int64))
    g, rg = tape.backward(m._id, wanted=[x]), ref.backward(rm, wanted=[rx])
    assert np.array_equal(g.host(x).view(np.int64), rg.host(rx).view(np.int64))


def test_a_region_that_has_returned_records_nothing():
    tape, (x,) = tape_with_leaves([1.0, 2.0])
    region = _tw._Region(tape, "r")
    v = Value(region, x)
    w = Value(_tw._Region(tape, "other"), x)
    assert _tw._region_binary(OPS["add"], v, w) is None  # different regions
    region.tape = None
    assert region.tape is None
    assert _tw._region_unary(OPS["sin"], v, 0.0, 0.0) is None
    assert _tw._region_binary(OPS["add"], v, v) is None
    assert len(tape) == 1


@pytest.mark.parametrize("call, error, match", [
    (lambda v, w: _tw._region_unary(99, v, 0.0, 0.0), tapewise.InvalidArgumentError, "not a node"),
    (lambda v, w: _tw._region_unary(-1, v, 0.0, 0.0), tapewise.InvalidArgumentError, "not a node"),
    (lambda v, w: _tw._region_unary(OPS["add"], v, 0.0, 0.0), tapewise.InvalidArgumentError, "takes 2 inputs"),
    (lambda v, w: _tw._region_binary(OPS["sin"], v, v), tapewise.InvalidArgumentError, "takes 1 inputs"),
    (lambda v, w: _tw._region_binary(OPS["add"], v, w), tapewise.ShapeMismatchError, "shape"),
    (lambda v, w: _tw._region_unary(OPS["sin"], Value(v._region, 7), 0.0, 0.0), tapewise.InvalidNodeIdError, "7"),
    (lambda v, w: _tw._region_unary(OPS["sin"], Value(v._region, -3), 0.0, 0.0), tapewise.InvalidNodeIdError, "-3"),
    (lambda v, w: _tw._region_unary(OPS["sin"], 0, 0.0, 0.0), TypeError, "incompatible"),
    (lambda v, w: _tw._region_unary(OPS["sin"], None, 0.0, 0.0), TypeError, "incompatible"),
    (lambda v, w: _tw._region_binary(OPS["add"], v, "w"), TypeError, "incompatible"),
    (lambda v, w: Value(object(), 0), TypeError, "region value's region"),
    (lambda v, w: Value(None, 0), TypeError, "incompatible"),
    (lambda v, w: _tw._Region("not a tape", "r"), TypeError, "tapewise.Tape or None"),
])
def test_bad_arguments_raise_and_leave_the_tape_unchanged(call, error, match):
    tape, (x, y) = tape_with_leaves([1.0, 2.0], [1.0, 2.0, 3.0])
    region = _tw._Region(tape, "r")
    with pytest.raises(error, match=match):
        call(Value(region, x), Value(region, y))
    assert len(tape) == 2 and tape.pending == 0


def test_setting_a_regions_tape_to_something_else_is_refused():
    tape, (x,) = tape_with_leaves([1.0])
    region = _tw._Region(tape, "r")
    with pytest.raises(TypeError, match="tapewise.Tape or None"):
        region.tape = 3
    assert region.tape is tape
    assert _tw._region_unary(OPS["neg"], Value(region, x), 0.0, 0.0)._id == tape.nodes()[1]


def test_a_value_never_initialised_is_refused():
    tape, (x,) = tape_with_leaves([1.0])
    with pytest.warns(RuntimeWarning, match="uninitialized instance"), pytest.raises(TypeError, match="incompatible"):
        _tw._region_unary(OPS["sin"], _tw._RegionValue.__new__(Value), 0.0, 0.0)
    assert len(tape) == 1
