"""conform/frameworks/classify.py — names the cause of each difference between the spec's exact value at a
special point (spec/special_points) and a framework's value: `convention`, `staging`, `saturation`,
`nan-inf`, or `unclassified` when no rule explains it. Rule-based on the values only: bit patterns,
ULP distance, finiteness, whether the point sits at a kink/tie/bound the spec names, and what each
framework documents at that kink. Needs numpy only.
"""

from dataclasses import dataclass, field

import numpy as np

CLASSES = {
    "convention": "the framework's derivative (or value) rule at a kink, tie or bound the spec names differs",
    "staging": "same math, different rounding order: finite values a few ULPs apart, or only the sign of a zero",
    "saturation": "overflow, underflow or a threshold: a saturated tail, a flushed subnormal, an intermediate out of range",
    "nan-inf": "NaN or infinity handling differs (a NaN or infinite operand or upstream g)",
    "unclassified": "no rule explains the difference",
}

STAGING_MAX_ULPS = 4  # "a few ULPs": more than this between finite values is not a rounding-order effect

UINT = {np.dtype("<f2"): np.uint16, np.dtype("<f4"): np.uint32, np.dtype("<f8"): np.uint64}
# bfloat16 has no numpy dtype: its values travel as the float32 values they widen to (exactly), and
# its ULP is 2^16 of float32's, the low half of the bits being zero.
ULP_SHIFT = {"bfloat16": 16}


@dataclass
class Point:
    """One special point: a row of spec/special_points, with its scalars already rounded to the dtype."""
    op: str
    dtype: np.dtype
    inputs: dict          # {"x": v} or {"a": v, "b": v} (only "a" when same), numpy scalars of dtype
    g: object             # numpy scalar of dtype
    scalars: dict = field(default_factory=dict)  # {name: R(value)}, numpy scalars of dtype
    raw_scalars: dict = field(default_factory=dict)  # {name: value} as the suite gives it (double)
    same: bool = False
    fmt: str = ""         # the suite's dtype name; "bfloat16" points carry float32 values


# --- bit-level helpers --------------------------------------------------------------------------------

def bits(v):
    v = np.asarray(v)
    return int(v.view(UINT[v.dtype]))


def same_value(a, b):
    """The conformance rule: equal bits, or both NaN (any NaN matches any NaN)."""
    if np.isnan(a) and np.isnan(b):
        return True
    return bits(a) == bits(b)


def ordered(v):
    """The float's position on the number line as an integer (both zeros at 0), for ULP distances."""
    v = np.asarray(v)
    width = v.dtype.itemsize * 8
    b = bits(v)
    sign = b >> (width - 1)
    magnitude = b & ((1 << (width - 1)) - 1)
    return -magnitude if sign else magnitude


def ulp_distance(a, b, fmt=""):
    """Representable values of the format between two finite floats (+0 and -0 are 0 apart)."""
    return abs(ordered(a) - ordered(b)) >> ULP_SHIFT.get(fmt, 0)


def is_subnormal(v):
    v = np.asarray(v)
    return bool(v != 0 and np.isfinite(v) and abs(v) < np.finfo(v.dtype).tiny)


def is_extreme(v):
    """A magnitude past the square root of the range (2^64 or 2^-64 in float32): a product or square of
    it overflows or underflows, so a framework's different intermediate can leave the range."""
    v = np.asarray(v)
    if not np.isfinite(v) or v == 0:
        return False
    half = (np.finfo(v.dtype).maxexp) // 2
    return bool(abs(v) >= 2.0**half or abs(v) <= 2.0**-half)


# --- what the spec names: kinks, ties, bounds, saturated tails ------------------------------------------

def kink_of(p):
    """The kink, tie or bound of spec/conventions.md the point sits at, or None."""
    x = p.inputs.get("x")
    if p.op in ("abs", "relu") and x == 0:
        return "zero"                                   # abs'(±0), relu'(±0)
    if p.op == "sqrt" and x <= 0:
        return "nonpositive"                            # sqrt at x <= 0 (selected +0, forward and VJP)
    if p.op == "clamp":
        lo, hi = p.scalars["lo"], p.scalars["hi"]
        if x == lo or x == hi:
            return "bound"                              # x on R(lo) or R(hi)
        if lo >= hi:
            return "empty"                              # lo >= hi: forward hi, gradient 0
    if p.op in ("max", "min"):
        if p.same:
            return "same"                               # op(a, a): g once
        if p.inputs["a"] == p.inputs["b"]:
            return "tie"                                # a == b (+0 vs -0 included): g * 0.5 each
    return None


KINK_TEXT = {
    ("abs", "zero"): "abs'(±0)",
    ("relu", "zero"): "relu'(±0)",
    ("sqrt", "nonpositive"): "sqrt at x <= 0",
    ("clamp", "bound"): "clamp' at x = lo or hi",
    ("clamp", "empty"): "clamp with lo >= hi",
    ("max", "same"): "max(a, a)", ("min", "same"): "min(a, a)",
    ("max", "tie"): "max tie a == b", ("min", "tie"): "min tie a == b",
}

# What each framework documents at the spec's kinks: (agrees with the spec there, the framework's rule).
# Where it agrees, the kink cannot be the cause of a difference and the other rules decide.
FRAMEWORK_KINKS = {
    "torch": {
        ("abs", "zero"): (True, "grad * sgn(x): 0 * g, as the spec"),
        ("relu", "zero"): (True, "threshold_backward: 0 where x <= 0"),
        ("sqrt", "nonpositive"): (False, "grad / (2 * sqrt(x)): inf at 0, NaN below (derivative by continuity)"),
        ("clamp", "bound"): (False, "clamp_backward passes g on the closed interval lo <= x <= hi"),
        ("clamp", "empty"): (True, "forward max, gradient 0"),
        ("max", "tie"): (True, "g / 2 to each side (pytorch#56734)"), ("min", "tie"): (True, "g / 2 to each side"),
        ("max", "same"): (False, "g/2 + g/2 accumulated, not g once"), ("min", "same"): (False, "g/2 + g/2 accumulated"),
    },
    "jax": {
        ("abs", "zero"): (False, "select(x >= 0, g, -g): abs'(±0) = +1"),
        ("relu", "zero"): (True, "custom JVP select(x > 0, g, 0)"),
        ("sqrt", "nonpositive"): (False, "g * 0.5 / sqrt(x): inf at 0, NaN below"),
        ("clamp", "bound"): (False, "jnp.clip = minimum(maximum(x, lo), hi): ties split, g/2 at a bound"),
        ("clamp", "empty"): (True, "minimum(maximum(x, lo), hi): hi, gradient 0"),
        ("max", "tie"): (True, "g / 2 to each side (_balanced_eq)"), ("min", "tie"): (True, "g / 2 to each side"),
        ("max", "same"): (False, "g/2 + g/2 accumulated, not g once"), ("min", "same"): (False, "g/2 + g/2 accumulated"),
    },
}


def framework_family(name):
    """torch-compile is PyTorch's autograd formulas compiled; jax-jit is JAX's under XLA fusion."""
    for family in FRAMEWORK_KINKS:
        if name == family or name.startswith(family + "-"):
            return family
    return None


# |x| beyond which the spec's staging is saturated (1 + exp(-|x|) rounds to 1, tanh rounds to ±1, exp
# over/underflows), per dtype; the frameworks use other formulas (log1p, logaddexp, a threshold of 20)
# that saturate elsewhere. The 16-bit formats saturate early: 1 + e rounds to 1 once e <= 2^-8
# (bfloat16) or 2^-11 (float16), |x| >= 5.55 or 7.62; tanh rounds to ±1 from 3.47 or 4.51; float16's
# exp overflows past 11.09.
SATURATING = {"softplus": "logistic", "safeLog": "logistic", "sigmoid": "logistic", "silu": "logistic",
              "tanh": "tanh", "gelu": "tanh", "exp": "exp"}
TAIL_LIMITS = {  # float32, float64, bfloat16, float16
    "logistic": {"float32": 15.0, "float64": 35.0, "bfloat16": 5.5, "float16": 7.5},
    "tanh": {"float32": 9.0, "float64": 19.0, "bfloat16": 3.4, "float16": 4.4},
    "exp": {"float32": 87.0, "float64": 708.0, "bfloat16": 87.0, "float16": 11.0},
}
TAIL_TEXT = {
    "softplus": "the spec's log(1 + exp(-|x|)) is exactly 0 or x past its dtype's limit (|x| ~ 16.6 in f32, 36.7 "
                "in f64); log1p, logaddexp and PyTorch's threshold 20 are not",
    "safeLog": "softplus saturates (exactly 0 below its dtype's limit), so R(eps) alone decides",
    "sigmoid": "sigmoid saturates to 0 or 1; 1 - y cancels",
    "silu": "sigmoid saturates to 0 or 1",
    "tanh": "tanh saturates to ±1; 1 - y*y cancels",
    "gelu": "tanh saturates to ±1; the cubic term may overflow",
    "exp": "exp overflows to inf or underflows to 0",
}


def dtype_name_of(p):
    return p.fmt or {np.dtype("<f4"): "float32", np.dtype("<f8"): "float64", np.dtype("<f2"): "float16"}[p.dtype]


def tail_of(p):
    kind = SATURATING.get(p.op)
    x = p.inputs.get("x")
    if kind is None or x is None or not np.isfinite(x):
        return None
    return TAIL_TEXT[p.op] if abs(x) >= TAIL_LIMITS[kind][dtype_name_of(p)] else None


# --- the classifier ---------------------------------------------------------------------------------------

def operands(p):
    """The node's operands and its (rounded) scalars, the values a NaN or infinity can come from."""
    return list(p.inputs.values()) + list(p.scalars.values())


def overflowing_scalar(p):
    """A finite scalar that rounding to the dtype makes infinite (e.g. clamp's lo = -1e300 in float32)."""
    return any(np.isfinite(raw) and np.isinf(p.scalars[name]) for name, raw in p.raw_scalars.items())


def classify(p, output, spec, got, framework):
    """(class, reason) for one output of one point, or None where the values agree bit for bit.

    The rules run in order; the first that applies names the cause. g only counts for a gradient
    output (the forward value does not depend on it). `got` is None when the framework wrote no value
    (reported as unclassified)."""
    if got is None:
        if overflowing_scalar(p):
            return "saturation", ("the framework refuses a scalar beyond the dtype's range (PyTorch: 'value cannot "
                                  "be converted to type float without overflow'), which the spec rounds once to ±inf")
        return "unclassified", "no output written"
    if same_value(spec, got):
        return None
    ops = operands(p)
    upstream = [] if output == "y" else [p.g]
    if any(np.isnan(v) for v in ops):
        return "nan-inf", "NaN operand or scalar"
    kink = kink_of(p)
    if kink is not None:
        rule = FRAMEWORK_KINKS.get(framework_family(framework), {}).get((p.op, kink))
        if rule is None or not rule[0]:
            return "convention", KINK_TEXT[(p.op, kink)] + (": " + rule[1] if rule else "")
    if spec == 0 and got == 0:
        return "staging", "sign of a zero result ((+0) - g vs -g, select vs mask multiply, order of a product)"
    if any(np.isinf(v) for v in ops):
        return "nan-inf", "infinite operand or scalar"
    if any(not np.isfinite(v) for v in upstream):
        return "nan-inf", "NaN or infinite upstream g"
    if any(is_subnormal(v) for v in [*ops, *upstream, spec, got]):
        return "saturation", "subnormal operand or result (flushed to zero, FTZ/DAZ)"
    if np.isfinite(spec) and np.isfinite(got) and ulp_distance(spec, got, p.fmt) <= STAGING_MAX_ULPS:
        return "staging", f"finite, at most {STAGING_MAX_ULPS} ULP apart (rounding order)"
    tail = tail_of(p)
    if tail:
        return "saturation", f"{p.op} tail: {tail}"
    if any(is_extreme(v) for v in [*ops, *upstream]):
        return "saturation", "extreme magnitude: a framework intermediate (b*b, x**-2, ...) over/underflows"
    if not (np.isfinite(spec) and np.isfinite(got)) and any(v == 0 for v in [*ops, *upstream]):
        return "nan-inf", "x/0 or 0*inf from a zero operand, produced by a different staging"
    return "unclassified", "no rule explains it"
