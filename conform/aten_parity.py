#!/usr/bin/env python3
"""conform/aten_parity.py — bitwise parity of tapewise's nodes with PyTorch's ATen ops executing
TorchLean's staging (the `staged` column of spec/ops.def, spelled out in spec/conventions.md), on
the GPU.

For every node and dtype it feeds the same inputs (random normal, wide log-uniform in the node's
domain, its kink, random bit patterns, and every pair of special values) to tapewise through
`tapewise-conform eval` (fused and staged VJP) and to ATen, one ATen op per stage, and counts the
values whose bits differ (any NaN matches any NaN). The nodes, their domains, kinks, scalar sets and
whether their row is graded come from the op table as the runner exports it (`tapewise-conform ops
--json`); the stagings below are this script's own transcription, never the production code's. The
goal is zero for every graded node; silu's TorchLean staging is not published (aten_parity ungraded
in spec/ops.def): its row compares against our own reading of it and is reported, not graded. A node
TorchLean does not have (aten_parity none) is listed as not compared.

    python3 conform/aten_parity.py --conform build/bin/tapewise-conform --out DIR

writes a table to stdout and DIR/aten_parity.json; exit 0 when every graded row has no mismatch.
Needs numpy and torch (with a CUDA device). Without a GPU, `--lib libm --backend cpu` runs the same
staging with numpy arithmetic and the host C library's exp/log/sin/cos/tanh (what the CPU backend
calls), where every node must match: a test of this script, not a parity claim. `--lib numpy` uses
numpy's own transcendentals (only the exact nodes then match).
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

UNGRADED_NOTE = "TorchLean's staging is not published; compared with our reading of it (not graded)"
OPS_SCHEMA = "tapewise-conform.ops/1"


# --- the op table (spec/ops.def, as the runner was built with it) ---------------------------------

def read_ops(conform, ops_json=None):
    """The op table's rows (one dict per node: name, arity, scalars, domain_log2_lo/hi, positive_only,
    kink, aten_parity, run_scalars, ...): from the JSON file `ops_json` if given, else from
    `<conform> ops --json -`, so that the table is the one the tested binary was built from."""
    if ops_json:
        with open(ops_json) as f:
            table = json.load(f)
        where = ops_json
    else:
        done = subprocess.run([conform, "ops", "--json", "-"], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{conform} ops --json - failed ({done.returncode}): {done.stderr.strip()}")
        table = json.loads(done.stdout)
        where = f"{conform} ops --json"
    if table.get("schema") != OPS_SCHEMA:
        raise RuntimeError(f"{where}: schema is {table.get('schema')!r}, not {OPS_SCHEMA}")
    return table["ops"]


def has_staging(op):
    """Whether this script transcribes the node's staging (a dry run on one element)."""
    one = np.zeros(1, dtype=np.float64)
    scalars = op["run_scalars"][0] if op["run_scalars"] else {}
    try:
        with np.errstate(all="ignore"):
            staged(NumpyLib(), op["name"], [one] * op["arity"], one, scalars)
    except NoStaging:
        return False
    return True


def staging_mismatches(ops):
    """Where this script and the table's aten_parity column disagree: a graded or ungraded node
    without a staging here, or a `none` node (TorchLean has no such node) with one."""
    problems = []
    for op in ops:
        compared = op["aten_parity"] != "none"
        if compared != has_staging(op):
            problems.append(f"{op['name']} (aten_parity {op['aten_parity']}, "
                            f"{'no staging' if compared else 'a staging'} in this script)")
    return problems


def compared_ops(ops, names, error):
    """(the nodes to compare, the names of those TorchLean lacks) of the table `ops`, restricted to
    `names` ("all" or a comma-separated list); `error(message)` reports an unknown name or a table
    whose aten_parity column and this script's stagings disagree (and does not return)."""
    if names != "all":
        wanted = names.split(",")
        unknown = set(wanted) - {o["name"] for o in ops}
        if unknown:
            error(f"unknown nodes: {', '.join(sorted(unknown))}")
        ops = [o for o in ops if o["name"] in wanted]
    problems = staging_mismatches(ops)
    if problems:
        error("the op table's aten_parity and conform/aten_parity.py's stagings disagree for: " + "; ".join(problems))
    return [o for o in ops if o["aten_parity"] != "none"], [o["name"] for o in ops if o["aten_parity"] == "none"]


def kink_points(op):
    """The values spec/ops.def's `kink` names for a unary node: ±0 (zero, and by default), or the
    run sets' bounds (bounds). Ties (binary nodes) are made in make_inputs."""
    if op["kink"] == "bounds":
        return [v for s in op["run_scalars"] for v in s.values()]
    return [0.0, -0.0]


# --- inputs ----------------------------------------------------------------------------------------

def special_values(dtype):
    fi = np.finfo(dtype)
    tiny_sub = np.array(1, dtype=np.uint32 if dtype == np.float32 else np.uint64).view(dtype)[()]
    vals = [0.0, -0.0, tiny_sub, -tiny_sub, fi.tiny, -fi.tiny, fi.max, -fi.max, np.inf, -np.inf, np.nan,
            1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 20.0, -20.0, 100.0, -100.0, 1e-30, -1e-30]
    return np.array(vals, dtype=dtype)


def make_inputs(op, dtype, n, rng):
    """Arrays [inputs..., g] of one dtype: normal, wide (log-uniform in the domain [2^lo, 2^hi)), bit
    patterns, specials; binary nodes also get ties (b = a), unary ones their kink (kink_points)."""
    cols = op["arity"] + 1
    k = n // 4
    normal = rng.standard_normal((cols, k)).astype(dtype)
    exponents = rng.uniform(op["domain_log2_lo"], op["domain_log2_hi"], (cols, k))
    signs = np.where(rng.integers(0, 2, (cols, k)) == 1, -1.0, 1.0)
    wide = (signs * np.exp2(exponents)).astype(dtype)
    if op["positive_only"]:
        wide[:-1] = np.abs(wide[:-1])
    uint = np.uint32 if dtype == np.float32 else np.uint64
    bits = rng.integers(0, np.iinfo(uint).max, (cols, k), dtype=uint, endpoint=True).view(dtype)
    sv = special_values(dtype)
    if op["arity"] == 1:
        x, g = np.meshgrid(sv, sv, indexing="ij")
        special = np.stack([x.ravel(), g.ravel()])
    else:
        a, b = np.meshgrid(sv, sv, indexing="ij")
        g = np.resize(sv[::-1], a.size)
        special = np.stack([a.ravel(), b.ravel(), g])
    points = np.array(kink_points(op), dtype=dtype)
    for block in (normal, wide):
        m = k // 8
        if op["arity"] == 2:
            block[1, :m] = block[0, :m]                       # ties
        else:
            block[0, :m] = points[rng.integers(0, points.size, m)]  # kinks
    rest = max(0, n - 3 * k - special.shape[1])
    extra = rng.standard_normal((cols, rest)).astype(dtype)
    return [np.ascontiguousarray(c) for c in np.concatenate([normal, wide, bits, special.astype(dtype), extra], axis=1)]


# --- the array libraries: ATen (torch) and a numpy stand-in ---------------------------------------

class TorchLib:
    """Each method is one ATen op in the tensor's dtype (one rounding per element)."""

    def __init__(self, device):
        import torch
        self.t = torch
        self.device = device

    def array(self, a):
        return self.t.from_numpy(a).to(self.device)

    def numpy(self, t):
        return t.cpu().numpy()

    def scalar(self, v, like):  # a 0-d tensor of the dtype: v rounded once (RNE), as TorchLean does
        return self.t.full((), v, dtype=like.dtype, device=like.device)

    def full_like(self, like, v): return self.t.full_like(like, v)
    def zeros_like(self, like): return self.t.zeros_like(like)
    def clone(self, a): return self.t.clone(a)
    def add(self, a, b): return self.t.add(a, b)
    def sub(self, a, b): return self.t.sub(a, b)
    def mul(self, a, b): return self.t.mul(a, b)
    def div(self, a, b): return self.t.div(a, b)
    def neg(self, a): return self.t.neg(a)
    def abs(self, a): return self.t.abs(a)
    def sqrt(self, a): return self.t.sqrt(a)
    def exp(self, a): return self.t.exp(a)
    def log(self, a): return self.t.log(a)
    def sin(self, a): return self.t.sin(a)
    def cos(self, a): return self.t.cos(a)
    def tanh(self, a): return self.t.tanh(a)
    def sigmoid(self, a): return self.t.sigmoid(a)
    def reciprocal(self, a): return self.t.reciprocal(a)
    def fmax(self, a, b): return self.t.fmax(a, b)
    def fmin(self, a, b): return self.t.fmin(a, b)
    def where(self, c, a, b): return self.t.where(c, a, b)
    def gt(self, a, b): return self.t.gt(a, b)
    def lt(self, a, b): return self.t.lt(a, b)
    def le(self, a, b): return self.t.le(a, b)
    def logical_and(self, a, b): return self.t.logical_and(a, b)


class NumpyLib:
    """numpy in ATen's place, for testing the script without a GPU (exact ops only agree)."""

    def array(self, a): return a
    def numpy(self, a): return a
    def scalar(self, v, like): return like.dtype.type(v)
    def full_like(self, like, v): return np.full_like(like, v)
    def zeros_like(self, like): return np.zeros_like(like)
    def clone(self, a): return a.copy()
    def add(self, a, b): return np.add(a, b)
    def sub(self, a, b): return np.subtract(a, b)
    def mul(self, a, b): return np.multiply(a, b)
    def div(self, a, b): return np.divide(a, b)
    def neg(self, a): return np.negative(a)
    def abs(self, a): return np.abs(a)
    def sqrt(self, a): return np.sqrt(a)
    def exp(self, a): return np.exp(a)
    def log(self, a): return np.log(a)
    def sin(self, a): return np.sin(a)
    def cos(self, a): return np.cos(a)
    def tanh(self, a): return np.tanh(a)
    def sigmoid(self, a): return np.divide(1, np.add(1, np.exp(np.negative(a))))
    def reciprocal(self, a): return np.divide(1, a)
    def fmax(self, a, b): return _order_zeros(np.fmax(a, b), a, b, take_max=True)
    def fmin(self, a, b): return _order_zeros(np.fmin(a, b), a, b, take_max=False)
    def where(self, c, a, b): return np.where(c, a, b)
    def gt(self, a, b): return np.greater(a, b)
    def lt(self, a, b): return np.less(a, b)
    def le(self, a, b): return np.less_equal(a, b)
    def logical_and(self, a, b): return np.logical_and(a, b)


class LibmLib(NumpyLib):
    """numpy arithmetic with the host C library's exp/log/sin/cos/tanh — the functions tapewise's CPU
    backend calls — so that every node, transcendental ones included, must match `--backend cpu` bit
    for bit: a test of this script's staging without a GPU."""

    def __init__(self):
        import ctypes
        import ctypes.util
        libm = ctypes.CDLL(ctypes.util.find_library("m"))
        self.functions = {}
        for name in ("exp", "log", "sin", "cos", "tanh"):
            for suffix, ctype, dtype in (("f", ctypes.c_float, np.float32), ("", ctypes.c_double, np.float64)):
                f = getattr(libm, name + suffix)
                f.restype, f.argtypes = ctype, [ctype]
                self.functions[(name, dtype)] = f

    def _apply(self, name, a):
        a = np.asarray(a)
        f = self.functions[(name, a.dtype.type)]
        return np.array([f(v) for v in a.ravel().tolist()], dtype=a.dtype).reshape(a.shape)

    def exp(self, a): return self._apply("exp", a)
    def log(self, a): return self._apply("log", a)
    def sin(self, a): return self._apply("sin", a)
    def cos(self, a): return self._apply("cos", a)
    def tanh(self, a): return self._apply("tanh", a)
    def sigmoid(self, a): return np.divide(1, np.add(1, self.exp(np.negative(a))))


def _order_zeros(r, a, b, take_max):
    # CUDA's fmax/fmin order the zeros (fmax(-0, +0) = +0, fmin(-0, +0) = -0); numpy's may return either.
    a, b = np.broadcast_to(a, r.shape), np.broadcast_to(b, r.shape)
    negative = (np.signbit(a) & np.signbit(b)) if take_max else (np.signbit(a) | np.signbit(b))
    zero = np.where(negative, -0.0, 0.0).astype(r.dtype)
    return np.where((a == 0) & (b == 0), zero, r)


# --- TorchLean's staging, one ATen op per stage (spec/ops.def `staged`, spec/conventions.md) ------

class NoStaging(LookupError):
    """This script has no staging for a node of the table."""


def softplus_buf(L, x):
    """TorchLean's softplus: max(x, 0) + log(1 + exp(-|x|)), eight stages, log not log1p."""
    z, o = L.zeros_like(x), L.full_like(x, 1.0)
    m = L.fmax(x, z)
    ax = L.abs(x)
    na = L.mul(ax, L.scalar(-1.0, x))
    e = L.exp(na)
    op = L.add(o, e)
    l = L.log(op)
    return L.add(m, l)


def sigmoid_split(L, x):
    """Our reading of silu's sigmoid (TorchLean's sigmoidSpec): 1/(1+exp(-x)) for x > 0, else e/(1+e)."""
    ones = L.full_like(x, 1.0)
    positive = L.div(ones, L.add(ones, L.exp(L.neg(x))))
    e = L.exp(x)
    negative = L.div(e, L.add(ones, e))
    return L.where(L.gt(x, L.zeros_like(x)), positive, negative)


def staged(L, name, ins, g, s):
    """(y, [gradients]) of node `name` as TorchLean stages it in ATen."""
    x = ins[0]
    b = ins[-1]
    zeros = L.zeros_like(x)
    ones = L.full_like(x, 1.0)
    minus_one = L.scalar(-1.0, x)
    half = L.scalar(0.5, x)
    if name == "add":
        return L.add(x, b), [L.clone(g), L.clone(g)]
    if name == "sub":
        return L.sub(x, b), [L.clone(g), L.sub(L.zeros_like(g), g)]
    if name == "mul":
        return L.mul(x, b), [L.mul(g, b), L.mul(g, x)]
    if name == "neg":
        return L.neg(x), [L.neg(g)]
    if name == "scale":
        c = L.scalar(s["c"], x)
        return L.mul(x, c), [L.mul(g, c)]
    if name == "abs":
        sign = L.where(L.gt(x, zeros), ones, L.where(L.lt(x, zeros), L.full_like(x, -1.0), zeros))
        return L.abs(x), [L.mul(sign, g)]
    if name == "sqrt":
        y = L.sqrt(L.where(L.le(x, zeros), zeros, x))
        p = L.gt(x, zeros)
        r = L.sqrt(L.where(p, x, ones))
        f = L.reciprocal(L.mul(r, L.scalar(2.0, x)))
        return y, [L.where(p, L.mul(g, f), zeros)]
    if name == "clamp":
        lo, hi = L.scalar(s["lo"], x), L.scalar(s["hi"], x)
        y = L.fmin(L.fmax(x, lo), hi)
        return y, [L.where(L.logical_and(L.gt(x, lo), L.lt(x, hi)), g, zeros)]
    if name in ("max", "min"):
        y = L.fmax(x, b) if name == "max" else L.fmin(x, b)
        a_wins = L.gt(x, b) if name == "max" else L.gt(b, x)
        b_wins = L.gt(b, x) if name == "max" else L.gt(x, b)
        h = L.mul(g, half)
        da = L.where(a_wins, g, L.where(b_wins, zeros, h))
        db = L.where(b_wins, g, L.where(a_wins, zeros, h))
        return y, [da, db]
    if name == "div":
        q1 = L.div(x, b)
        q2 = L.div(q1, b)
        t = L.mul(g, q2)
        return L.div(x, b), [L.div(g, b), L.sub(zeros, t)]
    if name == "relu":
        p = L.gt(x, zeros)
        return L.where(p, x, zeros), [L.where(p, g, zeros)]
    if name == "exp":
        return L.exp(x), [L.mul(g, L.exp(x))]
    if name == "sin":
        return L.sin(x), [L.mul(L.cos(x), g)]
    if name == "cos":
        return L.cos(x), [L.mul(L.mul(L.sin(x), minus_one), g)]
    if name == "log":
        return L.log(x), [L.mul(g, L.reciprocal(x))]
    if name == "inv":
        r = L.reciprocal(x)
        r2 = L.mul(r, r)
        p = L.mul(g, r2)
        return L.reciprocal(x), [L.mul(p, minus_one)]
    if name == "safeLog":
        eps = L.full_like(x, s["eps"])  # E = full(R(eps))
        den = L.add(softplus_buf(L, x), eps)
        sig = L.sigmoid(x)
        dl = L.div(sig, den)
        return L.log(den), [L.mul(g, dl)]
    if name == "sigmoid":
        y = L.sigmoid(x)
        omy = L.sub(ones, y)
        dy = L.mul(y, omy)
        return L.sigmoid(x), [L.mul(g, dy)]
    if name == "tanh":
        y = L.tanh(x)
        y2 = L.mul(y, y)
        dy = L.sub(ones, y2)
        return L.tanh(x), [L.mul(g, dy)]
    if name == "silu":
        sg = sigmoid_split(L, x)
        xs = L.mul(x, sg)
        oms = L.sub(ones, sg)
        t = L.mul(xs, oms)
        d = L.add(sg, t)
        return L.mul(x, sg), [L.mul(g, d)]
    if name == "gelu":
        c = L.scalar(0.044715, x)
        k = L.scalar(0.79788456080286535588, x)
        c3 = L.scalar(3.0 * float(c), x)   # R(3 * R(c)), R the dtype's own rounding of a double
        u = L.add(x, L.mul(L.mul(L.mul(x, c), x), x))
        t = L.tanh(L.mul(u, k))
        t1 = L.add(t, ones)
        y = L.mul(L.mul(x, t1), half)
        sech = L.sub(ones, L.mul(t, t))
        q = L.mul(L.mul(x, c3), x)
        inner = L.mul(L.add(q, ones), k)
        dt = L.mul(L.mul(x, sech), inner)
        num = L.add(t1, dt)
        return y, [L.mul(L.mul(num, half), g)]
    if name == "softplus":
        return softplus_buf(L, x), [L.mul(g, L.sigmoid(x))]
    raise NoStaging(f"conform/aten_parity.py has no ATen staging for node {name} (spec/ops.def)")


# --- comparison ------------------------------------------------------------------------------------

def mismatch_mask(a, b):
    """True where the bits differ, except that any NaN matches any NaN."""
    ints = np.uint32 if a.dtype == np.float32 else np.uint64
    return (a.view(ints) != b.view(ints)) & ~(np.isnan(a) & np.isnan(b))


def hexs(v):
    return float(v).hex() if np.isfinite(v) else str(float(v))


def run_eval(conform, name, folder, files, scalars, path, backend):
    cmd = [conform, "eval", name, "--backend", backend, "--out", folder, "--prefix", f"{path}_", f"--{path}"]
    for key, f in files.items():
        cmd += [f"--{key}", f]
    for key, v in scalars.items():
        cmd += [f"--{key}", float(v).hex()]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conform", required=True, help="path of the tapewise-conform binary")
    p.add_argument("--out", required=True, help="folder for the inputs, outputs and aten_parity.json")
    p.add_argument("--elements", type=int, default=1 << 16, help="elements per node, dtype and scalar set")
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--ops", default="all", help="comma-separated node names, or all")
    p.add_argument("--dtype", default="all", choices=["all", "float32", "float64"])
    p.add_argument("--lib", default="torch", choices=["torch", "numpy", "libm"],
                   help="torch: ATen on --device; numpy / libm: self-tests of this script on the CPU backend")
    p.add_argument("--device", default="cuda", help="torch device for ATen")
    p.add_argument("--backend", default="cuda", choices=["cuda", "cpu"], help="tapewise backend for eval")
    p.add_argument("--ops-json", help="the op table as `tapewise-conform ops --json FILE` wrote it "
                                      "(default: asked of --conform itself)")
    args = p.parse_args(argv)
    np.seterr(all="ignore")  # overflow, NaN and division by zero are among the inputs on purpose

    ops, not_compared = compared_ops(read_ops(args.conform, args.ops_json), args.ops, p.error)
    dtypes = [np.float32, np.float64] if args.dtype == "all" else [np.dtype(args.dtype).type]
    lib = {"torch": lambda: TorchLib(args.device), "numpy": NumpyLib, "libm": LibmLib}[args.lib]()
    if args.lib == "torch":
        import torch
        # TorchLean's settings that could touch elementwise work: none change these ops, but pin them.
        torch.backends.cuda.matmul.allow_tf32 = False
        print(f"torch {torch.__version__} on {torch.cuda.get_device_name() if args.device.startswith('cuda') else args.device}")
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    started = time.time()

    rows = []
    for op in ops:
        for dtype in dtypes:
            dname = np.dtype(dtype).name
            ins_all = make_inputs(op, dtype, args.elements, rng)
            in_names = ["x"] if op["arity"] == 1 else ["a", "b"]
            grad_names = ["dx"] if op["arity"] == 1 else ["da", "db"]
            for k, scalars in enumerate(op["run_scalars"] or [{}]):
                folder = os.path.join(args.out, f"{op['name']}_{dname}_{k}")
                os.makedirs(folder, exist_ok=True)
                files = {}
                for name, arr in zip(in_names + ["g"], ins_all):
                    files[name] = os.path.join(folder, f"{name}.npy")
                    np.save(files[name], arr)
                dev = [lib.array(a) for a in ins_all]
                y_ref, grads_ref = staged(lib, op["name"], dev[:-1], dev[-1], scalars)
                expected = {"y": lib.numpy(y_ref)}
                expected.update({n: lib.numpy(gr) for n, gr in zip(grad_names, grads_ref)})
                for path in ("fused", "staged"):
                    run_eval(args.conform, op["name"], folder, files, scalars, path, args.backend)
                    counts, examples = {}, []
                    for name, want in expected.items():
                        got = np.load(os.path.join(folder, f"{path}_{name}.npy"))
                        bad = mismatch_mask(got, want)
                        counts[name] = int(bad.sum())
                        for i in np.flatnonzero(bad)[:3]:
                            examples.append({"output": name, "index": int(i),
                                             "inputs": {n: hexs(a[i]) for n, a in zip(in_names + ["g"], ins_all)},
                                             "tapewise": hexs(got[i]), "aten": hexs(want[i])})
                    rows.append({"op": op["name"], "dtype": dname, "path": path, "scalars": scalars,
                                 "elements": int(ins_all[0].size), "mismatches": counts,
                                 "total": sum(counts.values()), "graded": op["aten_parity"] == "graded",
                                 "note": UNGRADED_NOTE if op["aten_parity"] != "graded" else "", "examples": examples})

    # The table.
    print(f"{'node':9}{'dtype':9}{'path':8}{'scalars':16}{'elements':>9}  {'mismatches (y, grads)':30}{'total':>7}  note")
    for r in rows:
        sc = " ".join(f"{k}={v:.9g}" for k, v in r["scalars"].items())
        mm = " ".join(f"{k}={v}" for k, v in r["mismatches"].items())
        print(f"{r['op']:9}{r['dtype']:9}{r['path']:8}{sc:16}{r['elements']:>9}  {mm:30}{r['total']:>7}  {r['note']}")
    failing = [r for r in rows if r["graded"] and r["total"] > 0]
    graded = [r for r in rows if r["graded"]]
    against = "ATen" if args.lib == "torch" else f"the {args.lib} stand-in"
    print(f"\n{len(graded) - len(failing)}/{len(graded)} graded rows bit-identical to {against} "
          f"({len(rows) - len(graded)} ungraded), {time.time() - started:.1f} s")
    if not_compared:
        print(f"not compared (TorchLean has no such node; spec/ops.def aten_parity none): {', '.join(not_compared)}")
    for r in failing:  # one example per failing row; the JSON keeps up to three per output
        e = r["examples"][0]
        print(f"  {r['op']} {r['dtype']} {r['path']} {e['output']}[{e['index']}]: inputs {e['inputs']} "
              f"tapewise {e['tapewise']} {args.lib} {e['aten']}")
    report = {"schema": "tapewise-aten-parity/1", "lib": args.lib, "device": args.device, "backend": args.backend,
              "seed": args.seed, "elements": args.elements, "rows": rows, "not_compared": not_compared,
              "summary": {"graded_rows": len(graded), "identical_rows": len(graded) - len(failing),
                          "conforms": not failing}}
    with open(os.path.join(args.out, "aten_parity.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {os.path.join(args.out, 'aten_parity.json')}")
    return 0 if not failing else 1


if __name__ == "__main__":
    sys.exit(main())
