"""Shared fixtures of the Python tests: the backends to run on (CPU always, CUDA where a device
opens), an independent numpy oracle of every node at easy points, and bit-comparison helpers."""

from __future__ import annotations

import numpy as np
import pytest

import tapewise

DTYPES = [np.float32, np.float64]

# Easy points: away from kinks and ties, inside every node's domain (log and sqrt get |x|).
X_EASY = np.array([0.3, 0.7, 1.3, -0.4, -1.1, 2.2])
A_EASY = np.array([0.5, -1.25, 2.0, 3.0, -0.3, 1.1])
B_EASY = np.array([1.5, 0.75, -0.5, 2.5, -0.7, 1.9])
G_EASY = np.array([1.0, -0.5, 2.0, 0.25, 1.5, -3.0])
SCALARS = {"scale": [1.75], "clamp": [-0.5, 1.0], "safeLog": [1e-3]}
POSITIVE_ONLY = {"log", "sqrt"}

GELU_C, GELU_K = 0.044715, 0.79788456080286535588


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(GELU_K * (x + GELU_C * x**3)))


def _gelu_grad(x):
    t = np.tanh(GELU_K * (x + GELU_C * x**3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_C * x * x)


# name -> (forward, vjp) in float64 math, written from the node definitions (spec/conventions.md), not
# from tapewise's staging: unary f(x, *s) / vjp(x, g, *s) -> dx; binary f(a, b) / vjp(a, b, g) -> (da, db).
ORACLE = {
    "add": (lambda a, b: a + b, lambda a, b, g: (g, g)),
    "sub": (lambda a, b: a - b, lambda a, b, g: (g, -g)),
    "mul": (lambda a, b: a * b, lambda a, b, g: (g * b, g * a)),
    "max": (np.maximum, lambda a, b, g: (np.where(a > b, g, 0.0), np.where(b > a, g, 0.0))),
    "min": (np.minimum, lambda a, b, g: (np.where(a < b, g, 0.0), np.where(b < a, g, 0.0))),
    "div": (lambda a, b: a / b, lambda a, b, g: (g / b, -g * a / (b * b))),
    "neg": (lambda x: -x, lambda x, g: -g),
    "scale": (lambda x, c: x * c, lambda x, g, c: g * c),
    "abs": (np.abs, lambda x, g: np.sign(x) * g),
    "sqrt": (np.sqrt, lambda x, g: g / (2.0 * np.sqrt(x))),
    "clamp": (lambda x, lo, hi: np.clip(x, lo, hi), lambda x, g, lo, hi: np.where((lo < x) & (x < hi), g, 0.0)),
    "relu": (lambda x: np.maximum(x, 0.0), lambda x, g: np.where(x > 0, g, 0.0)),
    "exp": (np.exp, lambda x, g: g * np.exp(x)),
    "sin": (np.sin, lambda x, g: g * np.cos(x)),
    "cos": (np.cos, lambda x, g: -g * np.sin(x)),
    "log": (np.log, lambda x, g: g / x),
    "inv": (lambda x: 1.0 / x, lambda x, g: -g / (x * x)),
    "safeLog": (lambda x, eps: np.log(_softplus(x) + eps), lambda x, g, eps: g * _sigmoid(x) / (_softplus(x) + eps)),
    "sigmoid": (_sigmoid, lambda x, g: g * _sigmoid(x) * (1.0 - _sigmoid(x))),
    "tanh": (np.tanh, lambda x, g: g * (1.0 - np.tanh(x) ** 2)),
    "silu": (lambda x: x * _sigmoid(x), lambda x, g: g * (_sigmoid(x) + x * _sigmoid(x) * (1.0 - _sigmoid(x)))),
    "gelu": (_gelu, lambda x, g: g * _gelu_grad(x)),
    "softplus": (_softplus, lambda x, g: g * _sigmoid(x)),
}
ARITY = {name: arity for name, arity, _ in tapewise.ops()}


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
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def assert_same_bits(x: np.ndarray, y: np.ndarray, what: str = "") -> None:
    x, y = np.asarray(x), np.asarray(y)
    assert x.dtype == y.dtype and x.shape == y.shape, f"{what}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
    diff = np.nonzero(bits(x) != bits(y))[0]
    assert diff.size == 0, f"{what}: {diff.size} elements differ, first at {diff[0]}: {x.flat[diff[0]]!r} vs {y.flat[diff[0]]!r}"


def node_inputs(name: str, dtype, rng=None, n=None):
    """Inputs (a list of 1 or 2 arrays) and g for a node: the easy points, or n random points in its
    domain when rng is given (with ties for max/min and zeros of both signs mixed in)."""
    if rng is None:
        x = np.abs(X_EASY) if name in POSITIVE_ONLY else X_EASY
        inputs = [A_EASY, B_EASY] if ARITY[name] == 2 else [x]
        return [np.asarray(v, dtype=dtype) for v in inputs], np.asarray(G_EASY, dtype=dtype)
    def draw():
        v = rng.standard_normal(n) * 4.0
        if name in POSITIVE_ONLY:
            v = np.abs(v)
        return v.astype(dtype)
    inputs = [draw() for _ in range(ARITY[name])]
    if ARITY[name] == 2:
        inputs[1][::5] = inputs[0][::5]  # ties
        inputs[0][1::7] = 0.0
        inputs[1][1::7] = -0.0
        if name == "div":
            inputs[1][inputs[1] == 0] = 1.5
    return inputs, (rng.standard_normal(n) * 2.0).astype(dtype)
