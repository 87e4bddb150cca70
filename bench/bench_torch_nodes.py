#!/usr/bin/env python3
"""bench/bench_torch_nodes.py — what a tapewise.torch node and a tapewise.torch region cost from
PyTorch, against PyTorch eager and tapewise.Tape in one run:

(a) per node kind, forward + backward per call (torch.autograd.grad of one node) at 2^12 elements:
    the eager torch op against the tapewise.torch node, and their ratio (target: <= 1); the node is
    tapewise.torch's C++ autograd node, and its Python autograd.Function is timed beside it;
(b) the 1,000-node chain of the issue (sin, tanh, sigmoid, scale 0.9, relu repeated), record +
    backward of the input's gradient, in us per node at 2^12, 2^16 and 2^20 elements: PyTorch eager,
    tapewise.torch node by node (C++ and Python nodes), tapewise.torch.region (one tape program;
    target at 2^12: <= 2 us per node) and tapewise.Tape directly.

Timing: CUDA events around each sample on --device cuda (perf_counter on --device cpu), median of
--reps samples, taken in three rounds of a block per variant, each block after --warmup calls
(blocked_medians); inputs random, never zero. Before timing, each variant's
result is checked (the region's and the per-node gradients against Tape.backward's, eager's values
against tapewise's within a tolerance): the script exits non-zero rather than report a number of a
computation that is wrong or empty. Prints a table, writes JSON to --out.

    python3 bench/bench_torch_nodes.py --out evidence/performance/torch-nodes/bench_torch_nodes.json            # an H200
    python3 bench/bench_torch_nodes.py --device cpu --chain-sizes 4 8 --out bench_torch_nodes_cpu.json
"""

import argparse
import datetime
import functools
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import tapewise
import tapewise.torch as twt

TARGET_NODE_RATIO = 1.0         # a tapewise.torch node costs no more than the eager op it replaces
TARGET_REGION_US_PER_NODE = 2.0  # the chain as a region at 2^12, per node


class BenchError(RuntimeError):
    """A check before or after timing failed: no number is reported."""


def timer(device):
    """sample(fn) -> milliseconds of one call of fn: CUDA events on CUDA, perf_counter on the CPU."""
    if device == "cuda":
        def sample(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
    else:
        def sample(fn):
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1e3
    return sample


def checked_median(times, what):
    """The median of `times` (ms), which must be finite and positive: else no number is reported."""
    median = statistics.median(times)
    if not (math.isfinite(median) and median > 0):
        raise BenchError(f"{what}: the median time is {median} ms")
    return median


def median_ms(sample, fn, reps, warmup, what):
    for _ in range(warmup):
        fn()
    return checked_median([sample(fn) for _ in range(reps)], what)


def blocked_medians(sample, fns, reps, warmup, what, rounds=3):
    """{name: median ms} of each fn over `reps` samples, taken in `rounds` rounds: each round runs every fn
    as a block of its own (`warmup` untimed calls, then its share of the samples). Rounds spread a drift
    of the machine's speed during the run over every fn alike; blocks make each timed call follow a call
    of the same fn, as in a loop that calls it. Sampled in turn instead (runs 20-25), a call followed
    another variant's and paid for bringing its own code and data back into the caches: on this
    machine's CPU a region's chain then cost 1.7 us per node right after the Python nodes' chain, 0.8
    right after tapewise.Tape's, and 0.71 in blocks."""
    times = {name: [] for name in fns}
    for r in range(rounds):
        share = reps // rounds + (1 if r < reps % rounds else 0)
        for name, fn in fns.items():
            for _ in range(max(warmup, 1)):
                fn()
            times[name].extend(sample(fn) for _ in range(share))
    return {name: checked_median(t, f"{what}, {name}") for name, t in times.items()}


def nonzero_random(n, device, dtype, generator, positive=False):
    """Normal values (|x| + 0.5 when positive), never zero."""
    x = torch.randn(n, dtype=dtype, generator=generator)
    x[x == 0] = 0.5
    if positive:
        x = x.abs() + 0.5
    return x.to(device)


# (eager op, tapewise.torch node, arity, needs positive inputs): the nodes of part (a).
NODE_KINDS = {
    "sin": (torch.sin, twt.sin, 1, False),
    "cos": (torch.cos, twt.cos, 1, False),
    "tanh": (torch.tanh, twt.tanh, 1, False),
    "sigmoid": (torch.sigmoid, twt.sigmoid, 1, False),
    "relu": (torch.relu, twt.relu, 1, False),
    "exp": (torch.exp, twt.exp, 1, False),
    "log": (torch.log, twt.log, 1, True),
    "gelu": (lambda x: torch.nn.functional.gelu(x, approximate="tanh"), twt.gelu, 1, False),
    "silu": (torch.nn.functional.silu, twt.silu, 1, False),
    "softplus": (torch.nn.functional.softplus, twt.softplus, 1, False),
    "scale": (lambda x: x * 0.9, lambda x: twt.scale(x, 0.9), 1, False),
    "clamp": (lambda x: torch.clamp(x, -0.5, 0.5), lambda x: twt.clamp(x, -0.5, 0.5), 1, False),
    "maximum": (torch.maximum, twt.maximum, 2, False),
    "minimum": (torch.minimum, twt.minimum, 2, False),
    "add": (torch.add, twt.add, 2, False),
    "mul": (torch.mul, twt.mul, 2, False),
    "div": (torch.div, twt.div, 2, True),
}


class NoKernelFunction(torch.autograd.Function):
    """A Python autograd.Function that allocates its output and gradient and launches nothing: what
    any node written as a Python autograd.Function costs PyTorch before its kernels run."""

    @staticmethod
    def forward(ctx, x):
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, g):
        return torch.empty_like(g)


def calls_of(op, inputs, g, calls):
    def run():
        for _ in range(calls):
            torch.autograd.grad(op(*inputs), inputs, g)
    return run


def graph_of(op, inputs, g, calls):
    """`calls` calls of op on the same inputs, then one backward through all of them: each node's own
    forward + backward, without torch.autograd.grad's fixed cost per call (the gradients' accumulation
    into the inputs is common to every variant)."""
    def run():
        outputs = [op(*inputs) for _ in range(calls)]
        torch.autograd.grad(outputs, inputs, [g] * calls)
    return run


def on_nodes(kind, run):
    """run with tapewise.torch's nodes bound to `kind` ("native" or "python"), the C++ ones after."""
    def switched():
        twt._use_nodes(kind)
        try:
            run()
        finally:
            twt._use_nodes("native")
    return switched


def function_floor(args, sample, generator):
    """us per forward + backward of NoKernelFunction at the nodes' size."""
    x = nonzero_random(1 << args.node_log2, args.device, args.dtype, generator).requires_grad_()
    g = nonzero_random(1 << args.node_log2, args.device, args.dtype, generator, positive=True)
    run = calls_of(NoKernelFunction.apply, [x], g, args.calls)
    return median_ms(sample, run, args.reps, args.warmup, "autograd.Function floor") * 1e3 / args.calls


def per_node(args, sample, generator):
    n = 1 << args.node_log2
    rows = []
    for name, (eager, node, arity, positive) in NODE_KINDS.items():
        inputs = [nonzero_random(n, args.device, args.dtype, generator, positive).requires_grad_()
                  for _ in range(arity)]
        g = nonzero_random(n, args.device, args.dtype, generator, positive=True)
        reference = torch.autograd.grad(eager(*inputs), inputs, g)
        for kind in NODE_PATHS:
            twt._use_nodes(kind)
            ours = torch.autograd.grad(node(*inputs), inputs, g)
            for r, o in zip(reference, ours):  # the same function, rounded by different code
                torch.testing.assert_close(o, r, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name} ({kind} node): {m}")
        twt._use_nodes("native")
        row = {"op": name, "elements": n}
        for form, build in (("", calls_of), ("graph_", graph_of)):
            fns = {"eager": build(eager, inputs, g, args.calls), "native": build(node, inputs, g, args.calls),
                   "python": on_nodes("python", build(node, inputs, g, args.calls))}
            us = {k: ms * 1e3 / args.calls for k, ms in blocked_medians(sample, fns, args.reps, args.warmup,
                                                                               f"{name} {form or 'single calls'}").items()}
            row.update({f"{form}eager_fwd_bwd_us": us["eager"], f"{form}tapewise_fwd_bwd_us": us["native"],
                        f"{form}tapewise_python_node_fwd_bwd_us": us["python"], f"{form}ratio": us["native"] / us["eager"]})
        row.update({"target_ratio": TARGET_NODE_RATIO,
                    "meets_target": row["ratio"] <= TARGET_NODE_RATIO if args.device == "cuda" else None,
                    "graph_meets_target": row["graph_ratio"] <= TARGET_NODE_RATIO if args.device == "cuda" else None})
        rows.append(row)
    return rows


def chain(ops, x, length):
    """The issue's chain: sin, tanh, sigmoid, scale 0.9, relu, repeated to `length` nodes."""
    for _ in range(length // 5):
        x = ops.relu(ops.scale(ops.sigmoid(ops.tanh(ops.sin(x))), 0.9))
    return x


class EagerOps:
    sin, tanh, sigmoid, relu = torch.sin, torch.tanh, torch.sigmoid, torch.relu

    @staticmethod
    def scale(x, c):
        return x * c


# The node paths of tapewise.torch (tapewise.torch.node_path): its C++ autograd nodes, the default, and
# its Python autograd.Functions. The C++ nodes are built against this torch first if need be.
NODE_PATHS = ("native", "python")
VARIANTS = ("eager", "tapewise.torch per node", "tapewise.torch per node (Python)", "tapewise.torch region",
            "tapewise.Tape")


def chain_variants(length):
    """name -> fn(x, g) returning the gradient of the chain's output with respect to x, seeded by g."""
    region = twt.region(lambda x: chain(twt, x, length))

    def eager(x, g):
        return torch.autograd.grad(chain(EagerOps, x, length), x, g)[0]

    def per_node(x, g):
        return torch.autograd.grad(chain(twt, x, length), x, g)[0]

    def per_python_node(x, g):
        twt._use_nodes("python")
        try:
            return per_node(x, g)
        finally:
            twt._use_nodes("native")

    def in_region(x, g):
        return torch.autograd.grad(region(x), x, g)[0]

    def tape_direct(x, g):
        tape = tapewise.Tape(twt.backend_for(x))
        leaf = tape.leaf(x.detach())
        out = chain(tape, leaf, length)
        return torch.from_dlpack(tape.backward(out, g, wanted=[leaf])[leaf])

    return {"eager": eager, "tapewise.torch per node": per_node, "tapewise.torch per node (Python)": per_python_node,
            "tapewise.torch region": in_region,
            "tapewise.Tape": tape_direct, "length": length}


def same_bits(a, b):
    a, b = a.detach().contiguous().cpu(), b.detach().contiguous().cpu()
    view = torch.int32 if a.dtype == torch.float32 else torch.int64
    return a.shape == b.shape and torch.equal(a.view(view), b.view(view))


def check_chain(variants, x, g):
    """Each variant computes the chain: the tape's gradient is the reference, the region's must be its
    bits, the per-node path's its bits up to NaN, eager's close to it. Over 1,000 nodes the input's
    gradient underflows to zero (each sin-tanh-sigmoid-scale-relu block multiplies it by ~0.05), though
    every VJP still runs; so the gradients are checked, non-zero, on the first 20 nodes, and on the
    whole chain the outputs (which stay in (0, 0.9)) and the gradients' bits."""
    short = chain_variants(20)
    reference = short["tapewise.Tape"](x, g)
    if not bool((reference != 0).all()):
        raise BenchError("the 20-node chain's gradient has zeros: the inputs do not exercise the chain")
    compare_gradients(short, reference, x, g, "20-node chain")
    compare_gradients(variants, variants["tapewise.Tape"](x, g), x, g, "chain")
    length = variants["length"]
    tape = tapewise.Tape(twt.backend_for(x))
    tape_out = torch.from_dlpack(tape.value(chain(tape, tape.leaf(x.detach()), length)))
    region_out = twt.region(lambda v: chain(twt, v, length))(x)
    if not (same_bits(region_out, tape_out) and bool((tape_out != 0).any())):
        raise BenchError("the region's chain output is not the tape's bits, or is all zero")
    torch.testing.assert_close(chain(EagerOps, x.detach(), length), tape_out, rtol=1e-3, atol=1e-5,
                               msg=lambda m: f"eager's chain output is not tapewise's within 1e-3: {m}")


def compare_gradients(variants, reference, x, g, what):
    region = variants["tapewise.torch region"](x, g)
    if not same_bits(region, reference):
        raise BenchError(f"{what}: the region's gradient differs from Tape.backward's bits")
    for name in ("tapewise.torch per node", "tapewise.torch per node (Python)"):
        per_node = variants[name](x, g)
        both_nan = torch.isnan(per_node) & torch.isnan(reference)
        if not same_bits(torch.where(both_nan, 0, per_node), torch.where(both_nan, 0, reference)):
            raise BenchError(f"{what}: {name}: the gradient differs from Tape.backward's (up to NaN)")
    eager = variants["eager"](x, g)
    torch.testing.assert_close(eager, reference, rtol=1e-3, atol=1e-5,
                               msg=lambda m: f"{what}: eager's gradient is not tapewise's within 1e-3: {m}")


def chain_costs(args, sample, generator):
    variants = chain_variants(args.chain_length)
    rows = []
    for log2 in args.chain_sizes:
        n = 1 << log2
        x = nonzero_random(n, args.device, args.dtype, generator).requires_grad_()
        g = nonzero_random(n, args.device, args.dtype, generator, positive=True)
        check_chain(variants, x, g)
        row = {"elements": n, "log2": log2, "nodes": args.chain_length}
        fns = {name: functools.partial(variants[name], x, g) for name in VARIANTS}
        for name, ms in blocked_medians(sample, fns, args.chain_reps, args.warmup, f"the chain at 2^{log2}").items():
            row[name] = ms * 1e3 / args.chain_length
        if log2 == 12:
            region = row["tapewise.torch region"]
            row["region_target_us_per_node"] = TARGET_REGION_US_PER_NODE
            row["region_meets_target"] = region <= TARGET_REGION_US_PER_NODE if args.device == "cuda" else None
        rows.append(row)
        del x, g
        if args.device == "cuda":
            torch.cuda.empty_cache()
    return rows


def print_tables(args, nodes, floor_us, chains):
    unit = "CUDA events" if args.device == "cuda" else "perf_counter"
    print(f"(a) forward + backward per call at 2^{args.node_log2} {args.dtype_name}, us ({unit}, median, "
          "three rounds of a block per variant); target: tapewise.torch / eager <= " + format(TARGET_NODE_RATIO, "g"))
    print(f"  {'':<10} {'one call per torch.autograd.grad':^46} | {args.calls} calls, one backward through them")
    header = f"{'eager':>9} {'tapewise.torch':>15} {'ratio':>6} {'Python node':>12}"
    print(f"  {'op':<10} {header}  | {header}")
    for r in nodes:
        cells = []
        for form, verdict_key in (("", "meets_target"), ("graph_", "graph_meets_target")):
            verdict = {True: " ", False: "*", None: " "}[r[verdict_key]]
            cells.append(f"{r[form + 'eager_fwd_bwd_us']:>9.2f} {r[form + 'tapewise_fwd_bwd_us']:>15.2f} "
                         f"{r[form + 'ratio']:>5.2f}{verdict} {r[form + 'tapewise_python_node_fwd_bwd_us']:>12.2f}")
        print(f"  {r['op']:<10} {cells[0]}  | {cells[1]}")
    print("  (* above the target)")
    print(f"  floor: a Python autograd.Function that launches no kernel costs {floor_us:.2f} us per forward + backward")
    print()
    names = VARIANTS
    print(f"(b) the {args.chain_length}-node chain, record + backward, us per node ({unit}, median)")
    print("  " + f"{'elements':<10}" + "".join(f"{n:>34}" for n in names))
    for r in chains:
        line = "  " + f"2^{r['log2']:<8}" + "".join(f"{r[n]:>34.3f}" for n in names)
        if "region_meets_target" in r:
            verdict = {True: "met", False: "MISSED", None: "(GPU target)"}[r["region_meets_target"]]
            line += f"   region target <= {TARGET_REGION_US_PER_NODE:g}: {verdict}"
        print(line)


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON output path")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--reps", type=int, default=20, help="timed samples per node kind")
    parser.add_argument("--chain-reps", type=int, default=10, help="timed samples per chain variant and size")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--calls", type=int, default=100, help="node calls per sample in part (a)")
    parser.add_argument("--node-log2", type=int, default=12, help="part (a) runs at 2^this elements")
    parser.add_argument("--chain-sizes", type=int, nargs="+", default=None,
                        help="log2 of the chain's sizes (default: 12 16 20 on cuda, 4 8 12 on cpu)")
    parser.add_argument("--chain-length", type=int, default=1000, help="nodes in the chain (a multiple of 5)")
    parser.add_argument("--commit", help="the commit measured, for the JSON (default: git rev-parse HEAD here, "
                                         "which a copied tree may not have)")
    args = parser.parse_args()
    if args.chain_length <= 0 or args.chain_length % 5:
        parser.error("--chain-length must be a positive multiple of 5 (the chain repeats 5 nodes)")
    if min(args.reps, args.chain_reps, args.calls) < 1 or args.warmup < 0:
        parser.error("--reps, --chain-reps and --calls must be at least 1, --warmup at least 0")
    args.chain_sizes = args.chain_sizes or ([12, 16, 20] if args.device == "cuda" else [4, 8, 12])
    args.dtype_name, args.dtype = args.dtype, getattr(torch, args.dtype)
    if args.device == "cuda" and not (torch.cuda.is_available() and tapewise.cuda_available()):
        why = tapewise.cuda_unavailable_reason() or "torch.cuda.is_available() is False"
        print(f"bench_torch_nodes: --device cuda needs a GPU that torch and tapewise both open ({why}); "
              "--device cpu runs on the CPU", file=sys.stderr)
        return 2

    try:
        twt._use_nodes("native")  # the default path, built against this torch now if need be
    except Exception as failure:  # noqa: BLE001 (whatever stops the build or the load)
        print(f"bench_torch_nodes: tapewise.torch's C++ nodes cannot be built or loaded: {failure}", file=sys.stderr)
        return 1
    generator = torch.Generator().manual_seed(20261202)
    sample = timer(args.device)
    try:
        nodes = per_node(args, sample, generator)
        floor_us = function_floor(args, sample, generator)
        chains = chain_costs(args, sample, generator)
    except (BenchError, AssertionError) as failure:
        print(f"bench_torch_nodes: FAILED, nothing written: {failure}", file=sys.stderr)
        return 1
    print_tables(args, nodes, floor_us, chains)
    probe = torch.empty(1, device=args.device)
    report = {
        "schema": "tapewise.bench_torch_nodes/1",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or "cpu",
        "tapewise_backend": twt.backend_for(probe).describe(),
        "torch": torch.__version__, "tapewise": tapewise.__version__, "python": platform.python_version(),
        "commit": args.commit or git_commit(), "dtype": args.dtype_name, "reps": args.reps, "chain_reps": args.chain_reps,
        "warmup": args.warmup, "calls_per_sample": args.calls,
        "timing": ("CUDA events" if args.device == "cuda" else "time.perf_counter") + ", median of three rounds of a block per variant",
        "targets": {"node_ratio_max": TARGET_NODE_RATIO, "region_us_per_node_at_2^12_max": TARGET_REGION_US_PER_NODE,
                    "apply_to": "cuda"},
        "per_node": nodes, "python_function_floor_us": floor_us, "chain_us_per_node": chains,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
