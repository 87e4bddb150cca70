#!/usr/bin/env python3
"""tools/hostile_run.py — a hostile user's run over tapewise's doors: the runner's command line, the
Python package and the C ABI (through ctypes on the Python module's own copy of it). Each case runs
in a fresh process with a time limit and is classified as a clean error or correct answer, a crash
(a signal), a hang (the limit), or a wrong answer (a vacuous pass, a write outside where it was told,
a changed tape, an error of the wrong kind). Not a unit test: a census of outcomes, for the README's
Reliability section and the hardening notes.

    python3 tools/hostile_run.py --conform build/bin/tapewise-conform --lib build-shared/libtapewise.so \
        [--json out.json] [-k FILTER]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Callable, Dict, List

CASES: Dict[str, Callable[[], None]] = {}
CONFORM = os.environ.get("TAPEWISE_CONFORM", "tapewise-conform")
CLI_LIMIT_S = 60


class Wrong(AssertionError):
    """The door answered, but wrongly: a vacuous verdict, a write outside, an unclean error."""


def case(name: str):
    def register(fn):
        assert name not in CASES, name
        CASES[name] = fn
        return fn
    return register


# ---------------------------------------------------------------- the runner's command line

def cli(*args: str, stdout=subprocess.PIPE, limit: float = CLI_LIMIT_S) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run([CONFORM, *args], stdout=stdout, stderr=subprocess.PIPE, timeout=limit)
    except subprocess.TimeoutExpired:
        sys.exit(6)  # hang
    if proc.returncode < 0 or proc.returncode >= 128:
        sys.stderr.write(proc.stderr.decode(errors="replace")[-2000:])
        sys.exit(5)  # crash
    return proc


def expect_usage_error(*args: str, **kw) -> subprocess.CompletedProcess:
    proc = cli(*args, **kw)
    if proc.returncode != 2:
        raise Wrong(f"exit {proc.returncode}, expected 2: {' '.join(args)}\n{proc.stderr.decode(errors='replace')[-500:]}")
    if not proc.stderr.strip():
        raise Wrong("exit 2 without a message")
    return proc


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def graph_doc(**override) -> dict:
    doc = {"schema": "tapewise-conform.graph/1", "dtype": "float64",
           "leaves": [{"name": "x", "values": [1.0, 2.0]}],
           "nodes": [{"name": "y", "op": "scale", "parents": ["x"], "scalars": {"c": 0.5}}],
           "output": "y", "seed": [1.0, 1.0]}
    doc.update(override)
    return doc


def write_graph_with_raw(tmp: str, field_path: List, raw: str) -> str:
    """A graph file whose value at field_path is the raw JSON text `raw` (too deep to build as a dict)."""
    marker = "\"@@RAW@@\""
    doc = graph_doc()
    target = doc
    for key in field_path[:-1]:
        target = target[key]
    target[field_path[-1]] = "@@RAW@@"
    path = os.path.join(tmp, "g.json")
    with open(path, "w") as f:
        f.write(json.dumps(doc).replace(marker, raw))
    return path


GRAPH_FIELDS = {"schema": ["schema"], "dtype": ["dtype"], "leaf_value": ["leaves", 0, "values", 0],
                "scalar": ["nodes", 0, "scalars", "c"], "seed": ["seed", 0], "output": ["output"],
                "op": ["nodes", 0, "op"], "parents": ["nodes", 0, "parents", 0], "leaf_name": ["leaves", 0, "name"]}

for _field, _path in GRAPH_FIELDS.items():
    for _depth in (1000, 100_000):
        @case(f"cli/graph/nested-{_field}-{_depth}")
        def _graph_nested(path=_path, depth=_depth):
            with tempfile.TemporaryDirectory() as tmp:
                expect_usage_error("graph", write_graph_with_raw(tmp, path, nested(depth)), "--backend", "cpu")


def make_vectors(tmp: str) -> str:
    folder = os.path.join(tmp, "vec")
    proc = cli("vectors", folder, "--ops", "sin,max", "--dtype", "float32", "--cases", "4", "--seed", "1")
    if proc.returncode != 0:
        raise Wrong("vectors failed: " + proc.stderr.decode(errors="replace"))
    return folder


INDEX_FIELDS = ["schema", "id", "op", "dtype", "count", "inputs", "outputs", "scalars", "same"]

for _field in INDEX_FIELDS:
    @case(f"cli/check/nested-index-{_field}")
    def _index_nested(field=_field):
        with tempfile.TemporaryDirectory() as tmp:
            folder = make_vectors(tmp)
            index_path = os.path.join(folder, "index.json")
            index = json.load(open(index_path))
            target = index if field == "schema" else index["suites"][0]
            target[field] = "@@RAW@@"
            with open(index_path, "w") as f:
                f.write(json.dumps(index).replace("\"@@RAW@@\"", nested(150_000)))
            expect_usage_error("check", folder)


def victim(tmp: str) -> str:
    path = os.path.join(tmp, "victim.txt")
    with open(path, "w") as f:
        f.write("precious")
    return path


def assert_victim_intact(path: str) -> None:
    if open(path).read() != "precious":
        raise Wrong(f"{path} was written through a symlink")


WRITERS = {
    "run-json": lambda out, tmp: ("run", "--backend", "cpu", "--ops", "neg", "--cases", "2", "--seed", "1", "--json", out),
    "check-json": lambda out, tmp: ("check", make_answered_vectors(tmp), "--json", out),
    "sweep-json": lambda out, tmp: ("sweep", "--backend", "cpu", "--ops", "neg", "--dtype", "float32",
                                    "--range", "0x3f800000:0x3f800100", "--json", out),
    "ops-json": lambda out, tmp: ("ops", "--json", out),
    "audit-markdown": lambda out, tmp: ("audit", "--backend", "cpu", "--ops", "relu", "--markdown", out),
    "graph-json": lambda out, tmp: ("graph", write_plain_graph(tmp), "--backend", "cpu", "--json", out),
}


def write_plain_graph(tmp: str) -> str:
    path = os.path.join(tmp, "plain.json")
    with open(path, "w") as f:
        json.dump(graph_doc(), f)
    return path


def make_answered_vectors(tmp: str) -> str:
    folder = make_vectors(tmp)
    for suite in json.load(open(os.path.join(folder, "index.json")))["suites"]:
        d = os.path.join(folder, suite["id"])
        args = ["eval", suite["op"], "--backend", "cpu", "--prefix", "out_", "--out", d, "--dtype", suite["dtype"]]
        for name, f in suite["inputs"].items():
            args += ["--" + name, os.path.join(d, f)]
        if suite.get("same"):
            args.append("--same")
        cli(*args)
    return folder


for _writer, _args in WRITERS.items():
    @case(f"cli/writer/symlink-{_writer}")
    def _writer_symlink(make_args=_args):
        with tempfile.TemporaryDirectory() as tmp:
            target = victim(tmp)
            link = os.path.join(tmp, "report")
            os.symlink(target, link)
            proc = cli(*make_args(link, tmp))
            assert_victim_intact(target)
            if proc.returncode == 0 and not os.path.islink(link):
                return  # replaced the link by a file of its own: the victim is intact
            if proc.returncode not in (0, 2):
                raise Wrong(f"exit {proc.returncode}")

    @case(f"cli/writer/missing-folder-{_writer}")
    def _writer_missing_folder(make_args=_args):
        with tempfile.TemporaryDirectory() as tmp:
            expect_usage_error(*make_args(os.path.join(tmp, "nodir", "r.out"), tmp))

    @case(f"cli/writer/non-utf8-path-{_writer}")
    def _writer_non_utf8(make_args=_args):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r\udcff.out")  # the byte 0xff in the file name
            proc = cli(*[os.fsencode(a) if isinstance(a, str) else a for a in make_args(out, tmp)])
            if proc.returncode == 0 and os.path.getsize(os.fsencode(out)) == 0:
                raise Wrong("exit 0 with an empty report")
            if proc.returncode not in (0, 1, 2):
                raise Wrong(f"exit {proc.returncode}")


@case("cli/writer/stdout-full")
def _stdout_full():
    with open("/dev/full", "w") as full:
        proc = cli("ops", stdout=full)
    if proc.returncode == 0:
        raise Wrong("exit 0 although stdout could not be written")


@case("cli/writer/eval-half-written")
def _eval_half():
    with tempfile.TemporaryDirectory() as tmp:
        x = os.path.join(tmp, "x.npy")
        write_npy(x, [1.0, 2.0])
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        os.mkdir(os.path.join(out, "dx.npy"))  # the second output cannot be written
        expect_usage_error("eval", "sin", "--backend", "cpu", "--x", x, "--g", x, "--out", out)
        if os.path.exists(os.path.join(out, "y.npy")):
            raise Wrong("y.npy written although dx.npy could not be")


def write_npy(path: str, values) -> None:
    import numpy as np
    np.save(path, np.array(values, dtype=np.float64))


@case("cli/verdict/sweep-range-past-cases")
def _sweep_past():
    expect_usage_error("sweep", "--backend", "cpu", "--ops", "neg", "--dtype", "float32", "--range", "0xffffffff:0xffffffff0")


@case("cli/verdict/sweep-validate-0")
def _sweep_validate0():
    proc = cli("sweep", "--backend", "cpu", "--ops", "neg", "--dtype", "float32", "--range", "5:5", "--validate", "0")
    if proc.returncode == 0:
        raise Wrong("an empty sweep conforms")


@case("cli/verdict/special-points-without-rows")
def _special_points_without_rows():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sp")
        with open(path, "w") as f:
            f.write("op=neg dtype=f32 x=1 g=1 y=-1 dx=-1\n")
        proc = cli("run", "--backend", "cpu", "--ops", "relu", "--dtype", "float32", "--cases", "4", "--seed", "1",
                   "--special-points", path)
        if proc.returncode == 0:
            raise Wrong("relu conforms with no special point of its own")


@case("cli/verdict/run-zero-cases")
def _run_zero_cases():
    proc = cli("run", "--backend", "cpu", "--ops", "relu", "--dtype", "float32", "--cases", "0", "--seed", "1")
    if proc.returncode == 0 and b"conform" in proc.stdout and b"special" not in proc.stdout:
        raise Wrong("conforms with no graded case")


@case("cli/verdict/check-unanswered")
def _check_unanswered():
    with tempfile.TemporaryDirectory() as tmp:
        proc = cli("check", make_vectors(tmp))
        if proc.returncode != 2 or b"not answered" not in proc.stderr:
            raise Wrong(f"exit {proc.returncode} for a folder nobody answered, expected 2 (no verdict) naming it")


@case("cli/verdict/check-rewritten-expected")
def _check_rewritten_expected():
    import numpy as np
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_answered_vectors(tmp)
        suite = os.path.join(folder, "sin_float32_special0")
        for name in ("out_dx.npy", "expected_dx.npy"):  # the same wrong value in both
            values = np.load(os.path.join(suite, name))
            values[0] = np.float32(123.0)
            np.save(os.path.join(suite, name), values)
        proc = cli("check", folder)
        if proc.returncode != 1:
            raise Wrong(f"exit {proc.returncode}: a wrong special value matched by a rewritten expected file passed")


@case("cli/verdict/graph-float16-gelu-overflow")
def _graph_gelu_overflow():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gelu16.json")
        with open(path, "w") as f:
            json.dump(graph_doc(dtype="float16", leaves=[{"name": "x", "values": [1000.0, 0.5]}],
                                nodes=[{"name": "y", "op": "gelu", "parents": ["x"]}]), f)
        proc = cli("graph", path, "--backend", "cpu")
        if proc.returncode != 0:
            raise Wrong(f"exit {proc.returncode}: graph fails the float16 gelu overflow that sweep accepts")


REPORT_CLASHES = {
    "json-junit-same-file": ["run", "--ops", "relu", "--backend", "cpu", "--cases", "4", "--json", "r.out", "--junit", "r.out"],
    "json-fd1-junit-stdout": ["run", "--ops", "relu", "--backend", "cpu", "--cases", "4", "--json", "/dev/fd/1", "--junit", "-"],
    "audit-markdown-json-stdout": ["audit", "--ops", "relu", "--backend", "cpu", "--markdown", "-", "--json", "-"],
}

for _clash, _args in REPORT_CLASHES.items():
    @case(f"cli/writer/{_clash}")
    def _report_clash(args=_args):
        with tempfile.TemporaryDirectory() as tmp:
            proc = cli(*[os.path.join(tmp, a) if a == "r.out" else a for a in args])
            if proc.returncode != 2 or proc.stdout:
                raise Wrong(f"exit {proc.returncode}: two reports to one place were not refused")


@case("cli/hang/sweep-cpu-defaults-silent")
def _sweep_cpu_defaults():
    proc = subprocess.Popen([CONFORM, "sweep", "--backend", "cpu", "--ops", "sin", "--dtype", "float32"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(20)
    if proc.poll() is not None:
        if proc.returncode not in (0, 1, 2):
            sys.exit(5 if proc.returncode < 0 else 3)
        return  # refused (or finished) within 20 s
    proc.kill()
    _, err = proc.communicate()
    if not err.strip():
        sys.exit(6)  # 20 s without a word: hang-like


@case("cli/flags/devices-with-cpu")
def _devices_cpu():
    expect_usage_error("sweep", "--backend", "cpu", "--devices", "8", "--ops", "neg", "--dtype", "float32",
                       "--range", "0:16")


BAD_NUMBERS = ["-1", "1e3", "0x10", "", " 5", "18446744073709551616", "nan", "--", "1.5"]
NUMERIC_OPTIONS = [("run", "--cases"), ("run", "--seed"), ("vectors", "--cases"), ("vectors", "--seed"),
                   ("sweep", "--validate"), ("sweep", "--devices")]
for _sub, _option in NUMERIC_OPTIONS:
    for _text in BAD_NUMBERS:
        @case(f"cli/flags/{_sub}{_option}={_text!r}")
        def _bad_number(sub=_sub, option=_option, text=_text):
            with tempfile.TemporaryDirectory() as tmp:
                extra = [os.path.join(tmp, "v")] if sub == "vectors" else []
                if sub == "sweep":
                    extra = ["--backend", "cpu", "--ops", "neg", "--dtype", "float32", "--range", "0:16"]
                if sub == "run":
                    extra = ["--backend", "cpu", "--ops", "neg"]
                expect_usage_error(sub, *extra, f"{option}={text}")


for _args in (["rnu"], ["run", "--ops", "sinn"], ["run", "--dtype", "float8"], ["run", "--backend", "tpu"],
              ["graph", "/nonexistent.json"], ["graph", "/dev/zero"], ["check", "/nonexistent"],
              ["eval", "sin", "--x", "/etc/passwd"], ["eval", "sin", "--x", "/dev/urandom"],
              ["run", "--special-points", "/dev/zero"], ["run", "--special-points", "/"]):
    @case(f"cli/input/{' '.join(_args)}")
    def _bad_input(args=_args):
        expect_usage_error(*args)


# ---------------------------------------------------------------- the Python package

def tapewise_modules():
    import numpy as np
    import tapewise
    return np, tapewise


def expect_clean_error(fn: Callable[[], object], kinds=None) -> BaseException:
    _, tapewise = tapewise_modules()
    kinds = kinds or (tapewise.TapewiseError, TypeError, ValueError)
    try:
        fn()
    except kinds as e:
        if not str(e):
            raise Wrong(f"{type(e).__name__} without a message")
        return e
    except Exception as e:  # noqa: BLE001 — any other type is an unclean error
        raise Wrong(f"unclean error {type(e).__name__}: {e}")
    raise Wrong("no error")


def tape_state(tape) -> tuple:
    return (len(tape), tuple(tape.host(node).tobytes() for node in tape.nodes()))


def expect_tape_unchanged_error(tape, fn) -> None:
    before = tape_state(tape)
    expect_clean_error(fn)
    if tape_state(tape) != before:
        raise Wrong("the tape changed on an error")


def hostile_arrays():
    np, _ = tapewise_modules()
    base = np.arange(12, dtype=np.float32)
    read_only = base.copy()
    read_only.setflags(write=False)
    nan_payload = np.array([0x7fc00001, 0xffc00002], dtype=np.uint32).view(np.float32)
    return {
        "non-contiguous": base[::2], "0-d": np.float32(1.5), "empty": np.zeros((0, 3), np.float32),
        "int32": np.arange(4, dtype=np.int32), "float16": np.ones(4, np.float16),
        "complex": np.ones(4, np.complex64), "object": np.array([1, None], dtype=object),
        "bool": np.ones(4, bool), "read-only": read_only, "nan-payload": nan_payload,
        "list": [1.0, 2.0], "nested-list": [[1.0], [2.0, 3.0]], "string": "abc", "none": None,
        "transposed": np.ones((3, 4), np.float32).T, "big-endian": np.ones(4, ">f4"),
        "ndim-40": np.ones([1] * 40, np.float32),
    }


for _name in ["non-contiguous", "0-d", "empty", "int32", "float16", "complex", "object", "bool", "read-only",
              "nan-payload", "list", "nested-list", "string", "none", "transposed", "big-endian", "ndim-40"]:
    for _copy in (False, True):
        @case(f"python/leaf/{_name}/copy={_copy}")
        def _leaf(name=_name, copy=_copy):
            np, tapewise = tapewise_modules()
            tape = tapewise.Tape(tapewise.cpu())
            x = tape.leaf(np.ones(4, np.float32))
            before = tape_state(tape)
            array = hostile_arrays()[name]
            try:
                i = tape.leaf(array, copy=copy)
            except (tapewise.TapewiseError, TypeError, ValueError) as e:
                if not str(e):
                    raise Wrong("error without a message")
                if tape_state(tape) != before:
                    raise Wrong("the tape changed on an error")
                return
            except Exception as e:  # noqa: BLE001
                raise Wrong(f"unclean error {type(e).__name__}: {e}")
            # Accepted: its value must equal the source's bits, and a sin over it must run.
            got = np.asarray(tape.host(i))
            want = np.asarray(array)
            if got.size and got.tobytes() != np.ascontiguousarray(want.astype(got.dtype)).tobytes():
                raise Wrong("the leaf's value differs from its source")
            tape.sin(i)
            _ = x

        @case(f"python/seed/{_name}/copy={_copy}")
        def _seed(name=_name, copy=_copy):
            np, tapewise = tapewise_modules()
            tape = tapewise.Tape(tapewise.cpu())
            x = tape.leaf(np.ones(4, np.float32))
            y = tape.sin(x)
            array = hostile_arrays()[name]
            try:
                tape.backward(y, array)
            except (tapewise.TapewiseError, TypeError, ValueError) as e:
                if not str(e):
                    raise Wrong("error without a message")
                return
            except Exception as e:  # noqa: BLE001
                raise Wrong(f"unclean error {type(e).__name__}: {e}")
            if array is None:
                return  # no seed: backward seeds with ones, as documented
            if np.asarray(array).size != 4 or np.asarray(array).dtype.kind != "f":
                raise Wrong("a seed of another shape or kind was accepted")


BAD_IDS = [-1, 10**30, 1.5, None, "0", True, False, 2**63, -(2**63) - 1, float("nan")]
for _bad in BAD_IDS:
    for _method in ("sin", "value", "host", "shape", "dtype", "backward", "add", "scale"):
        @case(f"python/ids/{_method}({_bad!r})")
        def _bad_id(method=_method, bad=_bad):
            np, tapewise = tapewise_modules()
            tape = tapewise.Tape(tapewise.cpu())
            x = tape.leaf(np.ones(3, np.float32))
            call = {"add": lambda: tape.add(x, bad), "scale": lambda: tape.scale(bad, 2.0)}.get(
                method, lambda: getattr(tape, method)(bad))
            expect_tape_unchanged_error(tape, call)


OTHER_TAPE_CALLS = {
    "sin": lambda t, a, b: t.sin(a), "add": lambda t, a, b: t.add(b, a), "apply": lambda t, a, b: t.apply("mul", [b, a]),
    "value": lambda t, a, b: t.value(a), "host": lambda t, a, b: t.host(a), "shape": lambda t, a, b: t.shape(a),
    "backward": lambda t, a, b: t.backward(a), "wanted": lambda t, a, b: t.backward(b, wanted=[a]),
    "sin(int)": lambda t, a, b: t.sin(int(a)), "gradients": lambda t, a, b: t.backward(b)[a],
}
for _method in OTHER_TAPE_CALLS:
    @case(f"python/ids/other-tape/{_method}")
    def _other_tape(method=_method):
        """A node of another tape (whose position exists on this one too) is refused, naming both tapes."""
        np, tapewise = tapewise_modules()
        t1, t2 = tapewise.Tape(tapewise.cpu()), tapewise.Tape(tapewise.cpu())
        a, b = t1.leaf(np.ones(3, np.float32)), t2.leaf(np.full(3, 2.0, np.float32))
        error = None

        def call():
            nonlocal error
            try:
                OTHER_TAPE_CALLS[method](t2, a, b)
            except tapewise.InvalidNodeIdError as e:
                error = e
                raise
        expect_tape_unchanged_error(t2, call)
        if error is None or f"of tape {t1.serial} used on tape {t2.serial}" not in str(error):
            raise Wrong(f"refused without naming both tapes: {error}")


@case("python/ids/node-arithmetic")
def _node_arithmetic():
    np, tapewise = tapewise_modules()
    tape = tapewise.Tape(tapewise.cpu())
    a = tape.leaf(np.ones(3, np.float32))
    try:
        a + a  # noqa: B018
    except TypeError:
        return
    raise Wrong("node + node was accepted: nodes are no numbers")


@case("python/gradients/released-then-read")
def _released_gradient():
    np, tapewise = tapewise_modules()
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.ones(3))
    y = tape.sin(x)
    g = tape.backward(y, np.ones(3))
    exported = np.asarray(g[x])
    g.buffer(x).release()
    for read in (lambda: g[x], lambda: g.get(x), lambda: g.host(x)):
        try:
            value = read()
        except (tapewise.TapewiseError, KeyError, ValueError) as e:
            if not str(e) and not isinstance(e, KeyError):
                raise Wrong("error without a message")
            continue
        if value is not None and np.asarray(value).tobytes() != np.cos(np.ones(3)).tobytes():
            raise Wrong("a released gradient read back as garbage")
    if exported.tobytes() != np.cos(np.ones(3)).tobytes():
        raise Wrong("an array exported before the release changed")


@case("python/readonly/bytes-leaf-written")
def _readonly_bytes():
    np, tapewise = tapewise_modules()
    source = bytes(24)
    tape = tapewise.Tape(tapewise.cpu())
    i = tape.leaf(np.frombuffer(source))
    try:
        np.asarray(tape.value(i))[0] = 42
    except (ValueError, TypeError):
        pass
    if source != bytes(24):
        raise Wrong("an immutable bytes object was rewritten")


@case("python/readonly/memmap-leaf-written")
def _readonly_memmap():
    np, tapewise = tapewise_modules()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.bin")
        np.zeros(4).tofile(path)
        m = np.memmap(path, dtype=np.float64, mode="r")
        tape = tapewise.Tape(tapewise.cpu())
        i = tape.leaf(m)
        try:
            np.asarray(tape.value(i))[0] = 42
        except (ValueError, TypeError):
            pass
        if np.fromfile(path).tolist() != [0.0] * 4:
            raise Wrong("a read-only memmap was rewritten")


@case("python/readonly/forward-into-readonly")
def _forward_readonly():
    np, tapewise = tapewise_modules()
    backend = tapewise.cpu()
    x = backend.wrap(np.ones(4, np.float32))
    out_array = np.zeros(4, np.float32)
    out_array.setflags(write=False)
    try:
        out = backend.wrap(out_array)
        backend.forward("sin", [x], out)
    except (tapewise.TapewiseError, TypeError, ValueError):
        pass
    if out_array.tolist() != [0.0] * 4:
        raise Wrong("a read-only array was written as an output")


@case("python/readonly/node-value-written")
def _node_value_written():
    np, tapewise = tapewise_modules()
    tape = tapewise.Tape(tapewise.cpu())
    x = tape.leaf(np.ones(3, np.float32))
    y = tape.sin(x)
    try:
        np.asarray(tape.value(y))[0] = 42
    except (ValueError, TypeError):
        pass
    grads = tape.backward(y, np.ones(3, np.float32))
    if np.asarray(grads[x]).tobytes() != np.cos(np.ones(3, np.float32)).astype(np.float32).tobytes():
        raise Wrong("writing into a node's value changed the backward")


def legacy_dlpack_write(exported) -> None:
    """What a consumer of DLPack before 1.0 may do: take the unversioned capsule, which cannot say
    "read-only", and write through it (torch.utils.dlpack.from_dlpack of the capsule)."""
    import torch
    torch.utils.dlpack.from_dlpack(exported.__dlpack__()).fill_(42)


for _dtype in ("float32", "float64", "float16", "bfloat16"):
    @case(f"python/readonly/node-value-written-through-legacy-dlpack-{_dtype}")
    def _legacy_dlpack_write(dtype=_dtype):
        np, tapewise = tapewise_modules()
        import torch
        tape = tapewise.Tape(tapewise.cpu())
        y = tape.sin(tape.leaf(torch.ones(3, dtype=getattr(torch, dtype))))
        before = torch.from_dlpack(tape.value(y)).clone()
        try:
            legacy_dlpack_write(tape.value(y))
        except (BufferError, TypeError, RuntimeError):
            pass
        if not torch.equal(torch.from_dlpack(tape.value(y)), before):
            raise Wrong("a legacy DLPack consumer wrote a node's value")

    @case(f"python/ecosystem/jax-reads-node-value-{_dtype}")
    def _jax_reads_value(dtype=_dtype):
        np, tapewise = tapewise_modules()
        import jax
        import ml_dtypes
        numpy_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
        tape = tapewise.Tape(tapewise.cpu())
        y = tape.sin(tape.leaf(np.array([0.5, 1.0], dtype=numpy_dtype)))
        try:
            read = np.asarray(jax.dlpack.from_dlpack(tape.value(y))).astype(np.float32)
        except BufferError as refusal:
            raise Wrong(f"JAX cannot read a {dtype} node value: {refusal}")
        if read.tolist() != np.asarray(tape.value(y)).astype(np.float32).tolist():
            raise Wrong("JAX read other values than the node's")


# tapewise.torch's fixed-arity entries: raw addresses are the caller's word (as forward_ptrs'), but
# every other argument is checked before anything runs, and the output is left alone on a refusal.
RAW_ENTRY_BAD = {
    "op-index-past-the-table": dict(op=10**6),
    "op-index-negative": dict(op=-1),
    "dtype-code-unknown": dict(dtype_code=99),
    "second-input-for-a-unary-node": dict(second=True),
    "numel-negative": dict(numel=-4),
    "numel-past-int64": dict(numel=2**70),
    "op-index-a-string": dict(op="sin"),
}
for _label, _bad in RAW_ENTRY_BAD.items():
    for _entry in ("forward", "vjp"):
        @case(f"python/raw-entry/{_entry}-{_label}")
        def _raw_entry(entry=_entry, bad=_bad):
            np, tapewise = tapewise_modules()
            backend = tapewise.cpu()
            x, g = np.ones(4, np.float32), np.ones(4, np.float32)
            out = np.full(4, 7.0, np.float32)
            op = bad.get("op", tapewise.NODE_NAMES.index("sin"))
            b = x.ctypes.data if bad.get("second") else 0
            numel, code = bad.get("numel", 4), bad.get("dtype_code", tapewise._tapewise.DTYPE_CODES["float32"])
            if entry == "forward":
                call = lambda: backend._forward_raw(op, 0.0, 0.0, x.ctypes.data, b, out.ctypes.data, numel, code)
            else:
                call = lambda: backend._vjp_raw(op, 0.0, 0.0, x.ctypes.data, b, g.ctypes.data, out.ctypes.data, b,
                                                numel, code)
            expect_clean_error(call)
            if out.tolist() != [7.0] * 4:
                raise Wrong("a refused call wrote its output")


@case("python/small/allocate-100-dims")
def _allocate_100():
    _, tapewise = tapewise_modules()
    expect_clean_error(lambda: tapewise.cpu().allocate([1] * 100))


@case("python/small/copy-oversized")
def _copy_oversized():
    np, tapewise = tapewise_modules()
    big = np.lib.stride_tricks.as_strided(np.zeros(1, np.float64), shape=(2**40,), strides=(0,))
    e = expect_clean_error(lambda: tapewise.Tape(tapewise.cpu()).leaf(big, copy=True),
                           (tapewise.TapewiseError, ValueError, TypeError, MemoryError))
    if not hasattr(e, "code"):
        raise Wrong(f"{type(e).__name__} without .code")


@case("python/small/threshold-negative")
def _threshold_negative():
    _, tapewise = tapewise_modules()
    tape = tapewise.Tape(tapewise.cpu())
    try:
        tape.program_threshold = -5
    except (tapewise.TapewiseError, ValueError, TypeError):
        return
    raise Wrong(f"a negative threshold accepted (reads back {tape.program_threshold})")


@case("python/small/conform-run-str-ops")
def _conform_str_ops():
    _, tapewise = tapewise_modules()
    import tapewise.conform as conform
    try:
        report = conform.run(ops="sin", dtype="float32", backend="cpu", cases=2, seed=1, binary=CONFORM)
    except (TypeError, ValueError, conform.ConformError) as e:
        if "'s'" in str(e) or "unknown node 's'" in str(e):
            raise Wrong("the string was split into letters")
        return
    if [row["op"] for row in report["rows"]] != ["sin"]:
        raise Wrong(f"rows {[row['op'] for row in report['rows']]}")


def vectors_with(tmp: str, edit: Callable[[dict], None]) -> str:
    folder = make_vectors(tmp)
    index_path = os.path.join(folder, "index.json")
    index = json.load(open(index_path))
    edit(index)
    with open(index_path, "w") as f:
        json.dump(index, f)
    return folder


SUITE_EDITS = {
    "outputs-absolute": lambda index, v: index["suites"][0]["outputs"].update(y=v),
    "outputs-dotdot": lambda index, v: index["suites"][0]["outputs"].update(y="../../victim.txt"),
    "id-dotdot": lambda index, v: index["suites"][0].update(id=".."),
    "id-absolute": lambda index, v: index["suites"][0].update(id=os.path.dirname(v)),
    "inputs-absolute": lambda index, v: index["suites"][0]["inputs"].update(x=v),
}
for _edit_name, _edit in SUITE_EDITS.items():
    @case(f"python/answer_vectors/{_edit_name}")
    def _answer_vectors(edit=_edit):
        _, tapewise = tapewise_modules()
        import tapewise.conform as conform
        with tempfile.TemporaryDirectory() as tmp:
            target = victim(tmp)
            folder = vectors_with(tmp, lambda index: edit(index, target))
            before = sorted(os.listdir(tmp))
            try:
                conform.answer_vectors(folder, conform.tapewise_answer(tapewise.cpu()))
            except (ValueError, TypeError, tapewise.TapewiseError):
                pass
            if not os.path.exists(target):
                raise Wrong("answer_vectors deleted a file outside the suite folder")
            assert_victim_intact(target)
            if sorted(os.listdir(tmp)) != before:
                raise Wrong("answer_vectors wrote outside the suite folder")


@case("python/answer_vectors/out-symlink")
def _answer_vectors_symlink():
    _, tapewise = tapewise_modules()
    import tapewise.conform as conform
    with tempfile.TemporaryDirectory() as tmp:
        target = victim(tmp)
        folder = make_vectors(tmp)
        suite = json.load(open(os.path.join(folder, "index.json")))["suites"][0]
        os.symlink(target, os.path.join(folder, suite["id"], suite["outputs"]["y"]))
        try:
            conform.answer_vectors(folder, conform.tapewise_answer(tapewise.cpu()))
        except (ValueError, TypeError, tapewise.TapewiseError):
            pass
        assert_victim_intact(target)


@case("python/answer_vectors/nested-index")
def _answer_vectors_nested():
    _, tapewise = tapewise_modules()
    import tapewise.conform as conform
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_vectors(tmp)
        with open(os.path.join(folder, "index.json"), "w") as f:
            f.write("{\"schema\": " + nested(200_000) + "}")
        expect_clean_error(lambda: conform.answer_vectors(folder, conform.tapewise_answer(tapewise.cpu())))



# ---------------------------------------------------------------- the C ABI (ctypes on libtapewise.so)

def c_library():
    import ctypes
    path = os.environ.get("TAPEWISE_LIB")
    if not path:
        raise Wrong("TAPEWISE_LIB is not set (libtapewise.so of a BUILD_SHARED_LIBS=ON build)")
    return ctypes, ctypes.CDLL(path)


def dlpack_types(ctypes):
    class DLDevice(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                    ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

    class DLManagedTensor(ctypes.Structure):
        pass

    DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                                ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]
    return DLManagedTensor


def dlpack_tensor(ctypes, data, shape, strides=None, byte_offset=0, device_type=1, code=2, bits=32):
    DLManagedTensor = dlpack_types(ctypes)
    t = DLManagedTensor()
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    t.dl_tensor.data = data
    t.dl_tensor.device.device_type = device_type
    t.dl_tensor.ndim = len(shape)
    t.dl_tensor.dtype.code, t.dl_tensor.dtype.bits, t.dl_tensor.dtype.lanes = code, bits, 1
    t.dl_tensor.shape = dims
    if strides is not None:
        t.dl_tensor.strides = (ctypes.c_int64 * max(len(strides), 1))(*strides)
    t.dl_tensor.byte_offset = byte_offset
    t._keep = dims
    return t


DLPACK_CASES = {
    "null-data-offset-4096": dict(data=None, shape=[4], byte_offset=4096),
    "offset-2^63": dict(data=4096, shape=[4], byte_offset=2**63),
    "offset-wraps": dict(data=2**64 - 8, shape=[4], byte_offset=16),
    "ndim-100": dict(data=4096, shape=[1] * 100),
    "ndim-33": dict(data=4096, shape=[1] * 33),
    "negative-dim": dict(data=4096, shape=[-4]),
    "device-type-999": dict(data=4096, shape=[4], device_type=999),
    "device-type-negative": dict(data=4096, shape=[4], device_type=-1),
    "dtype-int32": dict(data=4096, shape=[4], code=0),
    "dtype-float8": dict(data=4096, shape=[4], bits=8),
    "dtype-bfloat32": dict(data=4096, shape=[4], code=4, bits=32),
    "dtype-code-77": dict(data=4096, shape=[4], code=77),
    "strided": dict(data=4096, shape=[4], strides=[2]),
    "overflowing-shape": dict(data=4096, shape=[2**62, 4]),
}


def dlpack_import_refused(name: str, via_tape: bool) -> None:
    ctypes, lib = c_library()
    lib.tw_last_error.restype = ctypes.c_char_p
    backend = ctypes.c_void_p()
    if lib.tw_backend_create_cpu(ctypes.byref(backend)) != 0:
        raise Wrong("no CPU backend")
    tensor = dlpack_tensor(ctypes, **DLPACK_CASES[name])
    if via_tape:
        tape = ctypes.c_void_p()
        lib.tw_tape_create(backend, ctypes.byref(tape))
        out = ctypes.c_int64(-1)
        status = lib.tw_tape_leaf_dlpack(tape, ctypes.byref(tensor), 1, ctypes.byref(out))
        message = lib.tw_last_error()  # read before the next call replaces it
        size = ctypes.c_int64(-1)
        lib.tw_tape_size(tape, ctypes.byref(size))
        if status != 0 and size.value != 0:
            raise Wrong("the tape changed on an error")
    else:
        out = ctypes.c_void_p()
        status = lib.tw_buffer_from_dlpack(backend, ctypes.byref(tensor), ctypes.byref(out))
        message = lib.tw_last_error()
    if status == 0:
        raise Wrong("a malformed DLPack tensor was adopted")
    if not message:
        raise Wrong("refused without a message")


for _dl in DLPACK_CASES:
    for _via_tape in (False, True):
        @case(f"c_abi/dlpack/{_dl}/{'tape_leaf' if _via_tape else 'buffer'}")
        def _dlpack_case(name=_dl, via_tape=_via_tape):
            dlpack_import_refused(name, via_tape)


@case("c_abi/dlpack/zero-size-any-strides")
def _dlpack_zero_size():
    ctypes, lib = c_library()
    backend = ctypes.c_void_p()
    lib.tw_backend_create_cpu(ctypes.byref(backend))
    tensor = dlpack_tensor(ctypes, data=None, shape=[0, 3], strides=[1, 1])
    out = ctypes.c_void_p()
    if lib.tw_buffer_from_dlpack(backend, ctypes.byref(tensor), ctypes.byref(out)) != 0:
        lib.tw_last_error.restype = ctypes.c_char_p
        raise Wrong("a zero-size tensor refused: " + lib.tw_last_error().decode())
    lib.tw_buffer_destroy(out)


@case("c_abi/ids/other-tape")
def _c_other_tape():
    """Two tapes' first nodes: each tape refuses the other's id, naming both tapes, and stays as it was."""
    ctypes, lib = c_library()
    lib.tw_last_error.restype = ctypes.c_char_p
    backend, t1, t2 = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    lib.tw_backend_create_cpu(ctypes.byref(backend))
    lib.tw_tape_create(backend, ctypes.byref(t1))
    lib.tw_tape_create(backend, ctypes.byref(t2))
    data = (ctypes.c_float * 3)(1.0, 2.0, 3.0)
    shape = (ctypes.c_int64 * 1)(3)
    a, b, y = ctypes.c_int64(-1), ctypes.c_int64(-1), ctypes.c_int64(-1)
    lib.tw_tape_leaf_host(t1, data, ctypes.c_size_t(12), shape, 1, 0, 1, ctypes.byref(a))
    lib.tw_tape_leaf_host(t2, data, ctypes.c_size_t(12), shape, 1, 0, 1, ctypes.byref(b))
    tw_op_sin = 13  # pinned by the ABI
    status = lib.tw_tape_apply(t2, tw_op_sin, ctypes.byref(a), 1, None, 0, ctypes.byref(y))
    message = lib.tw_last_error().decode()
    size = ctypes.c_int64(-1)
    lib.tw_tape_size(t2, ctypes.byref(size))
    if status != 1:  # TW_INVALID_NODE_ID
        raise Wrong(f"another tape's id: status {status}")
    if f"of tape {a.value >> 32} used on tape {b.value >> 32}" not in message:
        raise Wrong(f"refused without naming both tapes: {message}")
    if size.value != 1 or y.value != -1:
        raise Wrong("the tape changed on an error")


@case("c_abi/threshold-negative")
def _c_threshold_negative():
    ctypes, lib = c_library()
    backend, tape = ctypes.c_void_p(), ctypes.c_void_p()
    lib.tw_backend_create_cpu(ctypes.byref(backend))
    lib.tw_tape_create(backend, ctypes.byref(tape))
    if lib.tw_tape_set_program_threshold(tape, ctypes.c_int64(-1)) == 0:
        raise Wrong("a negative threshold accepted")


# ---------------------------------------------------------------- the driver

OUTCOMES = {0: "clean", 3: "wrong", 5: "crash", 6: "hang"}


def run_one(name: str) -> None:
    try:
        CASES[name]()
    except Wrong as e:
        print(f"WRONG: {e}", file=sys.stderr)
        sys.exit(3)


def main() -> int:
    global CONFORM
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conform", default=CONFORM, help="the tapewise-conform binary")
    parser.add_argument("--lib", default=os.environ.get("TAPEWISE_LIB", ""),
                        help="libtapewise.so of a shared build, for the C ABI cases")
    parser.add_argument("--json", help="write every case's outcome to this file")
    parser.add_argument("-k", default="", help="run only cases whose name contains this")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=float, default=120, help="seconds per case before it counts as a hang")
    args = parser.parse_args()
    CONFORM = os.path.abspath(args.conform) if os.path.sep in args.conform else args.conform
    os.environ["TAPEWISE_CONFORM"] = CONFORM
    if args.lib:
        os.environ["TAPEWISE_LIB"] = os.path.abspath(args.lib)
    if args.one:
        run_one(args.one)
        return 0
    results = []
    for name in [n for n in CASES if args.k in n]:
        start = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--conform", CONFORM, "--one", name],
                                  capture_output=True, text=True, timeout=args.limit)
            rc = proc.returncode
            outcome = OUTCOMES.get(rc, "crash" if rc < 0 or rc >= 128 else "wrong")
            detail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        except subprocess.TimeoutExpired:
            outcome, detail = "hang", f"over {args.limit} s"
        results.append({"case": name, "outcome": outcome, "seconds": round(time.monotonic() - start, 2),
                        "detail": detail[:300]})
        if outcome != "clean":
            print(f"{outcome.upper():6} {name}: {detail[:200]}")
    counts = Counter(r["outcome"] for r in results)
    surfaces = Counter(r["case"].split("/")[0] for r in results)
    line = (f"{len(results)} cases ({', '.join(f'{n} {s}' for s, n in sorted(surfaces.items()))}): "
            f"{counts['clean']} clean, {counts['crash']} crashes, {counts['hang']} hangs, {counts['wrong']} wrong")
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": line, "counts": dict(counts), "cases": results}, f, indent=1)
    return 0 if counts["clean"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
