"""tapewise.conform — the conformance runner from Python: run `tapewise-conform run --json` and get its
report as a dict, and answer a `tapewise-conform vectors` suite with any Python implementation (README,
"Vectors layout"), e.g. to grade a framework with `tapewise-conform check DIR`.

    report = tapewise.conform.run(ops=["max", "div"], dtype="float32", backend="cpu")
    print(report["summary"]["line"])

    tapewise.conform.export_vectors("vec", ops=["max", "div"])
    answered = tapewise.conform.answer_vectors("vec", tapewise.conform.tapewise_answer(tapewise.cpu()))
    assert not answered["errors"], answered["errors"]  # a suite that raised has no answers
    print(tapewise.conform.check("vec")["summary"]["line"])

A folder with suites left unanswered has no verdict: `check` raises ConformError saying which.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import shutil
import stat
import subprocess
import tempfile
from typing import Any, Callable, Dict, Iterable, Mapping, NamedTuple, Optional, Union

import numpy as np

import tapewise

from . import _files
from ._runner import bundled_runner

VECTORS_SCHEMA = "tapewise-conform.vectors/1"
# A suite's arrays as numpy holds them: numpy has no bfloat16, so a bfloat16 suite's files (and the
# arrays answer_vectors hands over and takes back) are its bits as uint16, as the C++ runner writes them.
_NUMPY_DTYPES = {"float32": np.dtype("<f4"), "float64": np.dtype("<f8"), "float16": np.dtype("<f2"),
                 "bfloat16": np.dtype("<u2")}

# fn(op, inputs, g, scalars, same) -> {"y": ..., "dx" | "da", "db": ...}
AnswerFn = Callable[[str, Dict[str, np.ndarray], np.ndarray, Dict[str, float], bool], Mapping[str, Any]]


class ConformError(RuntimeError):
    """The runner could not run (not found, or exit status 2: a usage or input error); `stderr` holds
    what it printed."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message + (f"\n{stderr.strip()}" if stderr.strip() else ""))
        self.stderr = stderr


def find_binary(binary: Optional[str] = None) -> str:
    """The tapewise-conform executable: `binary`, else $TAPEWISE_CONFORM, else the one a wheel carries
    (tapewise/bin/tapewise-conform), else tapewise-conform on PATH."""
    candidate = (binary or os.environ.get("TAPEWISE_CONFORM") or bundled_runner()
                 or shutil.which("tapewise-conform"))
    if not candidate:
        raise ConformError("tapewise-conform not found: pass binary=, set TAPEWISE_CONFORM, or put it on PATH "
                           "(it is built as build/bin/tapewise-conform, and a wheel from tools/build_wheel.sh "
                           "carries it)")
    if not os.access(candidate, os.X_OK):
        raise ConformError(f"{candidate} is not an executable file")
    return candidate


def _names(value: Union[str, Iterable[str]], what: str) -> str:
    """The --ops argument: a str is one name or a comma list, as it is; an iterable gives names (a
    str is never taken character by character)."""
    if isinstance(value, str):
        return value
    names = list(value)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"{what}: expected a str or an iterable of str, got {names!r}")
    return ",".join(names)


def run(ops: Union[str, Iterable[str], None] = None, dtype: Optional[str] = None, backend: str = "auto",
        cases: Optional[int] = None, seed: Optional[int] = None, binary: Optional[str] = None,
        extra_args: Iterable[str] = ()) -> Dict[str, Any]:
    """Runs `tapewise-conform run --json` and returns the report (schema tapewise-conform.report/1):
    report["summary"]["conforms"] is the verdict, report["rows"] one row per node and dtype. A
    violation (exit 1) is a normal result; exit 2 (usage or input error) raises ConformError with
    the runner's stderr. `ops`: "max", "max,div" or ["max", "div"]; `extra_args`: a list of
    further arguments (a str raises TypeError)."""
    if isinstance(extra_args, str):
        raise TypeError("extra_args: expected a list of arguments, got a str")
    args = ["run"]
    if ops is not None:
        args += ["--ops", _names(ops, "ops")]
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
    """Runs `tapewise-conform check DIR --json` on an answered vectors folder and returns the report
    (a violation, exit 1, is a normal result). No verdict (exit 2: a suite not answered, or nothing
    graded for a node, dtype or output) and input errors raise ConformError with the reason."""
    with tempfile.TemporaryDirectory(prefix="tapewise-conform-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        _run_cli(binary, ["check", vectors_dir, "--json", report_path])
        with open(report_path) as f:
            return json.load(f)


def check_graph(graph: Union[str, Mapping[str, Any]], backend: str = "auto", path: str = "fused",
                dense: bool = False, binary: Optional[str] = None) -> Dict[str, Any]:
    """Runs `tapewise-conform graph --json` on a composite function and returns the report (schema
    tapewise-conform.graph-report/1): every node's forward and VJP graded against the MPFR
    reference, every gradient slot checked identical up to NaN (equal bits, or both NaN). `graph` is
    a file path or the graph itself
    as a dict (schema tapewise-conform.graph/1). A bad graph (exit 2) raises ConformError naming it."""
    with tempfile.TemporaryDirectory(prefix="tapewise-conform-") as tmp:
        graph_path = graph if isinstance(graph, str) else os.path.join(tmp, "graph.json")
        if not isinstance(graph, str):
            text = json.dumps(graph).encode()
            _files.write_file(graph_path, lambda f: f.write(text))
        report_path = os.path.join(tmp, "report.json")
        args = ["graph", graph_path, "--backend", backend, "--path", path, "--json", report_path]
        _run_cli(binary, args + (["--dense"] if dense else []))
        with open(report_path) as f:
            return json.load(f)


def export_vectors(vectors_dir: str, ops: Union[str, Iterable[str], None] = None, dtype: Optional[str] = None,
                   cases: Optional[int] = None, seed: Optional[int] = None, binary: Optional[str] = None) -> None:
    """Runs `tapewise-conform vectors DIR` (a suite for answer_vectors); `ops` as for run()."""
    args = ["vectors", vectors_dir]
    if ops is not None:
        args += ["--ops", _names(ops, "ops")]
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


class VectorsIndexError(ValueError):
    """A vectors folder that answer_vectors will not follow: index.json unreadable, not JSON, nested
    too deep or of another schema, or a suite whose field breaks the layout (README, "Vectors
    layout") or leads outside the folder. The message names the suite and the field. Raised before
    any file is touched."""


_MAX_INDEX_BYTES = 64 << 20  # the C++ runner's kMaxIndexBytes (conform/library/index.hpp)
_SPECIAL_SCALARS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class _Suite(NamedTuple):
    """One suite of an index, checked: its files are paths inside its folder."""
    id: str
    op: str
    dtype: str
    same: bool
    count: int
    scalars: Dict[str, float]
    inputs: Dict[str, str]   # input name (x | a, b, and g) -> path to read
    outputs: Dict[str, str]  # output name (y, dx | da, db) -> path to write


def _read_index(root: str) -> Any:
    """index.json of the (resolved) vectors folder, parsed: a regular file inside it, of bounded size
    and nesting."""
    where = os.path.join(root, "index.json")
    try:
        path = _files.resolve_within(root, "index.json")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as e:
        raise VectorsIndexError(f"{where}: cannot be read: {e}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise VectorsIndexError(f"{where}: is not a regular file")
        if info.st_size > _MAX_INDEX_BYTES:
            raise VectorsIndexError(f"{where}: is {info.st_size} bytes; the limit is {_MAX_INDEX_BYTES}")
        text = f.read(_MAX_INDEX_BYTES + 1)
    try:
        return json.loads(text)
    except RecursionError:  # json.loads recurses once per level: an absurd nesting ends here
        raise VectorsIndexError(f"{where}: nested too deeply to be a vectors index") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise VectorsIndexError(f"{where}: not valid JSON: {e}") from None


def _field(entry: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = entry.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
        raise VectorsIndexError(f"{where}: '{key}' is missing or not {kind.__name__}")
    return value


def _scalars_of(entry: Mapping[str, Any], names: list, where: str) -> Dict[str, float]:
    """Exactly the op's scalars, each a number or "inf", "-inf", "nan"."""
    given = entry.get("scalars", {})
    if not isinstance(given, dict) or sorted(given) != sorted(names):
        raise VectorsIndexError(f"{where}: 'scalars' must name exactly {names}")
    scalars = {}
    for name, value in given.items():
        if isinstance(value, str) and value in _SPECIAL_SCALARS:
            scalars[name] = _SPECIAL_SCALARS[value]
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            scalars[name] = float(value)
        else:
            raise VectorsIndexError(f"{where}: scalar '{name}' is neither a number nor \"inf\", \"-inf\", \"nan\"")
    return scalars


def _exact_files(entry: Mapping[str, Any], key: str, expected: Dict[str, str], where: str) -> None:
    """`key` must map exactly the schema's names to the schema's file names: nothing else is read."""
    if entry.get(key) != expected:
        listed = ", ".join(f"{n}: {f}" for n, f in expected.items())
        raise VectorsIndexError(f"{where}: '{key}' must name exactly {{{listed}}}")


def _suite_folder(root: str, suite_id: str, where: str) -> str:
    if not _files.is_plain_file_name(suite_id):
        raise VectorsIndexError(f"{where}: 'id' {suite_id!r} is not a plain folder name")
    try:
        folder = _files.resolve_within(root, suite_id)
    except ValueError as e:
        raise VectorsIndexError(f"{where}: 'id': {e}") from None
    if folder == root or not os.path.isdir(folder):
        raise VectorsIndexError(f"{where}: 'id': {os.path.join(root, suite_id)} is not a folder inside {root}")
    return folder


def _output_path(folder: str, filename: str, where: str) -> str:
    """Where an answer goes: the plain name in the suite's folder, never through a link."""
    path = os.path.join(folder, filename)
    if os.path.islink(path) or (os.path.exists(path) and not os.path.isfile(path)):
        raise VectorsIndexError(f"{where}: 'outputs': {path} is a symbolic link or not a regular file; "
                                "refusing to write there")
    return path


def _suite_of(root: str, entry: Any, where: str) -> _Suite:
    if not isinstance(entry, dict):
        raise VectorsIndexError(f"{where}: is not an object")
    suite_id = _field(entry, "id", str, where)
    where = f"{where} (id {suite_id!r})"
    op = _field(entry, "op", str, where)
    nodes = {name: (arity, scalar_names) for name, arity, scalar_names in tapewise.ops()}
    if op not in nodes:
        raise VectorsIndexError(f"{where}: 'op' {op!r} is not a node")
    dtype = _field(entry, "dtype", str, where)
    if dtype not in _NUMPY_DTYPES:
        raise VectorsIndexError(f"{where}: 'dtype' {dtype!r} is not float32, float64, float16 or bfloat16")
    same = entry.get("same", False)
    if not isinstance(same, bool) or (same and nodes[op][0] != 2):
        raise VectorsIndexError(f"{where}: 'same' is not a boolean, or is true for a unary op")
    count = _field(entry, "count", int, where)
    if count < 0:
        raise VectorsIndexError(f"{where}: 'count' is negative")
    arguments = ["x"] if nodes[op][0] == 1 else (["a"] if same else ["a", "b"])
    answers = ["y"] + ["d" + n for n in arguments]
    _exact_files(entry, "inputs", {n: f"{n}.npy" for n in arguments + ["g"]}, where)
    _exact_files(entry, "outputs", {n: f"out_{n}.npy" for n in answers}, where)
    if "expected" in entry:
        _exact_files(entry, "expected", {n: f"expected_{n}.npy" for n in answers}, where)
    folder = _suite_folder(root, suite_id, where)
    try:
        inputs = {n: _files.resolve_within(folder, f) for n, f in entry["inputs"].items()}
    except ValueError as e:
        raise VectorsIndexError(f"{where}: 'inputs': {e}") from None
    outputs = {n: _output_path(folder, f, where) for n, f in entry["outputs"].items()}
    return _Suite(suite_id, op, dtype, same, count, _scalars_of(entry, list(nodes[op][1]), where), inputs, outputs)


def _suites_of(vectors_dir: str) -> list:
    """Every suite of the folder's index, checked before any file is touched."""
    root = os.path.realpath(vectors_dir)
    where = os.path.join(vectors_dir, "index.json")
    index = _read_index(root)
    if not isinstance(index, dict) or index.get("schema") != VECTORS_SCHEMA:
        raise VectorsIndexError(f"{where}: schema is not {VECTORS_SCHEMA}")
    suites = index.get("suites")
    if not isinstance(suites, list) or not suites:
        raise VectorsIndexError(f"{where}: 'suites' is missing, empty or not a list")
    checked = [_suite_of(root, entry, f"{where}: suites[{i}]") for i, entry in enumerate(suites)]
    ids = [s.id for s in checked]
    if len(set(ids)) != len(ids):
        raise VectorsIndexError(f"{where}: two suites share an 'id'")
    return checked


def _load(path: str, suite: _Suite) -> np.ndarray:
    """An input array: a regular file (a FIFO would block), no pickles, 1-D in the suite's dtype."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ValueError(f"{path}: is not a regular file")
        a = np.load(f, allow_pickle=False)
    if a.dtype != _NUMPY_DTYPES[suite.dtype] or a.ndim != 1:
        raise ValueError(f"{path}: {a.dtype} {a.shape}, the suite is 1-D {suite.dtype}")
    return a


def _write(suite: _Suite, name: str, value: Any) -> None:
    a = np.ascontiguousarray(np.asarray(value)).reshape(-1)
    if a.dtype != _NUMPY_DTYPES[suite.dtype]:  # an answer in another dtype is an error, never silently converted
        raise TypeError(f"{suite.id}: output {name} is {a.dtype}, the suite is {suite.dtype}")
    if a.shape[0] != suite.count:
        raise ValueError(f"{suite.id}: output {name} has {a.shape[0]} elements, the suite {suite.count}")
    _files.write_file(suite.outputs[name], lambda f: np.save(f, a, allow_pickle=False))


def answer_vectors(vectors_dir: str, fn: AnswerFn) -> Dict[str, Any]:
    """Answers every suite of a `tapewise-conform vectors` folder in place: for each suite, calls
    fn(op, inputs, g, scalars, same) with inputs {"x"} or {"a", "b"} (only {"a"} for `same` suites,
    whose "da" is the total gradient of op(a, a)) as 1-D arrays of the suite's dtype (a bfloat16
    suite's as uint16 arrays of bfloat16 bits, in and out: numpy has no bfloat16), g likewise and
    scalars {name: float}; fn returns {"y", "dx"} or {"y", "da", "db"} ("db" unused for `same`
    suites). Writes the suite's out_*.npy (1-D, its dtype). Returns {"suites", "answered", "errors":
    [{"suite", "error"}]}; a suite whose fn raised has no out files (grade with check()).

    The folder is read as the C++ runner's `check` reads it: suite ids are plain folder names,
    files are exactly the schema's names, and every path resolves inside the folder; anything else
    raises VectorsIndexError (naming the suite and field) before a file is touched. Answers are
    written to a temporary file and renamed into place, never through a symbolic link."""
    suites = _suites_of(vectors_dir)
    errors = []
    for suite in suites:
        for path in suite.outputs.values():  # never leave stale answers behind
            if os.path.isfile(path) and not os.path.islink(path):
                os.remove(path)
        try:
            inputs = {n: _load(path, suite) for n, path in suite.inputs.items() if n != "g"}
            g = _load(suite.inputs["g"], suite)
            outputs = fn(suite.op, inputs, g, dict(suite.scalars), suite.same)
            for name in suite.outputs:
                _write(suite, name, outputs[name])
        except Exception as e:  # one suite's failure is reported, the others still answered
            errors.append({"suite": suite.id, "error": f"{type(e).__name__}: {e}"})
    return {"suites": len(suites), "answered": len(suites) - len(errors), "errors": errors}


def _bfloat16_buffer(backend: tapewise.Backend, bits: np.ndarray) -> Any:
    """A bfloat16 buffer of `backend` (a CPU one) holding `bits` (uint16) as they are: numpy has no
    bfloat16, so the bits are copied into tapewise's own memory, which a tape takes through DLPack."""
    buffer = backend.allocate(bits.shape, "bfloat16")
    if bits.nbytes:
        ctypes.memmove(buffer.data_ptr, np.ascontiguousarray(bits).ctypes.data, bits.nbytes)
    return buffer


def _bfloat16_bits(backend: tapewise.Backend, array: Any) -> np.ndarray:
    """The bits (uint16) of a bfloat16 array tapewise handed out on the host (a value or gradient)."""
    view = backend.wrap(array)  # no copy: a Buffer over the array's memory, with its address
    bits = np.empty(view.shape, dtype=np.uint16)
    if bits.nbytes:
        ctypes.memmove(bits.ctypes.data, view.data_ptr, bits.nbytes)
    return bits


def tapewise_answer(backend: tapewise.Backend, path: str = "fused") -> AnswerFn:
    """An answer function for answer_vectors that computes every suite with tapewise itself on
    `backend` (a tape per suite; the sparse backward; `same` suites record op(a, a)). bfloat16
    suites, whose arrays are uint16 bits (numpy has no bfloat16), are answered bit for bit on a CPU
    backend; on a CUDA backend they raise TypeError (answer them with tapewise.cpu(), whose results
    are the same bits in exact mode, or with `tapewise-conform eval --dtype bfloat16`)."""

    def answer(op: str, inputs: Dict[str, np.ndarray], g: np.ndarray, scalars: Dict[str, float],
               same: bool) -> Dict[str, np.ndarray]:
        bfloat16 = g.dtype == _NUMPY_DTYPES["bfloat16"]
        if bfloat16 and backend.kind != "cpu":
            raise TypeError(f"tapewise_answer: a bfloat16 suite is answered on a CPU backend, not {backend.describe()}: "
                            "use tapewise.cpu(), or `tapewise-conform eval --dtype bfloat16`")
        # numpy has no bfloat16: the bits go in, and come out, through tapewise's own memory.
        to_tape = (lambda a: _bfloat16_buffer(backend, a)) if bfloat16 else (lambda a: a)
        tape = tapewise.Tape(backend)
        names = list(inputs)
        ids = {n: tape.leaf(to_tape(inputs[n]), copy=True) for n in names}
        parents = [ids["a"], ids["a"]] if same else [ids[n] for n in names]
        spec = {name: scalar_names for name, _, scalar_names in tapewise.ops()}[op]
        out = tape.apply(op, parents, [scalars[s] for s in spec])
        grads = tape.backward(out, to_tape(g), path=path)
        if bfloat16:
            result = {"y": _bfloat16_bits(backend, tape.value(out))}
            gradient = lambda node: _bfloat16_bits(backend, grads[node])  # noqa: E731
        else:
            result = {"y": tape.host(out)}
            gradient = grads.host
        for n in (["a"] if same else names):
            result["d" + n] = gradient(ids[n]) if ids[n] in grads else np.zeros_like(inputs[n])
        if same:
            result["db"] = np.zeros_like(inputs["a"])
        return result

    return answer

