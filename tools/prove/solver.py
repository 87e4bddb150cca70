#!/usr/bin/env python3
"""tools/prove/solver.py — the SMT back end of `tapewise-conform prove`: Bitwuzla (PyPI) over the
floating-point theory (SMT-LIB FloatingPoint, RNE, one NaN).

Reads one query per line on stdin (JSON), answers one line per query on stdout:
  query:  {"id": N, "nodes": [[kind, sort, [children...], bits, name], ...], "goal": [u, v],
           "timeout_ms": T}
          node i may only name children < i; sort is "f32", "f64" or "b"; bits is the constant's bit
          pattern (decimal), name a variable's name. Kinds are tools/prove/sym.hpp's.
  answer: {"id": N, "result": "unsat" | "sat" | "unknown" | "error", "seconds": S,
           "model": {name: bits, ...}}   (model only for sat: every variable's value)
The query asks for inputs where u and v differ as SMT terms (`distinct`): equal bits, or both NaN,
is equality (TorchLean's AgreeUpToNaN), and +0 differs from -0. unsat means proven for every input.
libm calls (exp, log, sin, cos, tanh) are uninterpreted functions, one per function and sort.
It holds no formula of its own: it only translates the graph it is given.
"""

import json
import sys
import time

try:
    import bitwuzla as bz
except ImportError:  # the caller reports this line as the reason
    print(json.dumps({"id": -1, "result": "error", "reason": "the Python package bitwuzla is not installed"}),
          flush=True)
    sys.exit(3)

FP = {"f32": (8, 24), "f64": (11, 53)}
ARITH = {"add": bz.Kind.FP_ADD, "sub": bz.Kind.FP_SUB, "mul": bz.Kind.FP_MUL, "div": bz.Kind.FP_DIV}
PRED = {"eq": bz.Kind.FP_EQUAL, "lt": bz.Kind.FP_LT, "le": bz.Kind.FP_LEQ}
LIBM = ("exp", "log", "sin", "cos", "tanh")


def bits_of(value_bits):
    sign, exponent, significand = value_bits
    return int(sign + exponent + significand, 2)


def solve(q):
    tm = bz.TermManager()
    options = bz.Options()
    options.set(bz.Option.PRODUCE_MODELS, True)
    options.set(bz.Option.TIME_LIMIT_PER, int(q.get("timeout_ms", 20000)))
    rm = tm.mk_rm_value(bz.RoundingMode.RNE)
    sorts = {name: tm.mk_fp_sort(*eb_sb) for name, eb_sb in FP.items()}
    sorts["b"] = tm.mk_bool_sort()
    ufs = {}
    terms = []
    variables = {}
    for kind, sort, children, bits, name in q["nodes"]:
        c = [terms[i] for i in children]
        if kind == "var":
            t = tm.mk_const(sorts[sort], name)
            variables[name] = t
        elif kind == "cst":
            width = sum(FP[sort])
            t = tm.mk_term(bz.Kind.FP_TO_FP_FROM_BV, [tm.mk_bv_value(tm.mk_bv_sort(width), int(bits))], list(FP[sort]))
        elif kind in ARITH:
            t = tm.mk_term(ARITH[kind], [rm, c[0], c[1]])
        elif kind == "neg":
            t = tm.mk_term(bz.Kind.FP_NEG, c)
        elif kind == "abs":
            t = tm.mk_term(bz.Kind.FP_ABS, c)
        elif kind == "sqrt":
            t = tm.mk_term(bz.Kind.FP_SQRT, [rm, c[0]])
        elif kind in LIBM:
            key = (kind, sort)
            if key not in ufs:
                ufs[key] = tm.mk_const(tm.mk_fun_sort([sorts[sort]], sorts[sort]), f"{kind}_{sort}")
            t = tm.mk_term(bz.Kind.APPLY, [ufs[key], c[0]])
        elif kind == "cvt":
            t = tm.mk_term(bz.Kind.FP_TO_FP_FROM_FP, [rm, c[0]], list(FP[sort]))
        elif kind == "ite":
            t = tm.mk_term(bz.Kind.ITE, c)
        elif kind in PRED:
            t = tm.mk_term(PRED[kind], c)
        elif kind == "signbit":
            t = tm.mk_term(bz.Kind.FP_IS_NEG, c)
        else:
            raise ValueError(f"unknown node kind {kind!r}")
        terms.append(t)
    u, v = (terms[i] for i in q["goal"])
    solver = bz.Bitwuzla(tm, options)
    solver.assert_formula(tm.mk_term(bz.Kind.DISTINCT, [u, v]))
    start = time.perf_counter()
    result = solver.check_sat()
    answer = {"id": q["id"], "seconds": time.perf_counter() - start}
    if result == bz.Result.UNSAT:
        answer["result"] = "unsat"
    elif result == bz.Result.SAT:
        answer["result"] = "sat"
        model = {}
        for name, t in variables.items():
            value = solver.get_value(t).value(2)
            model[name] = str(int(value) if isinstance(value, bool) else bits_of(value))
        answer["model"] = model
    else:
        answer["result"] = "unknown"
    return answer


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        q = json.loads(line)
        try:
            answer = solve(q)
        except Exception as e:  # a malformed query: say so, keep serving
            answer = {"id": q.get("id", -1), "result": "error", "reason": str(e)}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
