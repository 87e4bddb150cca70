#!/usr/bin/env python3
"""prove/mutants.py — the prover is not vacuous: seeded mutants of the fused kernels' code
(cuda/kernels/op_math.cuh and the scalar primitives it calls), each of which the prover must refute
against the spec (spec/stagings.def, which the staged side runs) with a counterexample that replays on
the real kernels (the CPU backend, built from the mutant), while the unmutated code is proven
(`tapewise-conform prove`, the same prover); and mutants with the same IEEE result, which must stay
proven (no false alarm).

For each mutant: copies the sources (cuda/, include/, prove/, conform/library/files.hpp) into
OUT/<mutant>/, applies its textual changes (each must match exactly once), builds tapewise-prove and the
CPU backend from the copy with the project's floating-point flags (-ffp-contract=off), runs it on the
mutant's nodes in the dtypes the mutant names, and checks the JSON report: every expected (node, dtype)
refuted with `differ: true` on the replay (the real fused and staged paths' bits differ at the printed
inputs), and every dtype the mutant cannot change still proven. Some mutants only change the 16-bit
paths (bfloat16, float16): float32 and float64 must stay proven under them. Translation units the
mutant cannot touch are compiled once.

    python3 prove/mutants.py --build build --out build/prove-mutants [--jobs 2] [--only NAME]

Exit 0 when every mutant is refuted and replayed as expected; prints one line per mutant and
"N passed, N failed".
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name, file, old text, new text, node, dtypes it must refute, dtypes it must leave proven, what it is
ONE_CHANGE_MUTANTS = [
    ("sub-neg", "cuda/kernels/op_math.cuh",
     "{ return {g, T(0) - g}; }", "{ return {g, -g}; }",
     "sub", ["float32", "float64", "bfloat16", "float16"], [],
     "sub's db = (+0) - g written -g (differs at g = +0)"),
    ("inv-reassociated", "cuda/kernels/op_math.cuh",
     "    const T r2 = r * r;\n    const T p = g * r2;",
     "    const T gr = g * r;\n    const T p = gr * r;",
     "inv", ["float32", "float64", "bfloat16", "float16"], [],
     "inv's p = g * (r * r) reassociated to (g * r) * r"),
    ("gelu-c3-folded", "cuda/kernels/scalar_math.cuh",
     "TW_HD static T c3() { return static_cast<T>(3.0 * static_cast<double>(static_cast<T>(0.044715))); }",
     "TW_HD static T c3() { return static_cast<T>(3.0 * 0.044715); }",
     "gelu", ["float32"], ["float64", "bfloat16", "float16"],
     "gelu's c3 = R(3 * R(c)) folded as R(3 * c): one ulp off in float32 (0x3E095D4F), the same value in "
     "float64, bfloat16 and float16"),
    ("clamp-swapped", "cuda/kernels/op_math.cuh",
     "{ return fmin_(fmax_(x, p.s0), p.s1); }",
     "{ return fmax_(fmin_(x, p.s1), p.s0); }",
     "clamp", ["float32", "float64", "bfloat16", "float16"], [],
     "clamp's forward with its two selects swapped: fmax(fmin(x, hi), lo) (differs when lo > hi, and at NaN x)"),
    ("sigmoid-reassociated", "cuda/kernels/op_math.cuh",
     "    return g * (y * one_minus_y);",
     "    return (g * y) * one_minus_y;",
     "sigmoid", ["float32", "float64", "bfloat16", "float16"], [],
     "sigmoid's dx = g * (y * (1 - y)) reassociated as ATen's (g * y) * (1 - y), y = 1 / (1 + exp(-x))"),
    # Two that only a 16-bit path sees: the same roundings in float32 and float64 (the unmutated
    # graphs there), one 16-bit rounding more or fewer in bfloat16 and float16.
    ("sigmoid-y-in-16-bits", "cuda/kernels/op_math.cuh",
     "    const T y = sigmoid(x);\n    const T one_minus_y = T(1) - y;",
     "    const T y = T(1) / (T(1) + lm_exp(-x));\n    const T one_minus_y = T(1) - y;",
     "sigmoid", ["bfloat16", "float16"], ["float32", "float64"],
     "sigmoid's fused VJP stages y = 1 / (1 + exp(-x)) in the dtype: each stage rounded to 16 bits where "
     "at::sigmoid keeps float32 and rounds once"),
    ("silu-s-in-float32", "cuda/kernels/op_math.cuh",
     "    const T s = sigmoid_split(x);",
     "    const T s = x > T(0) ? sigmoid(x) : sigmoid_split(x);",
     "silu", ["bfloat16", "float16"], ["float32", "float64"],
     "silu's fused VJP takes s = sigmoid(x) for x > 0: float32's three roundings, then one to 16 bits, "
     "where sigmoid_split rounds exp(-x), 1 + e and the quotient each to 16 bits"),
]

ALL_DTYPES = ["float32", "float64", "bfloat16", "float16"]
OP_MATH = "cuda/kernels/op_math.cuh"
# The kinks' conventions (abs, sqrt, clamp, max, min, relu): the staged side is spec/stagings.def, not
# the kernel, so a fused kernel with another convention must be refuted. One copy carries all six
# changes (one build instead of six); each node is checked on its own, and each change touches only
# its node's OpMath.
NATIVE_CONVENTIONS = [
    (OP_MATH, "{ return sign(x) * g; }", "{ return x < T(0) ? -g : g; }"),
    (OP_MATH, "    const bool positive = x > T(0);", "    const bool positive = x >= T(0);"),
    (OP_MATH, "(p.s0 < x && x < p.s1)", "(p.s0 <= x && x < p.s1)"),
    (OP_MATH, "split_winner(a > b, b > a, g)", "split_winner(a >= b, b > a, g)"),
    (OP_MATH, "split_winner(b > a, a > b, g)", "split_winner(b >= a, a > b, g)"),
    (OP_MATH, "{ return x > T(0) ? g : T(0); }", "{ return x >= T(0) ? g : T(0); }"),
]
# The same six written differently with the same IEEE result: the prover must raise no false alarm.
# (sqrt's `root + root` for `root * 2` is proven in the VJP claim but left unknown, not refuted, in the
# dense tape programs: Bitwuzla does not decide the +0 lemma around a division by it in 60 s.)
NATIVE_EQUIVALENT = [
    (OP_MATH, "{ return sign(x) * g; }", "{ return g * sign(x); }"),
    (OP_MATH, "    return positive ? g * factor : T(0);", "    return positive ? factor * g : T(0);"),
    (OP_MATH, "(p.s0 < x && x < p.s1)", "(x > p.s0 && p.s1 > x)"),
    (OP_MATH, "split_winner(a > b, b > a, g)", "split_winner(b < a, a < b, g)"),
    (OP_MATH, "split_winner(b > a, a > b, g)", "split_winner(a < b, b < a, g)"),
    (OP_MATH, "{ return x > T(0) ? g : T(0); }", "{ return T(0) < x ? g : T(0); }"),
]
NATIVE_NODES = ["abs", "sqrt", "clamp", "max", "min", "relu"]

# name, [(file, old text, new text)], nodes, dtypes it must refute (each node), dtypes it must leave
# proven, what it is
MUTANTS = [(name, [(rel, old, new)], [node], refute, keep, what)
           for name, rel, old, new, node, refute, keep, what in ONE_CHANGE_MUTANTS] + [
    ("native-conventions", NATIVE_CONVENTIONS, NATIVE_NODES, ALL_DTYPES, [],
     "the kinks' VJP conventions changed: abs'(+-0) = +-1 (a select), sqrt'(0) = g / 0, clamp's gradient g at lo, "
     "max's and min's tie given whole to a, relu'(0) = g"),
    ("native-equivalent", NATIVE_EQUIVALENT, NATIVE_NODES, [], ALL_DTYPES,
     "the kinks' VJPs rewritten with the same IEEE result (g * sign(x), factor * g, commuted comparisons): "
     "must stay proven"),
]

COPIED = ["cuda", "include", "prove", "conform/library/files.hpp"]
# Translation units that include the kernels' code (rebuilt per mutant) and those that do not.
MUTABLE_TUS = ["prove/forms.cpp", "cuda/backends/backend.cpp", "cuda/backends/cpu_backend.cpp",
               "cuda/tape/tape.cpp"]
FIXED_TUS = ["prove/main.cpp", "prove/prover.cpp", "prove/frameworks.cpp", "cuda/core/core.cpp", "cuda/core/log.cpp",
             "cuda/tape/backward.cpp", "cuda/tape/backward_program.cpp", "cuda/tape/staged_vjp.cpp",
             "cuda/tape/staging.cpp",
             "cuda/backends/cuda_backend_absent.cpp"]
# TAPEWISE_NO_ISA_CLONES: the CPU backend's baseline loops alone (the kernels' math is what a mutant changes).
# -O0: compiling is most of the step's time (2026-12-06, two cores, nine mutants: at -O1 262 s, 156 of them
# compiling; at -O0 188 s, 101 compiling, with the provers run two at a time; -O1 for the units compiled
# once gave the same 188 s).
FLAGS = ["-std=c++20", "-O0", "-ffp-contract=off", "-fno-fast-math", "-w", "-DTAPEWISE_NO_ISA_CLONES"]


def copy_sources(dest):
    for rel in COPIED:
        src, dst = os.path.join(ROOT, rel), os.path.join(dest, rel)
        if os.path.isdir(src):
            shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)


def includes(src, build):
    dirs = [os.path.join(src, "prove"), os.path.join(src, "cuda"), os.path.join(src, "include"),
            os.path.join(build, "include")]
    flags = [f"-I{d}" for d in dirs]
    # tl/expected.hpp and dlpack.h: the system's, else the copies the build also falls back to.
    for vendored in ("third_party/tl-expected/include", "third_party/dlpack/include"):
        if os.path.isdir(os.path.join(ROOT, vendored)):
            flags += ["-idirafter", os.path.join(ROOT, vendored)]
    return flags


def compile_tu(cxx, src, build, tu, obj):
    cmd = [cxx, *FLAGS, *includes(src, build), "-c", os.path.join(src, tu), "-o", obj]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"compiling {tu} failed:\n{done.stderr[-3000:]}")
    return obj


def judge_report(report, nodes, refute, keep):
    """The problems with a mutant's prover report, and the replayed counterexamples that refute it."""
    problems, evidence = [], []
    seen = {(entry["op"], entry["dtype"]) for entry in report["nodes"]}
    problems += [f"{node} {dtype}: not in the report" for node in nodes for dtype in refute + keep
                 if (node, dtype) not in seen]
    for entry in report["nodes"]:
        where = f"{entry['op']} {entry['dtype']}"
        refuted = [c for c in entry["claims"] if c["status"] == "refuted"]
        if entry["dtype"] in refute:
            if not refuted:
                problems.append(f"{where}: nothing refuted")
            replayed = [c for c in refuted if c.get("counterexample", {}).get("differ")]
            if refuted and not replayed:
                problems.append(f"{where}: refuted, but no counterexample replays on the real kernels")
            if replayed:
                c = replayed[0]
                ce = c["counterexample"]
                evidence.append(f"{where} {c['lhs']} vs {c['rhs']} {c['output']} at "
                                + ", ".join(f"{k}={v}" for k, v in sorted(ce["inputs"].items()))
                                + f": {ce[c['lhs']].get(c['output'])} vs {ce[c['rhs']].get(c['output'])}")
        if entry["dtype"] in keep and (refuted or any(c["status"] not in ("same", "congruent", "proven")
                                                      for c in entry["claims"])):
            problems.append(f"{where}: not proven, but the mutant does not change it")
    return problems, evidence


def check_mutant(mutant, src, objects, fixed, args):
    """Links the mutant's prover, runs it on the mutant's nodes and judges its report: (passed, lines to print)."""
    name, _, nodes, refute, keep, what = mutant
    exe = os.path.join(src, "tapewise-prove")
    link = subprocess.run([args.cxx, *objects, *fixed, "-o", exe, "-lpthread"], capture_output=True, text=True)
    if link.returncode != 0:
        return False, f"FAILED  {name}: link failed:\n{link.stderr[-2000:]}"
    report_path = os.path.join(src, "prove.json")
    t0 = time.time()
    run = subprocess.run([exe, "--ops", ",".join(nodes), "--dtype", ",".join(refute + keep), "--backend", "cpu",
                          "--json", report_path, "--solver", args.solver, "--timeout", args.timeout],
                         capture_output=True, text=True)
    seconds = time.time() - t0
    problems = []
    expected_exit = 1 if refute else 0  # 1: not every claim proven; 0: an equivalent mutant, all proven
    if run.returncode != expected_exit:
        problems.append(f"exit {run.returncode} ({expected_exit} expected)")
    try:
        report = json.load(open(report_path))
    except (OSError, ValueError) as e:
        report = {"nodes": []}
        problems.append(f"no report: {e}")
    more_problems, evidence = judge_report(report, nodes, refute, keep)
    problems += more_problems
    if problems:
        return False, (f"FAILED  {name} ({what}): " + "; ".join(problems) + "\n"
                       + run.stdout[-3000:] + " " + run.stderr[-2000:])
    verdict = "refuted" if refute else "proven"
    return True, (f"passed  {name} ({what}); {verdict} in {seconds:.1f} s" + (": " if evidence else "")
                  + "; ".join(evidence))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="a configured build folder (its include/ has ops.def)")
    ap.add_argument("--out", default="build/prove-mutants", help="work folder")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--only", default="", help="comma-separated mutant names")
    ap.add_argument("--solver", default=os.path.join(ROOT, "prove/solver.py"))
    ap.add_argument("--timeout", default="60", help="per solver query, seconds")
    args = ap.parse_args(argv)
    build, out = os.path.abspath(args.build), os.path.abspath(args.out)
    if not os.path.isfile(os.path.join(build, "include/tapewise/ops.def")):
        print(f"mutants: {build} is not a configured build folder (no include/tapewise/ops.def)", file=sys.stderr)
        return 2
    shutil.rmtree(out, ignore_errors=True)
    selected = [m for m in MUTANTS if not args.only or m[0] in args.only.split(",")]
    start = time.time()

    # The unmutated copy: the fixed translation units, compiled once.
    clean = os.path.join(out, "clean")
    copy_sources(clean)
    os.makedirs(os.path.join(clean, "obj"))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        fixed = list(pool.map(lambda tu: compile_tu(args.cxx, clean, build, tu,
                                                    os.path.join(clean, "obj", tu.replace("/", "_") + ".o")),
                              FIXED_TUS))

    # Every mutant's copy and its rebuilt units.
    jobs = []
    for name, changes, *_ in selected:
        src = os.path.join(out, name)
        copy_sources(src)
        for rel, old, new in changes:
            path = os.path.join(src, rel)
            text = open(path).read()
            if text.count(old) != 1:
                print(f"mutants: {name}: the text to mutate occurs {text.count(old)} times in {rel} (expected once): "
                      f"{old!r}", file=sys.stderr)
                return 2
            with open(path, "w") as f:
                f.write(text.replace(old, new))
        os.makedirs(os.path.join(src, "obj"))
        for tu in MUTABLE_TUS:
            jobs.append((name, src, tu))
    objects = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(compile_tu, args.cxx, src, build, tu,
                               os.path.join(src, "obj", tu.replace("/", "_") + ".o")): name
                   for name, src, tu in jobs}
        for fut in concurrent.futures.as_completed(futures):
            objects.setdefault(futures[fut], []).append(fut.result())
    built = time.time() - start

    # The mutants' provers run --jobs at a time, as their compilations did; their lines print in order.
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        verdicts = list(pool.map(lambda mutant: check_mutant(mutant, os.path.join(out, mutant[0]), objects[mutant[0]],
                                                             fixed, args), selected))
    for ok, lines in verdicts:
        print(lines)
    passed = sum(ok for ok, _ in verdicts)
    failed = len(verdicts) - passed
    print(f"mutants: built in {built:.0f} s, {time.time() - start:.0f} s in all")
    print(f"mutants: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
