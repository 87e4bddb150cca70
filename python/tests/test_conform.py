"""tapewise.conform: answering a vectors folder with a Python callable (and with tapewise itself), and
driving the tapewise-conform CLI where it is found ($TAPEWISE_CONFORM or PATH)."""

import json
import subprocess

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


def test_16bit_vectors_float16_answered_by_tapewise_bfloat16_as_bits(tmp_path):
    binary = _binary()
    folder = str(tmp_path / "f16")
    conform.export_vectors(folder, ops=["mul", "sin", "max"], dtype="float16", cases=100, seed=4, binary=binary)
    summary = conform.answer_vectors(folder, conform.tapewise_answer(tapewise.cpu()))
    assert summary["errors"] == [] and summary["answered"] == summary["suites"] > 0
    assert conform.check(folder, binary=binary)["summary"]["conforms"] is True
    # bfloat16 suites hand their arrays over as uint16 bits, and take them back so.
    folder = str(tmp_path / "bf16")
    conform.export_vectors(folder, ops=["mul"], dtype="bfloat16", cases=20, seed=4, binary=binary)
    seen = []
    def expected_answer(op, inputs, g, scalars, same):
        seen.append(g.dtype)
        raise ValueError("not answered")
    conform.answer_vectors(folder, expected_answer)
    assert seen and set(seen) == {np.dtype("<u2")}


def test_the_docstring_example_answers_every_node_in_every_dtype(tmp_path):
    """tapewise.conform's own example, on a folder of every node and dtype (bfloat16 included, whose
    arrays are uint16 bits): every suite answered by tapewise, and check finds every node conforming."""
    binary = _binary()
    folder = str(tmp_path / "vec")
    conform.export_vectors(folder, cases=8, seed=11, binary=binary)
    answered = conform.answer_vectors(folder, conform.tapewise_answer(tapewise.cpu()))
    assert answered["errors"] == [] and answered["answered"] == answered["suites"]
    summary = conform.check(folder, binary=binary)["summary"]
    assert summary["line"] == f"{len(tapewise.ops())}/{len(tapewise.ops())} nodes conform", summary
    assert summary["rows"] == 4 * len(tapewise.ops()) and summary["rows_without_verdict"] == 0


def test_bfloat16_answers_are_the_tapes_bits(tmp_path):
    """A bfloat16 suite answered by tapewise_answer holds the bits `tapewise-conform eval --dtype
    bfloat16` writes for the same inputs (ties and a NaN included)."""
    binary = _binary()
    folder = tmp_path / "bf16"
    conform.export_vectors(str(folder), ops=["div", "max"], dtype="bfloat16", cases=50, seed=2, binary=binary)
    assert conform.answer_vectors(str(folder), conform.tapewise_answer(tapewise.cpu()))["errors"] == []
    for suite in json.loads((folder / "index.json").read_text())["suites"]:
        where = folder / suite["id"]
        args = [binary, "eval", suite["op"], "--backend", "cpu", "--dtype", "bfloat16", "--out", str(where),
                "--prefix", "eval_", "--g", str(where / "g.npy")]
        args += ["--a", str(where / "a.npy")] + (["--same"] if suite["same"] else ["--b", str(where / "b.npy")])
        subprocess.run(args, check=True, capture_output=True)
        for name in suite["outputs"]:
            ours, theirs = np.load(where / f"out_{name}.npy"), np.load(where / f"eval_{name}.npy")
            assert ours.dtype == np.uint16 and np.array_equal(ours, theirs), (suite["id"], name)


def test_check_of_a_folder_left_unanswered_raises_no_verdict(tmp_path):
    """Suites a callable did not answer are no verdict (exit 2, ConformError naming them), not a
    violation reported as "0/N nodes conform"."""
    binary = _binary()
    folder = str(tmp_path / "vec")
    conform.export_vectors(folder, ops=["relu"], dtype="float32,bfloat16", cases=8, seed=3, binary=binary)
    only_float32 = conform.tapewise_answer(tapewise.cpu())

    def float32_only(op, inputs, g, scalars, same):
        if g.dtype != np.float32:
            raise NotImplementedError("float32 only")
        return only_float32(op, inputs, g, scalars, same)

    answered = conform.answer_vectors(folder, float32_only)
    assert answered["errors"] and answered["answered"] < answered["suites"]
    with pytest.raises(conform.ConformError) as info:
        conform.check(folder, binary=binary)
    assert "no verdict: relu bfloat16: not answered: no out_*.npy in relu_bfloat16_random0" in info.value.stderr


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


# A vectors folder is another implementation's, possibly hostile: answer_vectors reads it by the
# runner's rule (schema file names, plain ids, every path inside) and touches nothing outside it.

def hostile_folder(tmp_path, edit):
    """tmp_path/vec holding one valid sin suite, edited by edit(suite, root) before index.json is
    written, and tmp_path/victim.npy, a file outside that no answer may touch."""
    root = tmp_path / "vec"
    root.mkdir()
    suite = write_suite(root, "sin_float64_random0", "sin", "float64", {"x": [0.5, 1.0]}, [1.0, 1.0])
    victim = tmp_path / "victim.npy"
    np.save(victim, np.float64([7.0]))
    edit(suite, root, tmp_path)
    (root / "index.json").write_text(json.dumps({"schema": conform.VECTORS_SCHEMA, "seed": 1, "cases": 2,
                                                 "suites": [suite]}))
    return root, victim


def answer_with_numpy(op, inputs, g, scalars, same):
    return {"y": np.sin(inputs["x"]), "dx": np.cos(inputs["x"]) * g}


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("name", ["../../victim.npy", "VICTIM_ABSOLUTE", "out_y.npy/../../../victim.npy"])
def test_outputs_that_leave_the_folder_are_refused_and_nothing_is_deleted(tmp_path, name):
    def edit(suite, root, outside):
        suite["outputs"]["y"] = str(outside / "victim.npy") if name == "VICTIM_ABSOLUTE" else name
    root, victim = hostile_folder(tmp_path, edit)
    before = victim.read_bytes()
    with pytest.raises(conform.VectorsIndexError, match=r"suites\[0\] \(id 'sin_float64_random0'\): 'outputs'"):
        conform.answer_vectors(str(root), answer_with_numpy)
    assert victim.read_bytes() == before


@pytest.mark.parametrize("field", ["inputs", "expected"])
def test_files_other_than_the_schemas_names_are_refused(tmp_path, field):
    def edit(suite, root, outside):
        suite[field]["x" if field == "inputs" else "y"] = str(outside / "victim.npy")
    root, _ = hostile_folder(tmp_path, edit)
    with pytest.raises(conform.VectorsIndexError, match=f"'{field}' must name exactly"):
        conform.answer_vectors(str(root), answer_with_numpy)


def test_a_suite_id_that_leaves_the_folder_is_refused(tmp_path):
    def edit(suite, root, outside):
        (root / suite["id"]).rename(outside / "elsewhere")  # a real suite folder, outside
        suite["id"] = "../elsewhere"
    root, _ = hostile_folder(tmp_path, edit)
    with pytest.raises(conform.VectorsIndexError, match="'id' '../elsewhere' is not a plain folder name"):
        conform.answer_vectors(str(root), answer_with_numpy)
    assert files_under(tmp_path / "elsewhere") == ["g.npy", "x.npy"]  # no out_*.npy written there


def test_a_suite_folder_linked_outside_is_refused(tmp_path):
    def edit(suite, root, outside):
        (root / suite["id"]).rename(outside / "elsewhere")
        (root / suite["id"]).symlink_to(outside / "elsewhere")
    root, _ = hostile_folder(tmp_path, edit)
    with pytest.raises(conform.VectorsIndexError, match="'id': .* leads outside"):
        conform.answer_vectors(str(root), answer_with_numpy)
    assert files_under(tmp_path / "elsewhere") == ["g.npy", "x.npy"]


def test_an_input_linked_outside_is_refused(tmp_path):
    def edit(suite, root, outside):
        x = root / suite["id"] / "x.npy"
        x.unlink()
        np.save(outside / "secret.npy", np.float64([0.25, 0.5]))
        x.symlink_to(outside / "secret.npy")
    root, _ = hostile_folder(tmp_path, edit)
    with pytest.raises(conform.VectorsIndexError, match="'inputs': .* leads outside"):
        conform.answer_vectors(str(root), answer_with_numpy)


def test_an_input_linked_inside_its_suite_folder_is_read(tmp_path):
    def edit(suite, root, outside):
        folder = root / suite["id"]
        (folder / "x.npy").rename(folder / "x_values.npy")
        (folder / "x.npy").symlink_to("x_values.npy")
    root, _ = hostile_folder(tmp_path, edit)
    assert conform.answer_vectors(str(root), answer_with_numpy)["errors"] == []


def test_an_output_that_is_a_symbolic_link_is_never_written_through(tmp_path):
    def edit(suite, root, outside):
        (root / suite["id"] / "out_y.npy").symlink_to(outside / "victim.npy")
    root, victim = hostile_folder(tmp_path, edit)
    before = victim.read_bytes()
    with pytest.raises(conform.VectorsIndexError, match="'outputs': .*out_y.npy is a symbolic link"):
        conform.answer_vectors(str(root), answer_with_numpy)
    assert victim.read_bytes() == before and (root / "sin_float64_random0" / "out_y.npy").is_symlink()


def test_an_absurdly_nested_index_is_a_clear_error(tmp_path):
    depth = 200_000
    (tmp_path / "index.json").write_text('{"schema": "%s", "suites": %s%s}' % (
        conform.VECTORS_SCHEMA, "[" * depth, "]" * depth))
    with pytest.raises(conform.VectorsIndexError, match="nested too deeply"):
        conform.answer_vectors(str(tmp_path), answer_with_numpy)


def test_answers_are_written_whole_or_not_at_all(tmp_path):
    from tapewise._files import write_file
    path = tmp_path / "out_y.npy"
    path.write_bytes(b"the previous answer")

    def interrupted(f):
        f.write(b"half an ans")
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        write_file(str(path), interrupted)
    assert path.read_bytes() == b"the previous answer" and files_under(tmp_path) == ["out_y.npy"]
    write_file(str(path), lambda f: f.write(b"the new answer"))
    assert path.read_bytes() == b"the new answer" and files_under(tmp_path) == ["out_y.npy"]


def test_the_writer_refuses_a_symbolic_link(tmp_path):
    from tapewise._files import write_file
    target = tmp_path / "target"
    target.write_bytes(b"kept")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(ValueError, match="symbolic link"):
        write_file(str(tmp_path / "link"), lambda f: f.write(b"lost"))
    assert target.read_bytes() == b"kept"


@pytest.fixture
def recorded_cli(monkeypatch):
    """Replaces the runner: records each command line and writes an empty report where asked."""
    calls = []

    def fake_run_cli(binary, args):
        calls.append(args)
        if "--json" in args:
            with open(args[args.index("--json") + 1], "w") as f:
                f.write("{}")
    monkeypatch.setattr(conform, "_run_cli", fake_run_cli)
    return calls


@pytest.mark.parametrize("ops, expected", [("sin", "sin"), ("max,div", "max,div"), (["max", "div"], "max,div"),
                                           (("sin",), "sin")])
def test_ops_as_a_str_is_one_name_or_a_comma_list(recorded_cli, tmp_path, ops, expected):
    conform.run(ops=ops)
    conform.export_vectors(str(tmp_path / "vec"), ops=ops)
    for args in recorded_cli:
        assert args[args.index("--ops") + 1] == expected


def test_ops_of_non_strings_and_extra_args_as_a_str_are_type_errors(recorded_cli, tmp_path):
    with pytest.raises(TypeError, match="ops"):
        conform.run(ops=[1, 2])
    with pytest.raises(TypeError, match="ops"):
        conform.export_vectors(str(tmp_path), ops=[b"sin"])
    with pytest.raises(TypeError, match="extra_args"):
        conform.run(extra_args="--quiet")
    assert recorded_cli == []


@pytest.mark.parametrize("subcommand", [["run", "--ops", "relu", "--backend", "cpu", "--cases", "10"],
                                        ["audit", "--ops", "relu", "--backend", "cpu"],
                                        ["sweep", "--backend", "cpu", "--ops", "neg", "--range", "0:16"]])
def test_the_runner_refuses_json_and_junit_both_on_standard_output(subcommand):
    done = subprocess.run([conform_binary(), *subcommand, "--json", "-", "--junit", "-"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # neither report began: a reader of stdout sees no half-written JSON or XML
    assert f"{subcommand[0]}: --json - and --junit - both write to standard output" in done.stderr
