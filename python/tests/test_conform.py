"""tapewise.conform: answering a vectors folder with a Python callable (and with tapewise itself), and
driving the tapewise-conform CLI where it is found ($TAPEWISE_CONFORM or PATH)."""

import json

import numpy as np
import pytest

import tapewise
import tapewise.conform as conform
from conftest import assert_same_bits, conform_binary


def write_suite(root, suite_id, op, dtype, inputs, g, scalars=None, same=False):
    """One suite in the layout of `tapewise-conform vectors` (README, "Vectors layout")."""
    folder = root / suite_id
    folder.mkdir()
    files = {}
    for name, values in list(inputs.items()) + [("g", g)]:
        np.save(folder / f"{name}.npy", np.asarray(values, dtype=dtype))
        files[name] = f"{name}.npy"
    grads = ["da"] if same else (["dx"] if "x" in inputs else ["da", "db"])
    outputs = {name: f"out_{name}.npy" for name in ["y"] + grads}
    return {"id": suite_id, "op": op, "dtype": dtype, "kind": "random", "grading": "reference",
            "scalars": scalars or {}, "same": same, "count": len(g), "inputs": files,
            "expected": {n: f"expected_{n}.npy" for n in outputs}, "outputs": outputs}


@pytest.fixture
def vectors(tmp_path):
    suites = [
        write_suite(tmp_path, "clamp_float64_random0", "clamp", "float64", {"x": [-2.0, 0.25, 3.0]}, [1.0, 2.0, 3.0],
                    {"lo": -1.0, "hi": "inf"}),
        write_suite(tmp_path, "max_float32_random0", "max", "float32", {"a": [1.0, 2.0], "b": [1.0, -1.0]}, [2.0, 1.0]),
        write_suite(tmp_path, "max_float32_special0", "max", "float32", {"a": [1.0, -3.0]}, [2.0**-149, 1.0],
                    same=True),
    ]
    index = {"schema": conform.VECTORS_SCHEMA, "seed": 1, "cases": 3, "suites": suites}
    (tmp_path / "index.json").write_text(json.dumps(index))
    return tmp_path


def test_answer_vectors_with_a_python_callable(vectors):
    seen = []

    def numpy_answer(op, inputs, g, scalars, same):
        seen.append((op, sorted(inputs), same, dict(scalars)))
        if op == "clamp":
            x = inputs["x"]
            return {"y": np.clip(x, scalars["lo"], scalars["hi"]),
                    "dx": np.where((scalars["lo"] < x) & (x < scalars["hi"]), g, 0.0)}
        raise NotImplementedError(op)

    summary = conform.answer_vectors(str(vectors), numpy_answer)
    assert summary["suites"] == 3 and summary["answered"] == 1 and len(summary["errors"]) == 2
    assert ("clamp", ["x"], False, {"lo": -1.0, "hi": float("inf")}) in seen
    assert ("max", ["a"], True, {}) in seen
    np.testing.assert_array_equal(np.load(vectors / "clamp_float64_random0" / "out_dx.npy"), [0.0, 2.0, 3.0])
    assert not (vectors / "max_float32_random0" / "out_y.npy").exists()


def test_answers_in_the_wrong_dtype_are_errors(vectors):
    summary = conform.answer_vectors(str(vectors), lambda op, inputs, g, s, same: {
        "y": g.astype(np.float16), "dx": g, "da": g, "db": g})
    assert summary["answered"] == 0
    assert all("TypeError" in e["error"] for e in summary["errors"])


def test_tapewise_answer(vectors):
    summary = conform.answer_vectors(str(vectors), conform.tapewise_answer(tapewise.cpu()))
    assert summary["errors"] == [] and summary["answered"] == 3
    folder = vectors / "max_float32_random0"
    np.testing.assert_array_equal(np.load(folder / "out_y.npy"), np.float32([1.0, 2.0]))
    np.testing.assert_array_equal(np.load(folder / "out_da.npy"), np.float32([1.0, 1.0]))  # tie: g/2
    np.testing.assert_array_equal(np.load(folder / "out_db.npy"), np.float32([1.0, 0.0]))
    same = vectors / "max_float32_special0"
    assert_same_bits(np.load(same / "out_da.npy"), np.float32([2.0**-149, 1.0]), "max(a, a) contributes g once")
    clamp = vectors / "clamp_float64_random0"
    np.testing.assert_array_equal(np.load(clamp / "out_dx.npy"), [0.0, 2.0, 3.0])


def test_missing_binary_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("TAPEWISE_CONFORM", raising=False)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(conform.ConformError, match="tapewise-conform not found"):
        conform.find_binary()


def _binary():
    return conform_binary()


def test_run_returns_the_json_report():
    report = conform.run(ops=["max", "clamp"], dtype="float32", backend="cpu", cases=200, seed=3, binary=_binary())
    assert report["schema"] == "tapewise-conform.report/1" and report["command"] == "run"
    assert {row["op"] for row in report["rows"]} == {"max", "clamp"}
    assert report["summary"]["conforms"] is True


def test_usage_errors_raise_with_stderr():
    with pytest.raises(conform.ConformError) as info:
        conform.run(ops=["tan"], binary=_binary())
    assert info.value.stderr


def test_vectors_answered_by_tapewise_conform(tmp_path):
    binary = _binary()
    folder = str(tmp_path / "vec")
    conform.export_vectors(folder, ops=["div", "max", "safeLog"], dtype="float32", cases=100, seed=9, binary=binary)
    summary = conform.answer_vectors(folder, conform.tapewise_answer(tapewise.cpu()))
    assert summary["errors"] == []
    report = conform.check(folder, binary=binary)
    assert report["summary"]["conforms"] is True, report["summary"]


def test_check_graph_grades_a_composite_and_rejects_a_bad_one():
    binary = _binary()
    graph = {"schema": "tapewise-conform.graph/1", "dtype": "float64",
             "leaves": [{"name": "x", "values": [-1.5, 0.0, 2.0]}, {"name": "y", "values": [0.5, 0.0, -3.0]}],
             "nodes": [{"name": "m", "op": "max", "parents": ["x", "y"]},
                       {"name": "s", "op": "safeLog", "parents": ["m"], "scalars": {"eps": 1e-6}}],
             "output": "s", "seed": [1.0, -1.0, 0.5]}
    report = conform.check_graph(graph, backend="cpu", binary=binary)
    assert report["schema"] == "tapewise-conform.graph-report/1"
    assert report["summary"]["passes"] is True, report["summary"]
    graph["nodes"][0]["op"] = "maximum"
    with pytest.raises(conform.ConformError) as info:
        conform.check_graph(graph, backend="cpu", binary=binary)
    assert "maximum" in info.value.stderr
