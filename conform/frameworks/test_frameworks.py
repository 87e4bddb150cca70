"""conform/frameworks/test_frameworks.py — pytest tests of the framework audit: the classifier on synthetic
values, reading and writing vectors folders, check and diff end to end on folders made by the real
`tapewise-conform vectors` (binary from $TAPEWISE_CONFORM, default build/bin/tapewise-conform), and
the PyTorch / JAX adapters where those frameworks import (skipped with the reason where not).

    python3 -m pytest -p no:cacheprovider conform/frameworks/test_frameworks.py -v
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import adapters  # noqa: E402
import classify  # noqa: E402
import diff  # noqa: E402
import forms  # noqa: E402
import suites  # noqa: E402

from classify import Point  # noqa: E402

F32, F64 = np.dtype("<f4"), np.dtype("<f8")
CONFORM = os.environ.get("TAPEWISE_CONFORM", os.path.join(REPO, "build", "bin", "tapewise-conform"))
# Ops whose outputs a framework on the CPU is expected to give bit for bit on random inputs.
EXACT_OPS = ("neg", "relu", "mul")


def f32(v):
    return np.float32(v)


def point(op, dtype=F32, g=1.0, same=False, scalars=None, **inputs):
    t = dtype.type
    with np.errstate(over="ignore"):
        return Point(op=op, dtype=dtype, inputs={k: t(v) for k, v in inputs.items()}, g=t(g), same=same,
                     scalars={k: t(v) for k, v in (scalars or {}).items()})


# --- the classifier, on synthetic values (no binary, no framework) -------------------------------------

def test_ulp_distance_orders_zeros_and_crosses_zero():
    tiny = np.nextafter(f32(0), f32(1))
    assert classify.ulp_distance(f32(0.0), f32(-0.0)) == 0
    assert classify.ulp_distance(f32(1.0), np.nextafter(f32(1), f32(2))) == 1
    assert classify.ulp_distance(-tiny, tiny) == 2
    assert classify.is_subnormal(tiny) and not classify.is_subnormal(f32(1e-30))


def test_same_value_matches_any_nan_and_distinguishes_signed_zeros():
    assert classify.same_value(f32("nan"), -f32("nan"))
    assert not classify.same_value(f32(0.0), f32(-0.0))
    assert classify.classify(point("neg", x=1.0), "dx", f32(-1), f32(-1), "jax") is None


def test_convention_at_a_kink_the_framework_documents_differently():
    p = point("abs", x=0.0, g=2.0)
    assert classify.classify(p, "dx", f32(0), f32(2), "jax")[0] == "convention"
    p = point("clamp", x=1.0, g=3.0, scalars={"lo": -1.0, "hi": 1.0})
    cls, reason = classify.classify(p, "dx", f32(0), f32(3), "torch")
    assert cls == "convention" and "closed interval" in reason
    p = point("max", a=2.0, same=True, g=2.0**-149)
    assert classify.classify(p, "da", f32(2.0**-149), f32(0), "jax")[0] == "convention"


def test_bounds_are_compared_after_rounding_the_scalars():
    # float32 lo = 1 - 2^-29 rounds to 1: x = 1 sits on the bound (in float64 it is inside)
    p = point("clamp", x=1.0, scalars={"lo": 1 - 2.0**-29, "hi": 2.0})
    assert classify.kink_of(p) == "bound"
    assert classify.kink_of(point("clamp", F64, x=1.0, scalars={"lo": 1 - 2.0**-29, "hi": 2.0})) is None


def test_a_kink_where_the_framework_agrees_is_not_the_cause():
    # torch's abs'(0) is 0 * g like the spec's: a 2 there cannot be explained by its convention
    p = point("abs", x=0.0, g=2.0)
    assert classify.classify(p, "dx", f32(0), f32(2), "torch")[0] == "unclassified"
    # JAX splits ties like the spec; a flushed subnormal half is saturation, not convention
    p = point("max", a=1.0, b=1.0, g=1.5 * 2.0**-148)
    assert classify.classify(p, "da", f32(2.0**-148), f32(0), "jax")[0] == "saturation"


def test_staging_sign_of_zero_and_few_ulps():
    assert classify.classify(point("sub", a=3.0, b=1.0, g=0.0), "db", f32(0.0), f32(-0.0), "jax")[0] == "staging"
    v = f32(0.8414709848)
    near = np.nextafter(np.nextafter(v, f32(2)), f32(2))
    assert classify.classify(point("sin", x=1.0), "y", v, near, "jax")[0] == "staging"
    assert classify.classify(point("sin", x=1.0), "y", v, f32(0.5), "jax")[0] == "unclassified"


def test_nan_inf_operands_and_upstream():
    p = point("max", a=float("nan"), b=1.0, g=2.0)
    assert classify.classify(p, "da", f32(1), f32(0), "jax") == ("nan-inf", "NaN operand or scalar")
    p = point("relu", x=2.0, g=float("inf"))
    assert classify.classify(p, "dx", f32("inf"), f32("nan"), "jax")[0] == "nan-inf"
    p = point("clamp", x=0.5, scalars={"lo": float("nan"), "hi": 1.0})
    assert classify.classify(p, "y", f32(0.5), f32("nan"), "torch")[0] == "nan-inf"


def test_saturation_subnormal_tail_and_extreme_magnitudes():
    p = point("mul", a=3.0, b=2.0, g=2.0**-149)
    assert classify.classify(p, "da", f32(2.0**-148), f32(0), "jax")[0] == "saturation"
    # the forward value ignores g: an infinite g must not make a tail difference `nan-inf`
    p = point("softplus", x=-20.0, g=float("inf"))
    assert classify.classify(p, "y", f32(0), f32(2.06e-9), "torch")[0] == "saturation"
    p = point("div", a=2.0**70, b=2.0**70)
    assert classify.classify(p, "db", f32(-2.0**-70), f32(-0.0), "jax")[0] == "saturation"


def test_missing_output_is_unclassified():
    assert classify.classify(point("neg", x=1.0), "dx", f32(-1), None, "jax")[0] == "unclassified"


def test_a_refused_overflowing_scalar_is_saturation():
    # PyTorch raises on clamp(x, -1e300, 1e300) in float32; the spec rounds the bounds to -inf, inf.
    p = point("clamp", x=5.0, scalars={"lo": -1e300, "hi": 1e300})
    p.raw_scalars = {"lo": -1e300, "hi": 1e300}
    assert classify.classify(p, "y", f32(5), None, "torch")[0] == "saturation"
    p.raw_scalars = {"lo": float("-inf"), "hi": float("inf")}
    assert classify.classify(p, "y", f32(5), None, "torch")[0] == "unclassified"


def test_framework_family():
    assert classify.framework_family("torch-compile") == "torch"
    assert classify.framework_family("jax-jit") == "jax"
    assert classify.framework_family("mlx") is None


# --- suites and the binary ------------------------------------------------------------------------------

def conform_binary():
    if not (os.path.isfile(CONFORM) and os.access(CONFORM, os.X_OK)):
        pytest.skip(f"no tapewise-conform binary at {CONFORM} (build it, or set TAPEWISE_CONFORM)")
    return CONFORM


def run_conform(*args):
    return subprocess.run([conform_binary(), *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def vectors(tmp_path_factory):
    """A small vectors folder: a few ops of every kind (exact, kinks, scalars, same, transcendental)."""
    conform_binary()
    d = str(tmp_path_factory.mktemp("vectors") / "v")
    ops = "add,sub,mul,neg,scale,abs,sqrt,clamp,max,div,relu,softplus"
    r = run_conform("vectors", d, "--cases", "64", "--ops", ops, "--dtype", "float32,float64")
    assert r.returncode == 0, r.stderr
    return d


@pytest.fixture(scope="session")
def vectors16(tmp_path_factory):
    """The same kinds of suite in bfloat16 and float16 (bfloat16's files hold its bits as '<u2'): nodes
    whose special points take no scalar beyond float16's range (which PyTorch refuses to convert)."""
    conform_binary()
    d = str(tmp_path_factory.mktemp("vectors16") / "v")
    r = run_conform("vectors", d, "--cases", "64", "--ops", "add,mul,neg,sqrt,max,relu,exp", "--dtype", "bfloat16,float16")
    assert r.returncode == 0, r.stderr
    return d


def echo_answer(vectors_dir, answered_dir):
    """An 'implementation' that writes the expected values: it must conform and show no difference."""
    suites.copy_vectors(vectors_dir, answered_dir)
    for s in suites.read_index(answered_dir)["suites"]:
        suites.write_outputs(answered_dir, s, suites.load_expected(answered_dir, s))
    suites.write_implementation(answered_dir, {"framework": "echo", "version": "1", "device": "cpu"})


def test_special_suites_map_to_rows_of_spec_special_points(vectors):
    index = suites.read_index(vectors)
    with open(os.path.join(REPO, "spec", "special_points")) as f:
        lines = f.read().splitlines()
    points = diff.special_points(vectors, index)
    assert points
    for p in points:
        row = lines[p["line"] - 1]
        assert row.startswith(f"op={p['point'].op} "), row
        assert ("dtype=f32" in row) == (p["suite"]["dtype"] == "float32")
        assert ("same=1" in row) == p["point"].same


def test_write_outputs_rejects_wrong_dtype_and_length(vectors, tmp_path):
    answered = str(tmp_path / "a")
    suites.copy_vectors(vectors, answered)
    s = next(s for s in suites.read_index(answered)["suites"] if s["dtype"] == "float32")
    bad = {n: np.zeros(s["count"], dtype=np.float64) for n in suites.output_names(s)}
    with pytest.raises(TypeError):
        suites.write_outputs(answered, s, bad)
    short = {n: np.zeros(s["count"] - 1, dtype=np.float32) for n in suites.output_names(s)}
    with pytest.raises(ValueError):
        suites.write_outputs(answered, s, short)


def test_echo_conforms_in_check_and_diff(vectors, tmp_path):
    answered = str(tmp_path / "echo")
    echo_answer(vectors, answered)
    report = str(tmp_path / "check.json")
    r = run_conform("check", answered, "--json", report)
    assert r.returncode == 0, r.stdout[-3000:]
    with open(report) as f:
        assert json.load(f)["summary"]["conforms"]
    out_json, out_md = str(tmp_path / "diff.json"), str(tmp_path / "diff.md")
    assert diff.main([vectors, answered, "--json", out_json, "--markdown", out_md, "--summary-only"]) == 0
    with open(out_json) as f:
        d = json.load(f)
    assert d["differences"] == [] and d["unclassified"] == 0
    assert d["frameworks"][0]["label"] == "echo/cpu"
    with open(out_md) as f:
        assert f.read().startswith("| node | echo/cpu matched |")


def perturb(answered_dir, op, output, change):
    """Applies change(inputs, g, value) -> new value to one output of every special point of op."""
    index = suites.read_index(answered_dir)
    for s in index["suites"]:
        if s["op"] != op or s["kind"] != "special" or output not in s["outputs"]:
            continue
        values = suites.load_outputs(answered_dir, s)
        inputs, g = suites.load_inputs(answered_dir, s)
        for i in range(s["count"]):
            values[output][i] = change({n: a[i] for n, a in zip(suites.input_names(s), inputs)}, g[i], values[output][i])
        suites.write_outputs(answered_dir, s, values)


def test_diff_classifies_perturbed_outputs_and_fails_on_unclassified(vectors, tmp_path):
    answered = str(tmp_path / "fake")
    echo_answer(vectors, answered)
    suites.write_implementation(answered, {"framework": "jax", "version": "test", "device": "cpu"})
    # JAX's abs'(±0) = +1, and a sign-flipping sub (db = -g)
    perturb(answered, "abs", "dx", lambda x, g, v: g if x["x"] == 0 and not np.isnan(g) else v)
    perturb(answered, "sub", "db", lambda x, g, v: -g)
    out_json = str(tmp_path / "d.json")
    assert diff.main([vectors, answered, "--json", out_json, "--summary-only"]) == 0
    with open(out_json) as f:
        d = json.load(f)
    by_op = {(x["op"], x["class"]) for x in d["differences"]}
    assert ("abs", "convention") in by_op and ("sub", "staging") in by_op
    assert {x["op"] for x in d["differences"]} == {"abs", "sub"}
    # a value no rule explains (1.5 times the product): the tool must exit 1
    perturb(answered, "mul", "y", lambda x, g, v: v * 1.5 if np.isfinite(v) and v != 0 else v)
    assert diff.main([vectors, answered, "--json", out_json, "--summary-only"]) == 1
    with open(out_json) as f:
        assert json.load(f)["unclassified"] > 0


def test_16bit_suites_echo_conforms_in_check_and_diff(vectors16, tmp_path):
    index = suites.read_index(vectors16)
    assert {s["dtype"] for s in index["suites"]} == {"bfloat16", "float16"}
    assert {s["dtype"] for s in index["suites"] if s.get("kind") == "special"} == {"bfloat16", "float16"}
    answered = str(tmp_path / "echo")
    echo_answer(vectors16, answered)
    bf16 = next(s for s in index["suites"] if s["dtype"] == "bfloat16")
    f16 = next(s for s in index["suites"] if s["dtype"] == "float16")
    assert suites.load_inputs(answered, bf16)[1].dtype == np.uint16  # the bits
    assert suites.load_inputs(answered, f16)[1].dtype == np.float16
    # An answer in the wrong 16-bit carrier is refused, not reinterpreted: float16 values are not bfloat16 bits.
    with pytest.raises(TypeError):
        suites.write_outputs(answered, bf16, {n: np.zeros(bf16["count"], np.float16) for n in suites.output_names(bf16)})
    r = run_conform("check", answered, "--json", str(tmp_path / "check.json"))
    assert r.returncode == 0, r.stdout[-3000:]
    out_json = str(tmp_path / "diff.json")
    assert diff.main([vectors16, answered, "--json", out_json, "--summary-only"]) == 0
    with open(out_json) as f:
        report = json.load(f)
    assert report["differences"] == [] and sum(n["points"] for n in report["nodes"]) > 0


def test_16bit_points_carry_their_values_and_ulps():
    """bfloat16 travels as the float32 values its bits widen to; its ULP is 2^16 of float32's; a scalar
    rounds through float32 (R16(R32(c))), so 1 + 2^-8 + 2^-30 is a bfloat16 tie that rounds to 1."""
    bits = np.array([0x3F80, 0x3F81, 0x8000, 0x7F80], dtype=np.uint16)
    v = diff.values(bits, "bfloat16")
    assert v.dtype == np.float32 and list(v[:2]) == [1.0, 1.0 + 2.0**-7] and np.signbit(v[2]) and np.isinf(v[3])
    assert classify.ulp_distance(v[0], v[1], "bfloat16") == 1
    assert classify.ulp_distance(np.float16(1), np.float16(1 + 2.0**-10), "float16") == 1
    assert diff.rounded_scalar(1 + 2.0**-8 + 2.0**-30, "bfloat16") == 1.0
    assert diff.rounded_scalar(1 + 2.0**-8 + 2.0**-9, "bfloat16") == 1.0 + 2.0**-7
    assert np.isinf(diff.rounded_scalar(1e5, "float16")) and diff.rounded_scalar(0.1, "float16") == np.float16(0.1)
    # Hostile scalars: NaN stays NaN, a finite double past the range is inf, -0 keeps its sign.
    assert np.isnan(diff.rounded_scalar(float("nan"), "bfloat16"))
    assert diff.rounded_scalar(1e300, "bfloat16") == np.inf and diff.rounded_scalar(-1e300, "float16") == -np.inf
    assert diff.rounded_scalar(float.fromhex("0x1.ffp127"), "bfloat16") == np.inf  # the tie above the largest: to even, inf
    assert np.signbit(diff.rounded_scalar(-0.0, "bfloat16")) and np.signbit(diff.rounded_scalar(-0.0, "float16"))


@pytest.mark.parametrize("framework", ["jax", "torch"])
def test_adapters_answer_16bit_suites_and_exact_ops_pass(vectors16, tmp_path, framework):
    pytest.importorskip(framework, reason=f"{framework} is not installed here")
    answered = str(tmp_path / framework)
    suites.copy_vectors(vectors16, answered)
    info = adapters.answer_folder(adapters.make_adapter(framework, "cpu"), answered)
    assert info["errors"] == []
    probe = info["scalar_rounding_bfloat16"]["result"]
    assert probe != "probe failed" and probe != "unexpected value", info["scalar_rounding_bfloat16"]
    if framework == "torch":  # spec/conventions.md 0.3: a Python scalar multiplies in float32, rounded once
        assert probe.startswith("not rounded first"), probe
    report_path = str(tmp_path / "check.json")
    r = run_conform("check", answered, "--json", report_path)
    assert r.returncode in (0, 1), r.stderr
    with open(report_path) as f:
        rows = {(row["op"], row["dtype"]): row for row in json.load(f)["rows"]}
    assert len(rows) == 14
    for op in EXACT_OPS:
        for dtype in ("bfloat16", "float16"):
            row = rows[(op, dtype)]
            assert row["forward"]["violations"] == 0 and row["vjp"]["violations"] == 0, (op, dtype, row["failed_checks"])
    assert diff.main([vectors16, answered, "--summary-only"]) == 0, "unclassified differences"


def test_missing_outputs_are_reported(vectors, tmp_path):
    answered = str(tmp_path / "empty")
    suites.copy_vectors(vectors, answered)
    r = run_conform("check", answered)
    assert r.returncode == 2 and "not answered" in r.stderr  # no verdict: nothing was answered
    assert diff.main([vectors, answered, "--summary-only"]) == 1


# --- the registry of framework forms (forms.py) --------------------------------------------------------

@pytest.mark.parametrize("framework", sorted(forms.REGISTRIES))
def test_forms_are_keyed_by_exactly_the_op_tables_nodes(framework):
    """Each framework's registry has a form for every node of the op table and for nothing else, so a
    new node fails here (named) before the audit or the benchmark meets it."""
    tapewise = pytest.importorskip("tapewise")
    nodes = [op["name"] for op in tapewise.op_table()]
    keys = set(forms.REGISTRIES[framework](None, None))
    assert forms.missing_forms(framework, nodes) == [], f"{framework}: no form in forms.py for these nodes"
    assert sorted(keys - set(nodes)) == [], f"{framework}: forms.py has forms for nodes the op table lacks"


def test_missing_forms_names_a_node_without_a_form():
    # A name no node will have, so that adding a node never turns this example into a real one.
    assert forms.missing_forms("torch", ["sin", "not_a_node"]) == ["not_a_node"]


# --- framework adapters (skipped where the framework does not import) ----------------------------------

def answer_and_check(vectors_dir, tmp_path, framework, device="cpu"):
    """Answers the folder with a framework, runs check --json; returns (implementation, report)."""
    answered = str(tmp_path / framework)
    suites.copy_vectors(vectors_dir, answered)
    info = adapters.answer_folder(adapters.make_adapter(framework, device), answered)
    report_path = str(tmp_path / f"{framework}.json")
    r = run_conform("check", answered, "--json", report_path)
    assert r.returncode in (0, 1), r.stderr
    assert "nodes conform" in r.stdout
    with open(report_path) as f:
        report = json.load(f)
    assert diff.main([vectors_dir, answered, "--summary-only"]) == 0, "unclassified differences"
    return info, report


def assert_exact_rows_pass(report, ops):
    rows = {(r["op"], r["dtype"]): r for r in report["rows"]}
    for op in ops:
        for dtype in ("float32", "float64"):
            r = rows[(op, dtype)]
            assert r["forward"]["violations"] == 0 and r["vjp"]["violations"] == 0, (op, dtype, r["failed_checks"])


def test_jax_adapter_answers_and_exact_ops_pass(vectors, tmp_path):
    pytest.importorskip("jax", reason="JAX is not installed (pip install jax jaxlib)")
    info, report = answer_and_check(vectors, tmp_path, "jax")
    assert info["errors"] == [] and info["framework"] == "jax" and info["version"]
    assert info["scalar_rounding"]["result"].startswith("rounded once")
    assert len(report["rows"]) == 24
    assert_exact_rows_pass(report, EXACT_OPS)


@pytest.mark.parametrize("framework,device", [("torch", "cpu"), ("torch", "cuda"), ("torch-compile", "cpu"),
                                              ("torch-compile", "cuda")])
def test_torch_adapters_answer_and_exact_ops_pass(vectors, tmp_path, framework, device):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device for PyTorch")
    info, report = answer_and_check(vectors, tmp_path, framework, device)
    if framework == "torch-compile" and info["errors"]:
        pytest.skip(f"torch.compile does not run here: {info['errors'][0]['error'][:200]}")
    # The one refusal expected: a float32 suite whose scalar lies beyond float32's range (special points
    # such as clamp's lo = -1e300), which PyTorch will not convert and diff.py classes as saturation.
    unexpected = [e for e in info["errors"]
                  if not ("_float32_" in e["suite"] and "cannot be converted to type float without overflow" in e["error"])]
    assert unexpected == []
    assert len(report["rows"]) == 24
    # abs too: PyTorch's abs'(0) is 0 * g, the spec's own multiply
    assert_exact_rows_pass(report, EXACT_OPS + ("abs",) if framework == "torch" else EXACT_OPS)
