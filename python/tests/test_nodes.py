"""Every node, forward and backward: graded against the MPFR reference and the spec's bounds through
the Python bindings (a `tapewise-conform vectors` suite answered by tapewise.Tape), and bit for bit
between tapewise's own entry points (Tape.backward fused/staged/dense, Tape.apply, programs on and
off, Backend.forward/vjp_fused on buffers, the pointer-level kernels). The nodes, their scalars and
kinks come from the op table (tapewise.op_table())."""

import json
import subprocess

import numpy as np
import pytest

import tapewise
import tapewise.conform as conform
from conftest import (ARITY, DTYPE_IDS, DTYPES, SCALARS, TABLE, assert_same_bits, assert_same_torch_bits,
                      conform_binary, leaf, node_inputs)

NODES = list(tapewise.NODE_NAMES)


def record(tape, name, ids):
    return getattr(tape, name)(*ids, *SCALARS.get(name, []))


def test_op_table_is_the_runners():
    """tapewise.op_table() and `tapewise-conform ops --json` are the same table (spec/ops.def)."""
    assert list(TABLE) == NODES == [name for name, _, _ in tapewise.ops()]
    assert [row["index"] for row in TABLE.values()] == list(range(len(NODES)))
    done = subprocess.run([conform_binary(), "ops", "--json", "-"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    exported = json.loads(done.stdout)
    assert exported["schema"] == "tapewise-conform.ops/1"
    assert exported["spec_sha256"] == tapewise.spec_sha256
    assert exported["ops"] == list(TABLE.values())


def test_every_node_has_the_scalars_its_table_row_names():
    for name, row in TABLE.items():
        for column in ("run_scalars", "graded_scalars", "edge_scalars"):
            for scalar_set in row[column]:
                assert list(scalar_set) == row["scalars"], f"{name} {column}"
        assert bool(row["run_scalars"]) == bool(row["scalars"]), name


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_node_conforms_through_the_bindings(backend, dtype, tmp_path):
    """The runner's suite of every node (random cases in the domain, kinks, special values) answered
    through Tape.apply and graded by the runner against the reference (spec/bounds.def) and the
    special points: any binding that swapped inputs, scalars or gradients fails here."""
    binary = conform_binary()
    folder = str(tmp_path / "vectors")
    conform.export_vectors(folder, dtype=dtype, cases=64, seed=20261130, binary=binary)
    answered = conform.answer_vectors(folder, conform.tapewise_answer(backend))
    assert answered["errors"] == []
    report = conform.check(folder, binary=binary)
    assert {row["op"] for row in report["rows"]} == set(NODES)
    assert report["summary"]["conforms"] is True, [row for row in report["rows"] if not row.get("conforms", True)]


def tape_run(backend, name, inputs, g, path="fused", dense=False, via_apply=False):
    """(y, [grads]) of one node through a Tape."""
    tape = tapewise.Tape(backend)
    ids = [leaf(tape, x) for x in inputs]
    if via_apply:
        out = tape.apply(name, ids, SCALARS.get(name, []))
    else:
        out = record(tape, name, ids)
    run = tape.backward_dense if dense else tape.backward
    grads = run(out, g, path=path)
    return tape.host(out), [grads.host(i) for i in ids]


def buffer_run(backend, name, inputs, g):
    """(y, [grads]) of one node through Backend.forward / Backend.vjp_fused on wrapped buffers."""
    copy = backend.kind == "cuda"
    ins = [backend.wrap(x, copy=copy) for x in inputs]
    gb = backend.wrap(g, copy=copy)
    dtype = str(inputs[0].dtype)
    y = backend.allocate(inputs[0].shape, dtype)
    grads = [backend.allocate(inputs[0].shape, dtype) for _ in inputs]
    backend.forward(name, ins, y, SCALARS.get(name, []))
    backend.vjp_fused(name, ins, gb, grads, SCALARS.get(name, []))
    return y.host(), [b.host() for b in grads]


def pointer_run(name, inputs, g):
    """(y, [grads]) through the pointer-level kernels on numpy memory (CPU backend)."""
    backend = tapewise.cpu()
    op_index = NODES.index(name)
    s = (SCALARS.get(name, []) + [0.0, 0.0])[:2]
    y = np.empty_like(inputs[0])
    grads = [np.empty_like(x) for x in inputs]
    dtype = str(inputs[0].dtype)
    backend.forward_ptrs(op_index, s[0], s[1], [x.ctypes.data for x in inputs], y.ctypes.data, y.size, dtype)
    backend.vjp_fused_ptrs(op_index, s[0], s[1], [x.ctypes.data for x in inputs], g.ctypes.data,
                           [d.ctypes.data for d in grads], y.size, dtype)
    return y, grads


def raw_pointer_run(name, inputs, g):
    """(y, [grads]) through the fixed-arity pointer kernels tapewise.torch calls (CPU backend)."""
    backend = tapewise.cpu()
    op_index = NODES.index(name)
    s = (SCALARS.get(name, []) + [0.0, 0.0])[:2]
    code = tapewise._tapewise.DTYPE_CODES[str(inputs[0].dtype)]
    y = np.empty_like(inputs[0])
    grads = [np.empty_like(x) for x in inputs]
    second = inputs[1].ctypes.data if len(inputs) == 2 else 0
    second_grad = grads[1].ctypes.data if len(inputs) == 2 else 0
    backend._forward_raw(op_index, s[0], s[1], inputs[0].ctypes.data, second, y.ctypes.data, y.size, code)
    backend._vjp_raw(op_index, s[0], s[1], inputs[0].ctypes.data, second, g.ctypes.data, grads[0].ctypes.data,
                     second_grad, y.size, code)
    return y, grads


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", NODES)
def test_entry_points_agree_bit_for_bit(backend, name, dtype):
    rng = np.random.default_rng(20261130 + NODES.index(name))
    inputs, g = node_inputs(name, dtype, rng, 1000)
    y, grads = tape_run(backend, name, inputs, g)
    others = {
        "staged": tape_run(backend, name, inputs, g, path="staged"),
        "apply": tape_run(backend, name, inputs, g, via_apply=True),
        "buffers": buffer_run(backend, name, inputs, g),
    }
    if backend.kind == "cpu":
        others["pointers"] = pointer_run(name, inputs, g)
        others["raw pointers"] = raw_pointer_run(name, inputs, g)
    for what, (y2, grads2) in others.items():
        assert_same_bits(y2, y, f"{name} forward via {what}")
        for d2, d in zip(grads2, grads):
            assert_same_bits(d2, d, f"{name} vjp via {what}")
    # Dense starts every slot at +0: +0 + d, which turns a -0 into +0 and keeps everything else.
    for path in ("fused", "staged"):
        _, dense = tape_run(backend, name, inputs, g, path=path, dense=True)
        for d2, d in zip(dense, grads):
            assert_same_bits(d2, np.asarray(d.dtype.type(0.0) + d, dtype=d.dtype), f"{name} dense {path}")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_programs_give_the_bits_of_per_node_kernels(backend, dtype):
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal(4096).astype(dtype)
    g = rng.standard_normal(4096).astype(dtype)

    def chain(threshold):
        tape = tapewise.Tape(backend)
        tape.program_threshold = threshold
        x = leaf(tape, x0)
        y = x
        for name in ["sin", "tanh", "sigmoid", "scale", "relu", "gelu", "softplus"] * 3:
            y = record(tape, name, [y])
        y = tape.max(y, tape.min(x, y))
        return tape.host(y), tape.backward(y, g).host(x)

    with_programs = chain(1 << 16)
    without = chain(0)
    assert_same_bits(with_programs[0], without[0], "program forward")
    assert_same_bits(with_programs[1], without[1], "program backward")


def test_ties_split_the_gradient(backend):
    tape = tapewise.Tape(backend)
    a = leaf(tape, np.array([1.0, 2.0, 3.0]))
    b = leaf(tape, np.array([1.0, 5.0, -3.0]))
    grads = tape.backward(tape.max(a, b), np.array([2.0, 2.0, 2.0]))
    np.testing.assert_array_equal(grads.host(a), [1.0, 0.0, 2.0])
    np.testing.assert_array_equal(grads.host(b), [1.0, 2.0, 0.0])


def test_max_of_a_node_with_itself_contributes_once(backend):
    tape = tapewise.Tape(backend)
    a = leaf(tape, np.array([1.0, -2.0], dtype=np.float32))
    g = np.array([np.float32(2.0**-149), 3.0], dtype=np.float32)  # g*0.5 underflows to 0 for the first
    grads = tape.backward(tape.max(a, a), g)
    assert_same_bits(grads.host(a), g, "max(a, a)")


def test_seed_none_means_ones(backend):
    tape = tapewise.Tape(backend)
    x = leaf(tape, np.array([0.5, 1.5]))
    y = tape.sin(x)
    np.testing.assert_allclose(tape.backward(y).host(x), np.cos([0.5, 1.5]), rtol=1e-15)


def test_pointer_kernels_refuse_a_bad_op_index_arity_or_dtype():
    """Both pointer entry points (the tuple form and tapewise.torch's fixed-arity one) check the op
    index, the arity and the dtype before touching memory."""
    backend = tapewise.cpu()
    x, y = np.ones(4, np.float32), np.full(4, 2.0, np.float32)
    sin, add = NODES.index("sin"), NODES.index("add")
    f32 = tapewise._tapewise.DTYPE_CODES["float32"]
    with pytest.raises(tapewise.InvalidArgumentError, match="op index"):
        backend.forward_ptrs(len(NODES), 0.0, 0.0, [x.ctypes.data], y.ctypes.data, 4, "float32")
    with pytest.raises(tapewise.InvalidArgumentError, match="op index 23 out of range"):
        backend._forward_raw(len(NODES), 0.0, 0.0, x.ctypes.data, 0, y.ctypes.data, 4, f32)
    with pytest.raises(tapewise.InvalidArgumentError, match="op index -1 out of range"):
        backend._vjp_raw(-1, 0.0, 0.0, x.ctypes.data, 0, x.ctypes.data, y.ctypes.data, 0, 4, f32)
    with pytest.raises(tapewise.InvalidArgumentError, match="add takes 2 input"):
        backend.forward_ptrs(add, 0.0, 0.0, [x.ctypes.data], y.ctypes.data, 4, "float32")
    with pytest.raises(tapewise.InvalidArgumentError, match="add takes 2 input"):
        backend._forward_raw(add, 0.0, 0.0, x.ctypes.data, 0, y.ctypes.data, 4, f32)
    with pytest.raises(tapewise.InvalidArgumentError, match="sin takes 1 input"):
        backend._forward_raw(sin, 0.0, 0.0, x.ctypes.data, x.ctypes.data, y.ctypes.data, 4, f32)
    with pytest.raises(tapewise.InvalidArgumentError, match="add takes 2 input"):
        backend._vjp_raw(add, 0.0, 0.0, x.ctypes.data, x.ctypes.data, x.ctypes.data, y.ctypes.data, 0, 4, f32)
    with pytest.raises(tapewise.InvalidArgumentError, match="sin takes 1 input"):
        backend._vjp_raw(sin, 0.0, 0.0, x.ctypes.data, 0, x.ctypes.data, y.ctypes.data, y.ctypes.data, 4, f32)
    with pytest.raises(tapewise.DTypeMismatchError, match="int16"):
        backend.forward_ptrs(sin, 0.0, 0.0, [x.ctypes.data], y.ctypes.data, 4, "int16")
    with pytest.raises(tapewise.DTypeMismatchError, match="dtype code 4"):
        backend._forward_raw(sin, 0.0, 0.0, x.ctypes.data, 0, y.ctypes.data, 4, 4)
    with pytest.raises(tapewise.DTypeMismatchError, match="dtype code 7"):
        backend._forward_raw(sin, 0.0, 0.0, x.ctypes.data, 0, y.ctypes.data, 4, 7)
    assert np.all(y == 2.0)  # no refused call wrote its output
    expected = np.empty_like(y)
    backend.forward_ptrs(sin, 0.0, 0.0, [x.ctypes.data], expected.ctypes.data, 4, "float32")
    backend._forward_raw(sin, 0.0, 0.0, x.ctypes.data, 0, y.ctypes.data, 4, f32)  # a good call works
    assert_same_bits(y, expected, "sin through _forward_raw")
    assert not np.any(y == 2.0)


@pytest.mark.parametrize("name", NODES)
def test_bfloat16_entry_points_agree_bit_for_bit(name):
    """numpy has no bfloat16, so the numpy-driven test above cannot run it: the same entry points on
    torch bfloat16 tensors (CPU backend), read back through DLPack."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    rng = np.random.default_rng(20261202 + NODES.index(name))
    arrays, g32 = node_inputs(name, np.float32, rng, 1000)
    inputs = [torch.from_numpy(a).to(torch.bfloat16) for a in arrays]
    g = torch.from_numpy(g32).to(torch.bfloat16)
    backend = tapewise.cpu()
    scalars = SCALARS.get(name, [])
    s = (scalars + [0.0, 0.0])[:2]
    op_index = NODES.index(name)

    def via_tape(path="fused", via_apply=False):
        tape = tapewise.Tape(backend)
        ids = [tape.leaf(x) for x in inputs]
        out = tape.apply(name, ids, scalars) if via_apply else record(tape, name, ids)
        grads = tape.backward(out, g, path=path)
        return torch.from_dlpack(tape.value(out)).clone(), [torch.from_dlpack(grads[i]).clone() for i in ids]

    def via_buffers():
        y = backend.allocate([1000], "bfloat16")
        grads = [backend.allocate([1000], "bfloat16") for _ in inputs]
        ins = [backend.wrap(x) for x in inputs]
        backend.forward(name, ins, y, scalars)
        backend.vjp_fused(name, ins, backend.wrap(g), grads, scalars)
        return torch.from_dlpack(y), [torch.from_dlpack(d) for d in grads]

    def via_pointers(raw):
        y = torch.empty_like(inputs[0])
        grads = [torch.empty_like(x) for x in inputs]
        if raw:
            code = tapewise._tapewise.DTYPE_CODES["bfloat16"]
            second = [inputs[1].data_ptr(), grads[1].data_ptr()] if len(inputs) == 2 else [0, 0]
            backend._forward_raw(op_index, s[0], s[1], inputs[0].data_ptr(), second[0], y.data_ptr(), 1000, code)
            backend._vjp_raw(op_index, s[0], s[1], inputs[0].data_ptr(), second[0], g.data_ptr(), grads[0].data_ptr(),
                             second[1], 1000, code)
        else:
            addresses = [x.data_ptr() for x in inputs]
            backend.forward_ptrs(op_index, s[0], s[1], addresses, y.data_ptr(), 1000, "bfloat16")
            backend.vjp_fused_ptrs(op_index, s[0], s[1], addresses, g.data_ptr(), [d.data_ptr() for d in grads],
                                   1000, "bfloat16")
        return y, grads

    y, grads = via_tape()
    assert y.dtype == torch.bfloat16 and all(d.dtype == torch.bfloat16 for d in grads)
    others = {"staged": via_tape("staged"), "apply": via_tape(via_apply=True), "buffers": via_buffers(),
              "pointers": via_pointers(raw=False), "raw pointers": via_pointers(raw=True)}
    for what, (y2, grads2) in others.items():
        assert_same_torch_bits(y2, y, f"{name} forward via {what}")
        for d2, d in zip(grads2, grads):
            assert_same_torch_bits(d2, d, f"{name} vjp via {what}")
