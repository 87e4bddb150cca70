"""Shared fixtures of the Python tests: the backends to run on (CPU always, CUDA where a device
opens), the op table (tapewise.op_table(), spec/ops.def: scalars, kinks, input classes per node), the
tapewise-conform binary, and bit-comparison helpers. No per-node value or formula is written here."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import tapewise

# The numpy dtypes tapewise takes (numpy has no bfloat16: the torch tests cover it).
DTYPES = [np.float32, np.float64, np.float16]
DTYPE_IDS = [np.dtype(d).name for d in DTYPES]

TABLE = {row["name"]: row for row in tapewise.op_table()}
ARITY = {name: row["arity"] for name, row in TABLE.items()}
# The node's first run set (what the runner uses first), as positional arguments after the inputs.
SCALARS = {name: list(row["run_scalars"][0].values()) for name, row in TABLE.items() if row["scalars"]}
# Nodes undefined or singular at and below 0 (the benchmarks' positive inputs): tests draw |x| for them.
POSITIVE = {name for name, row in TABLE.items() if row["bench_inputs"] == "positive"}


def conform_binary() -> str:
    """The tapewise-conform the tests drive: $TAPEWISE_CONFORM, else the one on PATH; the tests that
    need it skip, saying so, where there is none (tools/test.sh sets TAPEWISE_CONFORM)."""
    binary = os.environ.get("TAPEWISE_CONFORM") or shutil.which("tapewise-conform")
    if not binary:
        pytest.skip("tapewise-conform not found (set TAPEWISE_CONFORM=build/bin/tapewise-conform)")
    return binary


def _backend_params():
    params = [pytest.param("cpu", id="cpu")]
    reason = tapewise.cuda_unavailable_reason() or "CUDA available"
    params.append(pytest.param("cuda", id="cuda",
                               marks=pytest.mark.skipif(not tapewise.cuda_available(), reason=f"no CUDA: {reason}")))
    return params


@pytest.fixture(params=_backend_params())
def backend(request):
    """A fresh backend of each available kind."""
    return tapewise.cpu() if request.param == "cpu" else tapewise.cuda()


@pytest.fixture
def cuda_backend():
    if not tapewise.cuda_available():
        pytest.skip(f"no CUDA: {tapewise.cuda_unavailable_reason()}")
    return tapewise.cuda()


def leaf(tape, array, requires_grad=True):
    """A leaf from a host array on any backend (copied into a CUDA backend)."""
    return tape.leaf(array, requires_grad=requires_grad, copy=tape.backend.kind == "cuda")


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bit patterns of a float array (for bit-for-bit comparisons, -0 and NaN included)."""
    a = np.ascontiguousarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def assert_same_bits(x: np.ndarray, y: np.ndarray, what: str = "") -> None:
    x, y = np.asarray(x), np.asarray(y)
    assert x.dtype == y.dtype and x.shape == y.shape, f"{what}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
    diff = np.nonzero(bits(x) != bits(y))[0]
    assert diff.size == 0, f"{what}: {diff.size} elements differ, first at {diff[0]}: {x.flat[diff[0]]!r} vs {y.flat[diff[0]]!r}"


def node_inputs(name: str, dtype, rng, n):
    """Inputs (a list of 1 or 2 arrays) and g for a node: n random points (|x| for the nodes in
    POSITIVE), with its kink mixed in (spec/ops.def): ±0 (zero), ties and ±0 against ∓0 (tie)."""
    def draw():
        v = rng.standard_normal(n) * 4.0
        if name in POSITIVE:
            v = np.abs(v)
        return v.astype(dtype)
    inputs = [draw() for _ in range(ARITY[name])]
    kink = TABLE[name]["kink"]
    if kink == "zero":
        inputs[0][::7] = 0.0
        inputs[0][3::7] = -0.0
    if kink == "tie":
        inputs[1][::5] = inputs[0][::5]
        inputs[0][1::7] = 0.0
        inputs[1][1::7] = -0.0
    return inputs, (rng.standard_normal(n) * 2.0).astype(dtype)


def torch_bits(t):
    """The raw bit patterns of a torch float tensor (any dtype, bfloat16 included) as a contiguous CPU
    integer tensor of the same width."""
    import torch
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.detach().cpu().contiguous().view(ints)


def assert_same_torch_bits(x, y, what: str = "", nan_matches_nan: bool = False) -> None:
    """Bit-for-bit equality of two torch tensors of one dtype and shape; with nan_matches_nan, a NaN
    matches any NaN (a copy or an arithmetic path may change a NaN's payload or sign)."""
    assert x.dtype == y.dtype and x.shape == y.shape, f"{what}: {x.dtype}{tuple(x.shape)} vs {y.dtype}{tuple(y.shape)}"
    differ = torch_bits(x) != torch_bits(y)
    if nan_matches_nan:
        differ &= ~(x.detach().cpu().isnan() & y.detach().cpu().isnan())
    where = differ.nonzero().flatten()
    assert where.numel() == 0, (f"{what}: {where.numel()} elements differ, first at {int(where[0])}: "
                                f"{x.flatten()[where[0]].item()!r} vs {y.flatten()[where[0]].item()!r}")
