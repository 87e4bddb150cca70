#!/usr/bin/env python3
"""bench/bench_cpu.py — the CPU backend beside numpy and PyTorch CPU on this machine, in one run, per
thread count: (1) the chain sin, tanh, sigmoid, x*0.9, relu repeated (1,000 nodes at 2^12, 100 at 2^16
and 2^20, float32): record, forward and the backward of the leaf's gradient, as tape programs (the default) and
node by node (program_threshold 0), against the same chain in
numpy ufuncs and in torch tensor ops, each with a hand-written backward; (2) each node's forward and
fused VJP at 2^22 elements (float32) against the peers' ops and hand-written derivatives. numpy runs on
one thread; torch on as many as tapewise (torch.set_num_threads). Times are medians of --reps calls
after a warm-up, with the spread (min-max); ratios are tapewise / peer from the same run (lower is
faster).

    python3 bench/bench_cpu.py [--threads 1,2] [--reps 7] [--json out.json]

Needs the tapewise package (pip install .) and numpy; torch is measured where it imports.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

import tapewise

F32 = np.float32


def timed(fn, reps):
    """Median and (min, max) seconds of `reps` calls after one warm-up call."""
    fn()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), (min(samples), max(samples))


def chain_tapewise(backend, x, nodes, program_threshold=None):
    """The chain on a tape; program_threshold 0 runs every node as its own kernels (no tape programs)."""
    def run():
        tape = tapewise.Tape(backend)
        if program_threshold is not None:
            tape.program_threshold = program_threshold
        leaf = h = tape.leaf(x)
        for i in range(nodes):
            k = i % 5
            h = (tape.sin(h) if k == 0 else tape.tanh(h) if k == 1 else tape.sigmoid(h) if k == 2
                 else tape.scale(h, 0.9) if k == 3 else tape.relu(h))
        grads = tape.backward(h, np.ones_like(x), wanted=[leaf])
        return np.asarray(grads[leaf])
    return run


class NumpyOps:
    """The chain's and the nodes' peers in numpy ufuncs (one thread)."""
    name = "numpy"
    exp, log, sin, cos, tanh, sqrt = np.exp, np.log, np.sin, np.cos, np.tanh, np.sqrt

    @staticmethod
    def array(x):
        return x

    @staticmethod
    def relu(x):
        return np.maximum(x, F32(0))

    @staticmethod
    def relu_grad(x, g):
        return np.where(x > 0, g, F32(0))

    @staticmethod
    def softplus(x):
        return np.logaddexp(x, F32(0))

    @staticmethod
    def threads(n):
        pass


class TorchOps:
    """The same in PyTorch CPU's tensor ops, on as many threads as tapewise (torch.set_num_threads)."""
    name = "torch"

    def __init__(self, torch):
        self.torch = torch
        self.exp, self.log, self.sin, self.cos = torch.exp, torch.log, torch.sin, torch.cos
        self.tanh, self.sqrt = torch.tanh, torch.sqrt
        self.softplus = torch.nn.functional.softplus

    def array(self, x):
        return self.torch.from_numpy(x)

    def relu(self, x):
        return self.torch.relu(x)

    def relu_grad(self, x, g):
        return self.torch.where(x > 0, g, self.torch.zeros((), dtype=g.dtype))

    def threads(self, n):
        self.torch.set_num_threads(n)


def chain_peer(ops, x, nodes):
    """The chain in `ops` with a hand-written backward: forward values kept, then the leaf's gradient."""
    x = ops.array(x)

    def run():
        values, h = [x], x
        with np.errstate(all="ignore"):
            for i in range(nodes):
                k = i % 5
                h = (ops.sin(h) if k == 0 else ops.tanh(h) if k == 1 else 1 / (1 + ops.exp(-h)) if k == 2
                     else h * F32(0.9) if k == 3 else ops.relu(h))
                values.append(h)
            g = x * 0 + 1
            for i in reversed(range(nodes)):
                k, v = i % 5, values[i]
                if k == 0:
                    g = g * ops.cos(v)
                elif k == 1:
                    y = ops.tanh(v)
                    g = g * (1 - y * y)
                elif k == 2:
                    s = 1 / (1 + ops.exp(-v))
                    g = g * (s * (1 - s))
                elif k == 3:
                    g = g * F32(0.9)
                else:
                    g = ops.relu_grad(v, g)
        return g
    return run


def sigmoid(ops, x):
    return 1 / (1 + ops.exp(-x))


def gelu_tanh(ops, x):
    return (x * (ops.tanh((x + x * x * x * F32(0.044715)) * F32(0.7978845608)) + 1)) * F32(0.5)


def gelu_tanh_grad(ops, x, g):
    t = ops.tanh((x + x * x * x * F32(0.044715)) * F32(0.7978845608))
    inner = (x * x * F32(0.134145) + 1) * F32(0.7978845608)
    return ((t + 1) + x * (1 - t * t) * inner) * F32(0.5) * g


# Each node's forward and derivative written in a peer's ops (the peer of tapewise's forward and fused
# VJP): unary nodes take x, binary ones (x, x2); the derivative gets g and returns the gradients.
PEER_NODES = {
    "exp": (lambda o, x: o.exp(x), lambda o, x, g: g * o.exp(x)),
    "log": (lambda o, x: o.log(x), lambda o, x, g: g / x),
    "sin": (lambda o, x: o.sin(x), lambda o, x, g: g * o.cos(x)),
    "cos": (lambda o, x: o.cos(x), lambda o, x, g: -g * o.sin(x)),
    "tanh": (lambda o, x: o.tanh(x), lambda o, x, g: g * (1 - o.tanh(x) ** 2)),
    "sigmoid": (sigmoid, lambda o, x, g: g * (sigmoid(o, x) * (1 - sigmoid(o, x)))),
    "silu": (lambda o, x: x * sigmoid(o, x),
             lambda o, x, g: g * (sigmoid(o, x) * (1 + x * (1 - sigmoid(o, x))))),
    "gelu": (gelu_tanh, gelu_tanh_grad),
    "softplus": (lambda o, x: o.softplus(x), lambda o, x, g: g * sigmoid(o, x)),
    "sqrt": (lambda o, x: o.sqrt(x), lambda o, x, g: g * (0.5 / o.sqrt(x))),
    "relu": (lambda o, x: o.relu(x), lambda o, x, g: o.relu_grad(x, g)),
    "neg": (lambda o, x: -x, lambda o, x, g: -g),
    # add's gradients are g itself in a peer; tapewise writes each leaf's gradient buffer, so the peer
    # writes two copies too (g + 0) rather than time nothing.
    "add": (lambda o, x, x2: x + x2, lambda o, x, x2, g: (g + 0, g + 0)),
    "mul": (lambda o, x, x2: x * x2, lambda o, x, x2, g: (g * x2, g * x)),
}
BINARY = {"add", "mul"}


def node_forward(backend, op, xs):
    def run():
        tape = tapewise.Tape(backend)
        return np.asarray(tape.value(getattr(tape, op)(*[tape.leaf(x) for x in xs])))
    return run


def node_vjp(backend, op, xs, g):
    tape = tapewise.Tape(backend)
    leaves = [tape.leaf(x) for x in xs]
    y = getattr(tape, op)(*leaves)
    tape.value(y)  # the forward runs before the timing

    def run():
        grads = tape.backward(y, g, wanted=leaves)
        return [np.asarray(grads[leaf]) for leaf in leaves]
    return run


def import_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default=f"1,{os.cpu_count() or 1}",
                    help="comma-separated thread counts of the CPU backend (default 1 and this machine's CPUs)")
    ap.add_argument("--reps", type=int, default=7, help="timed calls per measurement (default 7)")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    args = ap.parse_args()
    try:
        thread_counts = sorted({int(t) for t in args.threads.split(",")})
    except ValueError:
        sys.exit(f"bench_cpu: --threads '{args.threads}' is not a comma-separated list of whole numbers")
    if args.reps < 1 or any(t < 1 for t in thread_counts):
        sys.exit("bench_cpu: --reps and every thread count must be at least 1")

    load_before = os.getloadavg()
    torch = import_torch()
    peers = [NumpyOps()] + ([TorchOps(torch)] if torch is not None else [])
    if torch is None:
        print("bench_cpu: torch is not importable: numpy alone beside tapewise", flush=True)
    rng = np.random.default_rng(0)
    rows = []
    peer_cache = {}

    def peer_times(key, ops, threads, make_run):
        """A peer's timing: numpy's once (one thread whatever tapewise runs on), torch's per thread count."""
        cache_key = (key, ops.name, threads if ops.name == "torch" else 1)
        if cache_key not in peer_cache:
            ops.threads(threads)
            peer_cache[cache_key] = timed(make_run(ops), args.reps)
        return peer_cache[cache_key]

    def record(kind, name, size, threads, tw, make_peer_run):
        row = {"kind": kind, "name": name, "log2_elements": size, "threads": threads,
               "tapewise_s": tw[0], "tapewise_spread_s": tw[1]}
        text = (f"{kind:7} {name:12} 2^{size:<3} {threads:>2} threads  tapewise {tw[0] * 1e3:9.2f} ms "
                f"({tw[1][0] * 1e3:.2f}-{tw[1][1] * 1e3:.2f})")
        for ops in peers:
            peer = peer_times((kind, name, size), ops, threads, make_peer_run)
            row[f"{ops.name}_s"], row[f"{ops.name}_spread_s"] = peer
            row[f"ratio_{ops.name}"] = tw[0] / peer[0]
            text += f"  {ops.name} {peer[0] * 1e3:9.2f} ms  tapewise/{ops.name} {tw[0] / peer[0]:5.2f}"
        rows.append(row)
        print(text, flush=True)

    for size, nodes in ((12, 1000), (16, 100), (20, 100)):
        x = rng.standard_normal(1 << size).astype(F32)
        for threads in thread_counts:
            record("chain", f"{nodes} nodes", size, threads,
                   timed(chain_tapewise(tapewise.cpu(threads=threads), x, nodes), args.reps),
                   lambda ops: chain_peer(ops, x, nodes))
            # The same tape with its nodes run one by one (the per-node kernels, vectorized) instead of
            # as tape programs (the interpreter): the same results, up to NaN.
            record("chain", f"{nodes} nodes, per-node", size, threads,
                   timed(chain_tapewise(tapewise.cpu(threads=threads), x, nodes, program_threshold=0), args.reps),
                   lambda ops: chain_peer(ops, x, nodes))
    x = rng.uniform(0.1, 8.0, 1 << 22).astype(F32)
    x2 = rng.uniform(0.1, 8.0, 1 << 22).astype(F32)
    g = rng.standard_normal(1 << 22).astype(F32)
    for op, (forward, derivative) in PEER_NODES.items():
        xs = [x, x2] if op in BINARY else [x]
        for threads in thread_counts:
            backend = tapewise.cpu(threads=threads)
            record("forward", op, 22, threads, timed(node_forward(backend, op, xs), args.reps),
                   lambda ops: (lambda a=[ops.array(v) for v in xs]: forward(ops, *a)))
            record("vjp", op, 22, threads, timed(node_vjp(backend, op, xs, g), args.reps),
                   lambda ops: (lambda a=[ops.array(v) for v in xs], gp=ops.array(g): derivative(ops, *a, gp)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema": "tapewise-bench-cpu/2", "machine": platform.machine(), "cpus": os.cpu_count(),
                       "processor": platform.processor(), "numpy": np.__version__,
                       "torch": torch.__version__ if torch is not None else None,
                       "tapewise": tapewise.__version__, "load_average_before": load_before,
                       "load_average_after": os.getloadavg(),
                       "reps": args.reps, "rows": rows}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
