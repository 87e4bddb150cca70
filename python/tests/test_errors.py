"""Errors become exceptions carrying the C++ error code, and a failed call leaves the tape's nodes and
values unchanged (a failed backward may have run the pending forwards, as documented)."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tapewise
from conftest import assert_same_bits, leaf


def snapshot(tape):
    """Everything observable about a tape: its size, pending count and every value's bits."""
    return len(tape), tape.pending, [tape.host(node).copy() for node in tape.nodes()]


def assert_unchanged(tape, before):
    size, pending, values = before
    assert len(tape) == size
    for node, v in zip(tape.nodes(), values):
        assert_same_bits(tape.host(node), v, f"value of node {node}")


@pytest.fixture
def small_tape(backend):
    tape = tapewise.Tape(backend)
    x = leaf(tape, np.array([1.0, 2.0, 3.0]))
    y = tape.sin(x)
    leaf(tape, np.ones(2))                  # node 2: another shape
    leaf(tape, np.ones(3, np.float32))      # node 3: another dtype
    return tape, x, y


@pytest.mark.parametrize("call, code, cls", [
    (lambda t, x, y: t.add(x, 99), "InvalidNodeId", tapewise.InvalidNodeIdError),
    (lambda t, x, y: t.sin(-1), "InvalidNodeId", tapewise.InvalidNodeIdError),
    (lambda t, x, y: t.mul(x, t.nodes()[2]), "ShapeMismatch", tapewise.ShapeMismatchError),
    (lambda t, x, y: t.mul(x, t.nodes()[3]), "DTypeMismatch", tapewise.DTypeMismatchError),
    (lambda t, x, y: t.backward(y, np.ones(4)), "SeedShapeMismatch", tapewise.SeedShapeMismatchError),
    (lambda t, x, y: t.backward(y, np.ones(3, np.float32)), "SeedDTypeMismatch", tapewise.SeedDTypeMismatchError),
    (lambda t, x, y: t.backward(y, np.ones(3), path="fast"), "InvalidArgument", tapewise.InvalidArgumentError),
    (lambda t, x, y: t.apply("tan", [x]), "InvalidArgument", tapewise.InvalidArgumentError),
    (lambda t, x, y: t.apply("scale", [x]), "InvalidArgument", tapewise.InvalidArgumentError),
    (lambda t, x, y: t.apply("add", [x]), "InvalidArgument", tapewise.InvalidArgumentError),
    (lambda t, x, y: t.leaf(np.arange(3)), "DTypeMismatch", tapewise.DTypeMismatchError),
    (lambda t, x, y: t.leaf(np.ones((4, 4))[:, 1]), None, tapewise.TapewiseError),
    (lambda t, x, y: t.value(9), "InvalidNodeId", tapewise.InvalidNodeIdError),
])
def test_errors_raise_with_code_and_leave_the_tape_unchanged(small_tape, call, code, cls):
    tape, x, y = small_tape
    tape.flush()
    before = snapshot(tape)
    with pytest.raises(cls) as info:
        call(tape, x, y)
    assert isinstance(info.value, tapewise.TapewiseError)
    if code is not None:
        assert info.value.code == code
    assert info.value.message and info.value.code in str(info.value)
    assert_unchanged(tape, before)


def test_error_classes_are_also_builtin_kinds():
    assert issubclass(tapewise.DTypeMismatchError, TypeError)
    assert issubclass(tapewise.ShapeMismatchError, ValueError)
    assert issubclass(tapewise.InvalidNodeIdError, IndexError)
    assert issubclass(tapewise.OutOfMemoryError, MemoryError)


def _raise_a_tapewise_error(_):
    tapewise.Tape(tapewise.cpu()).sin(5)


def test_errors_survive_pickling_and_other_processes():
    """Each error class rebuilds from its pickle with its class, code, message and text, so that
    multiprocessing and concurrent.futures carry it back from a worker."""
    import concurrent.futures
    import multiprocessing
    import pickle

    from tapewise._errors import ERRORS_BY_CODE
    for code, cls in list(ERRORS_BY_CODE.items()) + [("TapewiseError", tapewise.TapewiseError)]:
        error = cls(code, "what went wrong")
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is cls and back.code == code and back.message == "what went wrong"
        assert str(back) == str(error)
    with pytest.raises(tapewise.InvalidNodeIdError) as raised:
        _raise_a_tapewise_error(None)
    back = pickle.loads(pickle.dumps(raised.value))
    assert type(back) is tapewise.InvalidNodeIdError and back.message == raised.value.message
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        with pytest.raises(tapewise.InvalidNodeIdError, match="invalid node id 5"):
            pool.submit(_raise_a_tapewise_error, None).result(timeout=120)


def test_tape_still_works_after_an_error(backend):
    tape = tapewise.Tape(backend)
    x = leaf(tape, np.array([0.5, 1.0]))
    with pytest.raises(tapewise.InvalidNodeIdError):
        tape.div(x, 5)
    y = tape.div(x, tape.exp(x))
    assert y.index == 2 and len(tape) == 3
    np.testing.assert_allclose(tape.host(y), np.array([0.5, 1.0]) / np.exp([0.5, 1.0]), rtol=1e-15)


def test_not_an_array_is_a_type_error(backend):
    tape = tapewise.Tape(backend)
    x = tape.leaf([1.0, 2.0])  # a list of numbers is copied, as float32 unless dtype= says float64
    assert tape.dtype(x) == "float32"
    np.testing.assert_array_equal(tape.host(x), [1.0, 2.0])
    for not_numbers in (["a"], [[1.0], [1.0, 2.0]], {"a": 1.0}, "1.0"):
        with pytest.raises(TypeError, match="leaf: "):
            tape.leaf(not_numbers)
    assert len(tape) == 1


@pytest.mark.parametrize("array, reason", [
    (np.array([1.0, None], dtype=object), "DLPack only supports"),
    (np.ones(3, ">f4"), "native byte order"),
])
def test_an_array_its_producer_cannot_export_is_a_type_error_with_the_producers_reason(array, reason):
    tape = tapewise.Tape(tapewise.cpu())
    for call in (lambda: tape.leaf(array), lambda: tape.leaf(array, copy=True)):
        with pytest.raises(TypeError, match=f"leaf: this ndarray cannot be exported .*{reason}"):
            call()
    assert len(tape) == 0


def test_non_contiguous_is_rejected_by_name_and_copied_on_request():
    tape = tapewise.Tape(tapewise.cpu())
    strided = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]
    with pytest.raises(tapewise.InvalidArgumentError, match="not C-contiguous"):
        tape.leaf(strided)
    x = tape.leaf(strided, copy=True)
    np.testing.assert_array_equal(tape.host(x), strided)
    transposed = np.arange(6, dtype=np.float32).reshape(2, 3).T
    np.testing.assert_array_equal(tape.host(tape.leaf(transposed, copy=True)), transposed)


def test_wrong_dtypes_are_named():
    tape = tapewise.Tape(tapewise.cpu())
    for array, name in [(np.ones(2, np.int16), "int16"), (np.ones(2, np.uint16), "uint16"),
                        (np.ones(2, np.int32), "int32"),
                        (np.ones(2, np.complex64), "complex64"), (np.ones(2, bool), "bool8")]:
        with pytest.raises(tapewise.DTypeMismatchError, match=f"dtype {name} is not supported"):
            tape.leaf(array)
    assert len(tape) == 0


@pytest.mark.parametrize("spelling, name", [
    ("float64", "float64"), ("f8", "float64"), ("<f8", "float64"), ("double", "float64"), (np.float64, "float64"),
    (np.dtype("f8"), "float64"), ("f4", "float32"), (np.float32, "float32"), (np.dtype("<f4"), "float32"),
    ("f2", "float16"), (np.float16, "float16"), ("half", "float16"), ("bfloat16", "bfloat16")])
def test_dtype_takes_numpys_spellings(spelling, name):
    """dtype= of a list's copy (leaf, wrap) and of allocate takes numpy's ways of naming a dtype."""
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf([1.0, 2.5], dtype=spelling)
    assert tape.dtype(x) == name
    assert tapewise.cpu().wrap([1.0, 2.5], dtype=spelling).dtype == name
    assert tapewise.cpu().allocate([3], dtype=spelling).dtype == name


def test_dtype_takes_ml_dtypes_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed")
    tape = tapewise.Tape(tapewise.cpu())
    assert tape.dtype(tape.leaf([1.0, 2.5], dtype=ml_dtypes.bfloat16)) == "bfloat16"


def test_tape_options_take_ints_not_bools():
    """True is no element count: the options refuse it (before, it was taken as 1)."""
    tape = tapewise.Tape(tapewise.cpu())
    before = (tape.program_threshold, tape.max_pending_nodes)
    for name in ("program_threshold", "max_pending_nodes"):
        for value in (True, False, 1.5, "3"):
            with pytest.raises(TypeError, match=f"{name} takes an int, not"):
                setattr(tape, name, value)
        with pytest.raises(tapewise.InvalidArgumentError, match=f"{name} {2**70} does not fit in 64 bits"):
            setattr(tape, name, 2**70)
    assert (tape.program_threshold, tape.max_pending_nodes) == before
    tape.program_threshold = 16
    assert tape.program_threshold == 16


def test_a_dtype_that_is_no_dtype_is_refused_by_name():
    tape = tapewise.Tape(tapewise.cpu())
    with pytest.raises(TypeError, match="leaf: dtype= takes a dtype's name"):
        tape.leaf([1.0], dtype=3.5)
    with pytest.raises(tapewise.DTypeMismatchError, match="dtype='int32' is not a dtype tapewise takes"):
        tape.leaf([1.0], dtype=np.int32)
    with pytest.raises(tapewise.DTypeMismatchError, match="dtype='nonsense' is not a dtype tapewise takes"):
        tape.leaf([1.0], dtype="nonsense")
    assert len(tape) == 0


def test_wrong_torch_dtypes_are_named():
    """Through DLPack, each refused dtype is named, the float8s included (DLPack 1.1 codes)."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    tape = tapewise.Tape(tapewise.cpu())
    names = ["int16", "uint16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]
    for name in [n for n in names if hasattr(torch, n)]:
        for call in (lambda: tape.leaf(torch.zeros(2, dtype=getattr(torch, name))),
                     lambda: tapewise.cpu().wrap(torch.zeros(2, dtype=getattr(torch, name)), copy=True)):
            with pytest.raises(tapewise.DTypeMismatchError,
                               match=f"dtype {name} is not supported: tapewise takes float32, float64, bfloat16 or"):
                call()
    assert len(tape) == 0


def test_host_memory_into_cuda_needs_copy(cuda_backend):
    tape = tapewise.Tape(cuda_backend)
    with pytest.raises(tapewise.BackendMismatchError, match="copy=True"):
        tape.leaf(np.ones(3))
    x = tape.leaf(np.ones(3), copy=True)
    assert tape.value(x).__dlpack_device__() == (2, cuda_backend.device_id)


def test_cuda_build_or_machine_reason():
    if tapewise.cuda_available():
        assert tapewise.cuda_unavailable_reason() == ""
    else:
        assert tapewise.cuda_unavailable_reason()
        with pytest.raises(tapewise.DeviceUnavailableError) as info:
            tapewise.cuda()
        assert info.value.code == "DeviceUnavailable"


def test_a_gpu_outside_the_build_is_told_its_compute_capability():
    """A build without a kernel image for the GPU here (e.g. CMAKE_CUDA_ARCHITECTURES=80-real on an
    H200) names the GPU's compute capability and the build's architectures, from Python and from the
    runner; elsewhere this skips, saying why."""
    reason = tapewise.cuda_unavailable_reason()
    if "has no kernel image" not in reason:
        pytest.skip(f"no GPU outside the build here: {reason or 'CUDA available'}")
    assert "compute capability " in reason and "CMAKE_CUDA_ARCHITECTURES=" in reason
    with pytest.raises(tapewise.DeviceUnavailableError, match="compute capability .* has no kernel image"):
        tapewise.cuda()
    binary = os.environ.get("TAPEWISE_CONFORM") or shutil.which("tapewise-conform")
    if binary:  # the runner's door, where one is built beside the package
        done = subprocess.run([binary, "run", "--backend", "cuda", "--ops", "relu", "--cases", "1"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "has no kernel image" in done.stderr, done.stderr


def test_out_of_memory_is_reported_and_tape_unchanged(backend):
    tape = tapewise.Tape(backend)
    x = leaf(tape, np.ones(3))
    y = tape.exp(x)
    before = snapshot(tape)
    backend._inject_allocation_failure(1)
    with pytest.raises(tapewise.OutOfMemoryError) as info:
        tape.sin(y)
    assert info.value.code == "OutOfMemory"
    assert_unchanged(tape, before)
    backend._inject_allocation_failure(1)
    with pytest.raises(tapewise.OutOfMemoryError):
        tape.backward(y, np.ones(3))
    assert_unchanged(tape, before)
    np.testing.assert_allclose(tape.backward(y, np.ones(3)).host(x), np.exp(np.ones(3)), rtol=1e-15)


def test_bad_allocations_are_named():
    backend = tapewise.cpu()
    with pytest.raises(tapewise.InvalidShapeError):
        backend.allocate([-1], "float64")
    with pytest.raises(tapewise.DTypeMismatchError):
        backend.allocate([3], "int8")


@pytest.mark.parametrize("call", [
    lambda t, x: t.sin(True),
    lambda t, x: t.add(x, False),
    lambda t, x: t.apply("neg", [True]),
    lambda t, x: t.value(True),
    lambda t, x: t.host(False),
    lambda t, x: t.backward(True),
    lambda t, x: t.backward(x)[True],
])
def test_a_bool_is_not_a_node_id(call):
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.ones(2))
    tape.leaf(np.ones(2))
    with pytest.raises(TypeError, match="incompatible function arguments"):
        call(tape, x)
    assert len(tape) == 2


def test_numpy_integers_are_node_ids():
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.ones(2))
    assert tape.neg(np.int64(x.id)).index == 1 and tape.apply("neg", [np.uint64(int(x))]).index == 2


def test_an_oversized_copy_is_an_out_of_memory_error_with_a_code():
    tape = tapewise.Tape(tapewise.cpu())
    # 4 EiB: more than any address space, so the allocation fails whatever the overcommit policy.
    claims_4_eib = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=(2**60,), strides=(0,))
    with pytest.raises(tapewise.OutOfMemoryError) as info:
        tape.leaf(claims_4_eib, copy=True)
    assert info.value.code == "OutOfMemory" and len(tape) == 0


def test_a_failed_staged_backward_runs_the_pending_forwards_as_documented():
    backend = tapewise.cpu()
    tape = tapewise.Tape(backend)
    x = tape.leaf(np.array([0.5, 1.5]))
    y = tape.sin(tape.exp(x))
    assert tape.pending == 2
    backend._inject_allocation_failure(2)  # the seed's upload succeeds, the staged VJP's first buffer fails
    with pytest.raises(tapewise.OutOfMemoryError):
        tape.backward(y, path="staged")
    assert len(tape) == 3 and tape.pending == 0  # flushed before the failure, nothing else changed
    assert_same_bits(tape.host(y), np.sin(np.exp(np.array([0.5, 1.5]))), "y")


def test_the_docstrings_say_what_a_failed_backward_leaves_and_claim_bits_only_up_to_nan():
    stub = (Path(tapewise.__file__).parent / "_tapewise.pyi").read_text()
    for doc in (tapewise.Tape.backward.__doc__, tapewise.Tape.backward_dense.__doc__, stub):
        assert "same bits" not in doc
        assert "identical up to NaN" in doc and "`pending` is then 0" in doc
    for doc in (tapewise.Tape.__doc__, tapewise.TapewiseError.__doc__, stub):
        assert "exactly as it was" not in doc and "The tape is unchanged" not in doc
        assert "pending" in doc
