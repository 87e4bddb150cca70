#!/usr/bin/env python3
"""prove/solver.py — the SMT back end of `tapewise-conform prove`: Bitwuzla (PyPI) over the
floating-point theory (SMT-LIB FloatingPoint, RNE, one NaN).

Reads one query per line on stdin (JSON), answers one line per query on stdout:
  query:  {"id": N, "nodes": [[kind, sort, [children...], bits, name], ...], "goal": [u, v],
           "timeout_ms": T}
          node i may only name children < i; sort is "f32", "f64", "bf16", "f16" or "b"; bits is the
          constant's bit pattern (decimal), name a variable's name. Kinds are prove/sym.hpp's.
  answer: {"id": N, "result": "unsat" | "sat" | "unknown" | "error", "seconds": S,
           "model": {name: bits, ...}}   (model only for sat: every variable's value)
The query asks for inputs where u and v differ as SMT terms (`distinct`): equal bits, or both NaN,
is equality (TorchLean's AgreeUpToNaN), and +0 differs from -0. unsat means proven for every input.
libm calls (exp, log, sin, cos, tanh) are uninterpreted functions, one per function and sort (the
16-bit paths call float32's, so theirs are on f32). cvt converts its child to the node's sort, RNE
(exact when widening).
It holds no formula of the code's: it only translates the graph it is given (bfloat16's rounding, for
which this build of Bitwuzla has no sort, is written on bits: Encoder.round_bf16, which
`solver.py --self-test` checks against an exact rounding).
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

# (exponent bits, significand bits with the hidden bit) of the sorts the solver is given directly.
FP = {"f32": (8, 24), "f64": (11, 53), "f16": (5, 11)}
# bfloat16, (8, 8), is not a format Bitwuzla's PyPI build supports (Float16/32/64/128 only). Every
# bfloat16 value is a binary32 value (its top half), so a bf16 term is held as the f32 term of the same
# value, and rounding to bfloat16 is written on the binary32's bits (Encoder.round_bf16).
EMBEDDED = {"bf16": "f32"}
ARITH = {"add": bz.Kind.FP_ADD, "sub": bz.Kind.FP_SUB, "mul": bz.Kind.FP_MUL, "div": bz.Kind.FP_DIV}
PRED = {"eq": bz.Kind.FP_EQUAL, "lt": bz.Kind.FP_LT, "le": bz.Kind.FP_LEQ}
LIBM = ("exp", "log", "sin", "cos", "tanh")


def bits_of(value):
    if isinstance(value, str):  # a bit-vector's value
        return int(value, 2)
    sign, exponent, significand = value
    return int(sign + exponent + significand, 2)


class Encoder:
    """The graph's sorts, variables, constants and conversions as Bitwuzla terms, and the side
    constraints that define the auxiliary variables of the bfloat16 roundings."""

    def __init__(self, tm):
        self.tm = tm
        self.rm = tm.mk_rm_value(bz.RoundingMode.RNE)
        self.sorts = {"b": tm.mk_bool_sort()}
        self.side = []
        self.variables = {}  # name -> the term whose value is the variable's bits

    def fp(self, sort):
        sort = EMBEDDED.get(sort, sort)
        return FP[sort]

    def sort(self, sort):
        sort = EMBEDDED.get(sort, sort)
        if sort not in self.sorts:
            self.sorts[sort] = self.tm.mk_fp_sort(*FP[sort])
        return self.sorts[sort]

    def bv(self, width, value):
        return self.tm.mk_bv_value(self.tm.mk_bv_sort(width), value)

    def from_bits(self, bits_term, sort):
        return self.tm.mk_term(bz.Kind.FP_TO_FP_FROM_BV, [bits_term], list(self.fp(sort)))

    def var(self, sort, name):
        if sort == "bf16":  # its 16 bits, as the top half of a binary32
            bits = self.tm.mk_const(self.tm.mk_bv_sort(16), name)
            self.variables[name] = bits
            return self.from_bits(self.tm.mk_term(bz.Kind.BV_CONCAT, [bits, self.bv(16, 0)]), sort)
        t = self.tm.mk_const(self.sort(sort), name)
        self.variables[name] = t
        return t

    def const(self, sort, bits):
        if sort == "bf16":
            return self.from_bits(self.bv(32, bits << 16), sort)
        return self.from_bits(self.bv(sum(FP[sort]), bits), sort)

    def cvt(self, sort, child_sort, child):
        if sort == "bf16" and child_sort == "f32":
            return self.round_bf16(child)
        if child_sort == "bf16" and sort == "f32":
            return child  # widening is exact: the same binary32 term
        if "bf16" in (sort, child_sort):
            raise ValueError(f"no conversion from {child_sort} to {sort}")
        return self.tm.mk_term(bz.Kind.FP_TO_FP_FROM_FP, [self.rm, child], list(FP[sort]))

    def round_bf16(self, y):
        """y (f32) rounded to nearest even bfloat16, as float16.hpp's host conversion does it on the
        bits b of y: the top half of b + 0x7fff + (bit 16 of b); a NaN stays NaN. b is a fresh
        variable with from_bits(b) = y, which fixes it for every y but NaN (any NaN's bits do then)."""
        tm = self.tm
        b = tm.mk_const(tm.mk_bv_sort(32), f"bf16_bits_{len(self.side)}")
        self.side.append(tm.mk_term(bz.Kind.EQUAL, [self.from_bits(b, "f32"), y]))
        lsb = tm.mk_term(bz.Kind.BV_AND, [tm.mk_term(bz.Kind.BV_SHR, [b, self.bv(32, 16)]), self.bv(32, 1)])
        r = tm.mk_term(bz.Kind.BV_ADD, [tm.mk_term(bz.Kind.BV_ADD, [b, self.bv(32, 0x7FFF)]), lsb])
        top = tm.mk_term(bz.Kind.BV_EXTRACT, [r], [31, 16])
        rounded = self.from_bits(tm.mk_term(bz.Kind.BV_CONCAT, [top, self.bv(16, 0)]), "f32")
        return tm.mk_term(bz.Kind.ITE, [tm.mk_term(bz.Kind.FP_IS_NAN, [y]), y, rounded])


def term(enc, ufs, kind, sort, c, child_sorts, bits, name):
    """One node of the graph as a term of its children's terms c."""
    tm, rm = enc.tm, enc.rm
    if sort in EMBEDDED and (kind in ARITH or kind in LIBM or kind == "sqrt"):
        raise ValueError(f"{kind} on {sort}: the 16-bit paths compute in float32")
    if kind == "var":
        return enc.var(sort, name)
    if kind == "cst":
        return enc.const(sort, int(bits))
    if kind in ARITH:
        return tm.mk_term(ARITH[kind], [rm, c[0], c[1]])
    if kind == "neg":
        return tm.mk_term(bz.Kind.FP_NEG, c)
    if kind == "abs":
        return tm.mk_term(bz.Kind.FP_ABS, c)
    if kind == "sqrt":
        return tm.mk_term(bz.Kind.FP_SQRT, [rm, c[0]])
    if kind in LIBM:
        if (kind, sort) not in ufs:
            s = enc.sort(sort)
            ufs[(kind, sort)] = tm.mk_const(tm.mk_fun_sort([s], s), f"{kind}_{sort}")
        return tm.mk_term(bz.Kind.APPLY, [ufs[(kind, sort)], c[0]])
    if kind == "cvt":
        return enc.cvt(sort, child_sorts[0], c[0])
    if kind == "ite":
        return tm.mk_term(bz.Kind.ITE, c)
    if kind in PRED:
        return tm.mk_term(PRED[kind], c)
    if kind == "signbit":
        return tm.mk_term(bz.Kind.FP_IS_NEG, c)
    raise ValueError(f"unknown node kind {kind!r}")


def solve(q):
    tm = bz.TermManager()
    options = bz.Options()
    options.set(bz.Option.PRODUCE_MODELS, True)
    options.set(bz.Option.TIME_LIMIT_PER, int(q.get("timeout_ms", 20000)))
    enc = Encoder(tm)
    ufs = {}
    terms, sorts = [], []
    for kind, sort, children, bits, name in q["nodes"]:
        c = [terms[i] for i in children]
        terms.append(term(enc, ufs, kind, sort, c, [sorts[i] for i in children], bits, name))
        sorts.append(sort)
    u, v = (terms[i] for i in q["goal"])
    solver = bz.Bitwuzla(tm, options)
    for constraint in enc.side:
        solver.assert_formula(constraint)
    solver.assert_formula(tm.mk_term(bz.Kind.DISTINCT, [u, v]))
    start = time.perf_counter()
    result = solver.check_sat()
    answer = {"id": q["id"], "seconds": time.perf_counter() - start}
    if result == bz.Result.UNSAT:
        answer["result"] = "unsat"
    elif result == bz.Result.SAT:
        answer["result"] = "sat"
        model = {}
        for name, t in enc.variables.items():
            value = solver.get_value(t).value(2)
            model[name] = str(int(value) if isinstance(value, bool) else bits_of(value))
        answer["model"] = model
    else:
        answer["result"] = "unknown"
    return answer


def exact_bf16(bits):
    """The bfloat16 bits nearest (ties to even) the float32 with these bits, from exact rationals:
    8 significant bits, float32's exponent range, subnormals in steps of 2^-133, inf from the
    midpoint between the largest finite value and 2^128. Not for NaN."""
    import struct
    from fractions import Fraction
    value = struct.unpack("<f", struct.pack("<I", bits))[0]
    sign = bits & 0x80000000
    a = abs(Fraction(value)) if value not in (float("inf"), float("-inf")) else None
    if a is None or a >= Fraction(2) ** 128 - Fraction(2) ** 119:
        return (sign >> 16) | 0x7F80
    if a == 0:
        return sign >> 16
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    quantum = Fraction(2) ** (max(e, -126) - 7)
    rounded = round(a / quantum) * quantum  # round() on a Fraction: half to even
    return (sign | struct.unpack("<I", struct.pack("<f", float(rounded)))[0]) >> 16


def self_test():
    """Encoder.round_bf16 against exact_bf16 on ties, subnormals, overflow and random values: the
    bfloat16 rounding is the one formula of its own this file holds."""
    import random
    tm = bz.TermManager()
    options = bz.Options()
    options.set(bz.Option.PRODUCE_MODELS, True)
    cases = [0, 0x80000000, 0x3F800000, 0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0x7F7FFFFF, 0x7F7F8000,
             0x7F7F7FFF, 0xFF7FFFFF, 0x00000001, 0x00008000, 0x00018000, 0x00007FFF, 0x807FFFFF, 0x00800000,
             0x007F8000, 0x7F800000, 0xFF800000]
    rng = random.Random(20261203)
    cases += [rng.getrandbits(32) for _ in range(300)]
    failures = 0
    for bits in cases:
        if (bits & 0x7FFFFFFF) > 0x7F800000:
            continue
        enc = Encoder(tm)
        out = tm.mk_const(enc.sort("f32"), f"out_{bits}")
        rounded = enc.round_bf16(enc.const("f32", bits))
        solver = bz.Bitwuzla(tm, options)
        for constraint in enc.side + [tm.mk_term(bz.Kind.EQUAL, [out, rounded])]:
            solver.assert_formula(constraint)
        if solver.check_sat() != bz.Result.SAT:
            failures += 1
            continue
        got = bits_of(solver.get_value(out).value(2)) >> 16
        if got != exact_bf16(bits):
            failures += 1
            print(f"bfloat16 of 0x{bits:08x}: 0x{got:04x}, exactly 0x{exact_bf16(bits):04x}")
    print(f"solver.py self-test: bfloat16 rounding, {len(cases)} values, {failures} wrong")
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
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
