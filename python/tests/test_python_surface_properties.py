"""Property-based test of the Python surface (Hypothesis): random call sequences on the CPU backend —
leaves, nodes by method and by apply, fused, staged and dense backwards, value/host reads, gradient
reads and releases, program_threshold, Backend.forward — with hostile arguments (read-only,
non-contiguous, 0-d, empty and huge-shaped arrays, wrong dtypes, NaN payloads, Python lists,
bools, bad ids). Nothing may crash; every error is a TapewiseError or TypeError with a message; a
failed call leaves the tape's nodes and values bit for bit as they were (only a call that flushes,
such as a backward, may have run the pending forwards); exported arrays stay valid, and read-only
where the rules say so; fused and staged gradients are identical up to NaN. Bounded and
derandomized, so CI runs the same sequences in a few seconds."""

import numpy as np
import pytest
from hypothesis import HealthCheck, settings, strategies as st  # a test dependency: pip install hypothesis
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import tapewise
from conftest import bits

NODES = tapewise.ops()  # (name, arity, scalar names)
SHAPES = [(), (0,), (1,), (3,), (2, 3)]
NAN_BITS = {np.float32: [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBADBAD, 0xFFFFFFFF],
            np.float64: [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF8DEADBEEF0001]}


@st.composite
def float_arrays(draw, shape=None, dtype=None):
    """A C-contiguous float array whose elements mix ordinary values, ±0, ±inf and NaNs with payloads."""
    shape = draw(st.sampled_from(SHAPES)) if shape is None else shape
    dtype = draw(st.sampled_from([np.float32, np.float64])) if dtype is None else dtype
    count = int(np.prod(shape, dtype=np.int64))
    ordinary = st.floats(-8.0, 8.0, width=32 if dtype is np.float32 else 64)
    special = st.sampled_from([0.0, -0.0, np.inf, -np.inf])
    values = np.array(draw(st.lists(st.one_of(ordinary, special), min_size=count, max_size=count)), dtype=dtype)
    for i in draw(st.lists(st.integers(0, max(count - 1, 0)), max_size=2 if count else 0)):
        values.view(np.uint32 if dtype is np.float32 else np.uint64)[i] = draw(st.sampled_from(NAN_BITS[dtype]))
    return values.reshape(shape)


HOSTILE_KINDS = ["plain", "plain", "plain", "read_only", "bytes", "strided", "fortran", "list", "bool", "int32",
                 "float16", "int16", "complex", "huge", "zero_stride", "none", "python_float"]


@st.composite
def hostile_arrays(draw):
    """(kind, object): mostly arrays (or lists of numbers) tapewise takes, else arrays and objects it must
    refuse cleanly."""
    kind = draw(st.sampled_from(HOSTILE_KINDS))
    a = draw(float_arrays())
    if kind == "read_only":
        a.flags.writeable = False
    elif kind == "bytes":
        a = np.frombuffer(a.tobytes(), dtype=a.dtype).reshape(a.shape)  # immutable memory
    elif kind == "strided":
        a = np.repeat(a.reshape(-1), 2)[::2]
    elif kind == "fortran":
        a = np.asfortranarray(draw(float_arrays(shape=(2, 3))))
    elif kind == "list":
        a = a.reshape(-1).tolist()
    elif kind == "bool":
        a = draw(st.booleans())
    elif kind in ("int32", "int16"):
        a = np.arange(a.size, dtype=kind).reshape(a.shape)
    elif kind in ("float16", "complex"):
        with np.errstate(invalid="ignore", over="ignore"):
            a = a.astype(np.float16 if kind == "float16" else np.complex64)
    elif kind == "huge":  # claims 4 EiB without holding it: no allocation of it can succeed
        shape = draw(st.sampled_from([(2**60,), (2**30, 2**30)]))
        a = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=shape, strides=(0,) * len(shape))
    elif kind == "zero_stride":
        a = np.lib.stride_tricks.as_strided(np.ones(1), shape=(3,), strides=(0,))
    elif kind == "none":
        a = None
    elif kind == "python_float":
        a = 1.5
    return kind, a


# Node ids a caller should not pass: bare numbers no tape handed out (a node's position among them), of
# the wrong kind, bool; a node of another tape is drawn by PythonSurface.node_id.
BAD_IDS = st.one_of(st.integers(-3, -1), st.integers(0, 3), st.integers(40, 50), st.booleans(),
                    st.sampled_from([2**40, -(2**40), 2**70, 1.0, "0", None, np.float64(0.0)]))
SCALARS = st.lists(st.one_of(st.floats(allow_nan=True), st.sampled_from([0.5, -1.0, 1e-6]), st.just("1")), max_size=3)
EXPECTED_ERRORS = (tapewise.TapewiseError, TypeError)


def assert_identical_up_to_nan(x, y, what):
    """TorchLean's AgreeUpToNaN: equal bits, or both NaN."""
    same = (bits(x) == bits(y)) | (np.isnan(x) & np.isnan(y))
    assert same.all(), f"{what}: {x} vs {y}"


def a_float_array(obj):
    return isinstance(obj, np.ndarray) and obj.dtype in (np.float16, np.float32, np.float64)


class PythonSurface(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.backend = tapewise.cpu()
        self.tape = tapewise.Tape(self.backend)
        self.other = tapewise.Tape(self.backend)  # its nodes are refused by self.tape and its gradients
        self.other_node = self.other.leaf(np.ones(3))
        self.known = []        # per node: its value's bits once read, else None
        self.writable = []     # per node: whether value(id) may be written (a zero-copy writable leaf)
        self.gradients = []    # the latest Gradients objects
        self.exported = []     # (array, its bits when exported): must stay valid after releases

    # The checks every failed call must pass.
    def attempt(self, call, may_flush=False, allowed=EXPECTED_ERRORS):
        size, pending = len(self.tape), self.tape.pending
        try:
            return True, call()
        except allowed as e:
            assert str(e), f"{type(e).__name__} without a message"
            if isinstance(e, tapewise.TapewiseError):
                assert e.code and e.message and e.code in str(e)
            assert len(self.tape) == size, "a failed call changed the node count"
            assert self.tape.pending in ((pending, 0) if may_flush else (pending,)), "a failed call ran pending nodes"
            self.check_values()
            return False, e

    def check_values(self):
        """Every value read before still has its bits; values not read yet are read now."""
        for i, node in enumerate(self.tape.nodes()):
            now = bits(self.tape.host(node)).copy()
            if self.known[i] is None:
                self.known[i] = now
            else:
                assert np.array_equal(self.known[i], now), f"the value of node {i} changed"

    def record(self, writable=False):
        self.known.append(None)
        self.writable.append(writable)

    def node_id(self, data, bad_one_in=6):
        """Mostly a node of the tape (a Node, or its id as int or numpy integer), sometimes a bad one."""
        if not len(self.tape) or data.draw(st.integers(0, bad_one_in - 1)) == 0:
            return data.draw(st.one_of(BAD_IDS, st.just(self.other_node), st.just(int(self.other_node))))
        good = self.tape.nodes()[data.draw(st.integers(0, len(self.tape) - 1))]
        return data.draw(st.sampled_from([good, good, good, int(good), np.int64(int(good))]))

    @initialize(values=st.lists(float_arrays(shape=(3,)), min_size=1, max_size=3))
    def first_leaves(self, values):
        for v in values:
            self.record(writable=True)
            self.known[self.tape.leaf(v).index] = bits(v).copy()

    @rule(source=hostile_arrays(), requires_grad=st.booleans(), copy=st.booleans())
    def leaf(self, source, requires_grad, copy):
        kind, obj = source
        before = np.array(obj, copy=True) if a_float_array(obj) and kind != "huge" else None
        ok, node = self.attempt(lambda: self.tape.leaf(obj, requires_grad=requires_grad, copy=copy))
        if not ok:
            return
        if kind in ("list", "python_float"):  # numbers are always copied, as float32 (the default), read-only
            self.record(writable=False)
            self.known[node.index] = bits(np.array(obj, np.float32)).copy()
            return
        assert a_float_array(obj) and (copy or obj.flags.c_contiguous), f"took a {kind} leaf in place"
        self.record(writable=not copy and obj.flags.writeable)
        self.known[node.index] = bits(before).copy()

    @rule(node=st.sampled_from(NODES), data=st.data(), by_method=st.booleans())
    def record_node(self, node, data, by_method):
        name, arity, scalar_names = node
        count = data.draw(st.sampled_from([arity] * 8 + [0, 1, 2, 3]))
        parents = [self.node_id(data, bad_one_in=10) for _ in range(count)]
        scalars = data.draw(st.one_of(st.lists(st.floats(), min_size=len(scalar_names), max_size=len(scalar_names)),
                                      SCALARS))
        args = parents + scalars
        if by_method:
            call = lambda: getattr(self.tape, name)(*args)  # noqa: E731
        else:
            call = lambda: self.tape.apply(name, parents, scalars)  # noqa: E731
        ok, node_id = self.attempt(call, may_flush=True)  # a node above program_threshold flushes first
        if ok:  # by method, positions decide: the first `arity` arguments are the ids
            assert len(args) == arity + len(scalar_names) and (by_method or len(parents) == arity)
            ids = args[:arity]
            assert node_id.tape is self.tape
            assert all(type(p) is not bool and int(p) >> 32 == self.tape.serial and int(p) < node_id.id for p in ids)
            assert self.tape.shape(node_id) == self.tape.shape(int(ids[0]))
            self.record()

    @rule(data=st.data(),
          seed=st.sampled_from(["none", "ones", "read_only", "strided", "float16", "list", "wrong_shape"]),
          path=st.sampled_from(["fused", "fused", "staged", "fast"]), dense=st.booleans())
    def backward(self, data, seed, path, dense):
        out = self.node_id(data)

        def make_seed():
            shape = self.tape.shape(out)
            dtype = np.float32 if self.tape.dtype(out) == "float32" else np.float64
            ones = np.ones(shape, dtype)
            return {"none": None, "ones": ones, "read_only": np.frombuffer(ones.tobytes(), dtype).reshape(shape),
                    "strided": np.repeat(ones.reshape(-1), 2)[::2].reshape(shape) if ones.ndim else ones,
                    "float16": ones.astype(np.float16), "list": ones.tolist(),
                    "wrong_shape": np.ones((7,), dtype)}[seed]

        run = self.tape.backward_dense if dense else self.tape.backward
        ok, grads = self.attempt(lambda: run(out, make_seed(), path=path), may_flush=True)
        if ok:
            assert path in ("fused", "staged") and int(out) >> 32 == self.tape.serial
            for i in grads:
                assert grads.host(i).shape == self.tape.shape(i)
            other = run(out, make_seed(), path="staged" if path == "fused" else "fused")
            assert list(other) == list(grads)
            for i in grads:  # the documented promise across paths: identical up to NaN
                assert_identical_up_to_nan(grads.host(i), other.host(i), f"gradient of node {i}")
            self.gradients = (self.gradients + [grads])[-3:]

    @rule(which=st.integers(0, 2), data=st.data(),
          how=st.sampled_from(["getitem", "get", "host", "buffer", "contains"]))
    def read_gradient(self, which, data, how):
        node = self.node_id(data)
        if not self.gradients:
            return
        grads = self.gradients[which % len(self.gradients)]
        read = {"getitem": lambda: grads[node], "get": lambda: grads.get(node), "host": lambda: grads.host(node),
                "buffer": lambda: grads.buffer(node).array(), "contains": lambda: node in grads}[how]
        ok, got = self.attempt(read, allowed=EXPECTED_ERRORS + (KeyError,))
        if ok and got is not None and how not in ("contains",):
            array = np.asarray(got)
            assert array.shape == self.tape.shape(node)
            self.exported.append((array, bits(array).copy()))
            self.exported = self.exported[-8:]

    @rule(which=st.integers(0, 2), data=st.data())
    def release_gradient(self, which, data):
        node = self.node_id(data)
        if not self.gradients:
            return
        grads = self.gradients[which % len(self.gradients)]
        ok, _ = self.attempt(lambda: grads.buffer(node).release(), allowed=EXPECTED_ERRORS + (KeyError,))
        if ok:
            assert node not in grads and grads.get(node) is None
            for read in (lambda: grads[node], lambda: grads.host(node), lambda: grads.buffer(node)):
                with pytest.raises(KeyError, match="released"):
                    read()

    @rule(data=st.data())
    def read_value(self, data):
        node = self.node_id(data)
        ok, value = self.attempt(lambda: np.asarray(self.tape.value(node)), may_flush=True)
        if not ok:
            return
        if value.size:  # numpy makes an empty array of its own, writable, whatever the export says
            assert value.flags.writeable == self.writable[int(node) & 0xFFFFFFFF]
        if not value.flags.writeable and value.size:
            with pytest.raises(ValueError, match="read-only"):
                value.reshape(-1)[0] = 0.0
        host = self.tape.host(node)
        assert np.array_equal(bits(host), bits(value)) and not np.shares_memory(host, value)

    @rule(threshold=st.sampled_from([0, 1, 2, 3, 16, 2**20, -1, 2**62, 2**70, True, 1.5]))
    def program_threshold(self, threshold):
        self.attempt(lambda: setattr(self.tape, "program_threshold", threshold))

    @rule(limit=st.sampled_from([1, 2, 3, 448, 65536, 0, -1, 65537, 2**70, True, 1.5]))
    def max_pending_nodes(self, limit):
        self.attempt(lambda: setattr(self.tape, "max_pending_nodes", limit))

    @rule()
    def flush(self):
        self.attempt(self.tape.flush)
        assert self.tape.pending == 0

    @rule(op=st.sampled_from([n for n, _, s in NODES if not s]), inputs=st.lists(hostile_arrays(), max_size=2),
          out=st.sampled_from(["fresh", "read_only", "released", "huge", "bad_dtype"]))
    def backend_forward(self, op, inputs, out):
        def call():
            buffers = [self.backend.wrap(a) for _, a in inputs]
            shape = buffers[0].shape if buffers else (3,)
            if out == "read_only":
                frozen = np.zeros(shape)
                frozen.flags.writeable = False
                target = self.backend.wrap(frozen)
            elif out == "huge":
                target = self.backend.allocate([2**62, 2**62])
            else:
                target = self.backend.allocate(list(shape), "int16" if out == "bad_dtype" else buffers[0].dtype
                                               if buffers else "float64")
            if out == "released":
                target.release()
            self.backend.forward(op, buffers, target)
            return target
        ok, target = self.attempt(call)
        if ok:
            assert out == "fresh" and not target.read_only

    @invariant()
    def nodes_and_exports_hold(self):
        assert len(self.tape) == len(self.known)
        for array, expected in self.exported:
            assert np.array_equal(bits(array), expected), "an exported gradient changed or dangles"


PythonSurface.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None, derandomize=True,
                                           suppress_health_check=list(HealthCheck), print_blob=True)
test_python_surface = PythonSurface.TestCase
