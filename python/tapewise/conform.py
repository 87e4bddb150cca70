"""tapewise.conform — the conformance runner from Python: run `tapewise-conform run --json` and get its
report as a dict, and answer a `tapewise-conform vectors` suite with any Python implementation (README,
"Vectors layout"), e.g. to grade a framework with `tapewise-conform check DIR`.

    report = tapewise.conform.run(ops=["max", "div"], dtype="float32", backend="cpu")
    print(report["summary"]["line"])

    tapewise.conform.answer_vectors("vec", tapewise.conform.tapewise_answer(tapewise.cpu()))
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Union

import numpy as np

import tapewise

VECTORS_SCHEMA = "tapewise-conform.vectors/1"
_NUMPY_DTYPES = {"float32": np.dtype("<f4"), "float64": np.dtype("<f8")}

# fn(op, inputs, g, scalars, same) -> {"y": ..., "dx" | "da", "db": ...}
AnswerFn = Callable[[str, Dict[str, np.ndarray], np.ndarray, Dict[str, float], bool], Mapping[str, Any]]


class ConformError(RuntimeError):
    """The runner could not run (not found, or exit status 2: a usage or input error); `stderr` holds
    what it printed."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message + (f"\n{stderr.strip()}" if stderr.strip() else ""))
        self.stderr = stderr


def find_binary(binary: Optional[str] = None) -> str:
    """The tapewise-conform executable: `binary`, else $TAPEWISE_CONFORM, else tapewise-conform on PATH."""
    candidate = binary or os.environ.get("TAPEWISE_CONFORM") or shutil.which("tapewise-conform")
    if not candidate:
        raise ConformError("tapewise-conform not found: pass binary=, set TAPEWISE_CONFORM, or put it on PATH "
                           "(it is built as build/bin/tapewise-conform)")
    if not os.access(candidate, os.X_OK):
        raise ConformError(f"{candidate} is not an executable file")
    return candidate


def run(ops: Optional[Iterable[str]] = None, dtype: Optional[str] = None, backend: str = "auto",
        cases: Optional[int] = None, seed: Optional[int] = None, binary: Optional[str] = None,
        extra_args: Iterable[str] = ()) -> Dict[str, Any]:
    """Runs `tapewise-conform run --json` and returns the report (schema tapewise-conform.report/1):
    report["summary"]["conforms"] is the verdict, report["rows"] one row per node and dtype. A
    violation (exit 1) is a normal result; exit 2 (usage or input error) raises ConformError with
    the runner's stderr."""
    args = ["run"]
    if ops is not None:
        args += ["--ops", ",".join(ops)]
    if dtype is not None:
        args += ["--dtype", dtype]
    args += ["--backend", backend]
    if cases is not None:
        args += ["--cases", str(cases)]
    if seed is not None:
        args += ["--seed", str(seed)]
    args += list(extra_args)
    with tempfile.TemporaryDirectory(prefix="tapewise-conform-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        _run_cli(binary, args + ["--json", report_path])
        with open(report_path) as f:
            return json.load(f)


def check(vectors_dir: str, binary: Optional[str] = None) -> Dict[str, Any]:
    """Runs `tapewise-conform check DIR --json` on an answered vectors folder and returns the report."""
    with tempfile.TemporaryDirectory(prefix="tapewise-conform-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        _run_cli(binary, ["check", vectors_dir, "--json", report_path])
        with open(report_path) as f:
            return json.load(f)


def check_graph(graph: Union[str, Mapping[str, Any]], backend: str = "auto", path: str = "fused",
                dense: bool = False, binary: Optional[str] = None) -> Dict[str, Any]:
    """Runs `tapewise-conform graph --json` on a composite function and returns the report (schema
    tapewise-conform.graph-report/1): every node's forward and VJP graded against the MPFR
    reference, every gradient slot checked bit for bit. `graph` is a file path or the graph itself
    as a dict (schema tapewise-conform.graph/1). A bad graph (exit 2) raises ConformError naming it."""
    with tempfile.TemporaryDirectory(prefix="tapewise-conform-") as tmp:
        graph_path = graph if isinstance(graph, str) else os.path.join(tmp, "graph.json")
        if not isinstance(graph, str):
            with open(graph_path, "w") as f:
                json.dump(graph, f)
        report_path = os.path.join(tmp, "report.json")
        args = ["graph", graph_path, "--backend", backend, "--path", path, "--json", report_path]
        _run_cli(binary, args + (["--dense"] if dense else []))
        with open(report_path) as f:
            return json.load(f)


def export_vectors(vectors_dir: str, ops: Optional[Iterable[str]] = None, dtype: Optional[str] = None,
                   cases: Optional[int] = None, seed: Optional[int] = None, binary: Optional[str] = None) -> None:
    """Runs `tapewise-conform vectors DIR` (a suite for answer_vectors)."""
    args = ["vectors", vectors_dir]
    if ops is not None:
        args += ["--ops", ",".join(ops)]
    if dtype is not None:
        args += ["--dtype", dtype]
    if cases is not None:
        args += ["--cases", str(cases)]
    if seed is not None:
        args += ["--seed", str(seed)]
    _run_cli(binary, args)


def _run_cli(binary: Optional[str], args: list) -> subprocess.CompletedProcess:
    exe = find_binary(binary)
    proc = subprocess.run([exe] + args, capture_output=True, text=True)
    if proc.returncode not in (0, 1):  # 0 conforms, 1 a violation: both produce a report
        raise ConformError(f"{os.path.basename(exe)} {' '.join(args)} exited with status {proc.returncode}",
                           proc.stderr)
    return proc


def _scalar(value: Any) -> float:
    """A scalar as index.json writes it: a JSON number or "inf", "-inf", "nan"."""
    if isinstance(value, str):
        return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}[value]
    return float(value)


def _load(folder: str, filename: str, dtype: str) -> np.ndarray:
    a = np.load(os.path.join(folder, filename))
    if a.dtype != _NUMPY_DTYPES[dtype] or a.ndim != 1:
        raise ValueError(f"{folder}/{filename}: {a.dtype} {a.shape}, the suite is 1-D {dtype}")
    return a


def _write(folder: str, suite: Mapping[str, Any], name: str, value: Any) -> None:
    dtype = _NUMPY_DTYPES[suite["dtype"]]
    a = np.ascontiguousarray(np.asarray(value)).reshape(-1)
    if a.dtype != dtype:  # an answer in another dtype is an error, never silently converted
        raise TypeError(f"{suite['id']}: output {name} is {a.dtype}, the suite is {suite['dtype']}")
    if a.shape[0] != suite["count"]:
        raise ValueError(f"{suite['id']}: output {name} has {a.shape[0]} elements, the suite {suite['count']}")
    np.save(os.path.join(folder, suite["outputs"][name]), a)


def answer_vectors(vectors_dir: str, fn: AnswerFn) -> Dict[str, Any]:
    """Answers every suite of a `tapewise-conform vectors` folder in place: for each suite, calls
    fn(op, inputs, g, scalars, same) with inputs {"x"} or {"a", "b"} (only {"a"} for `same` suites,
    whose "da" is the total gradient of op(a, a)) as 1-D arrays of the suite's dtype, g likewise and
    scalars {name: float}; fn returns {"y", "dx"} or {"y", "da", "db"} ("db" unused for `same`
    suites). Writes the suite's out_*.npy (1-D, its dtype). Returns {"suites", "answered", "errors":
    [{"suite", "error"}]}; a suite whose fn raised has no out files (grade with check())."""
    with open(os.path.join(vectors_dir, "index.json")) as f:
        index = json.load(f)
    if index.get("schema") != VECTORS_SCHEMA:
        raise ValueError(f"{vectors_dir}/index.json: schema is not {VECTORS_SCHEMA}")
    errors = []
    for suite in index["suites"]:
        folder = os.path.join(vectors_dir, suite["id"])
        for filename in suite["outputs"].values():  # never leave stale answers behind
            if os.path.exists(os.path.join(folder, filename)):
                os.remove(os.path.join(folder, filename))
        try:
            inputs = {n: _load(folder, f, suite["dtype"]) for n, f in suite["inputs"].items() if n != "g"}
            g = _load(folder, suite["inputs"]["g"], suite["dtype"])
            scalars = {n: _scalar(v) for n, v in suite.get("scalars", {}).items()}
            outputs = fn(suite["op"], inputs, g, scalars, bool(suite.get("same", False)))
            for name in suite["outputs"]:
                _write(folder, suite, name, outputs[name])
        except Exception as e:  # one suite's failure is reported, the others still answered
            errors.append({"suite": suite["id"], "error": f"{type(e).__name__}: {e}"})
    return {"suites": len(index["suites"]), "answered": len(index["suites"]) - len(errors), "errors": errors}


def tapewise_answer(backend: tapewise.Backend, path: str = "fused") -> AnswerFn:
    """An answer function for answer_vectors that computes every suite with tapewise itself on
    `backend` (a tape per suite; the sparse backward; `same` suites record op(a, a))."""

    def answer(op: str, inputs: Dict[str, np.ndarray], g: np.ndarray, scalars: Dict[str, float],
               same: bool) -> Dict[str, np.ndarray]:
        tape = tapewise.Tape(backend)
        names = list(inputs)
        ids = {n: tape.leaf(inputs[n], copy=True) for n in names}
        parents = [ids["a"], ids["a"]] if same else [ids[n] for n in names]
        spec = {name: scalar_names for name, _, scalar_names in tapewise.ops()}[op]
        out = tape.apply(op, parents, [scalars[s] for s in spec])
        grads = tape.backward(out, g, path=path)
        result = {"y": tape.host(out)}
        for n in (["a"] if same else names):
            result["d" + n] = grads.host(ids[n]) if ids[n] in grads else np.zeros_like(inputs[n])
        if same:
            result["db"] = np.zeros_like(inputs["a"])
        return result

    return answer

