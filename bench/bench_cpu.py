#!/usr/bin/env python3
"""bench/bench_cpu.py — the CPU backend beside numpy on this machine, in one run, per thread count:
(1) the chain sin, tanh, sigmoid, x*0.9, relu repeated (1,000 nodes at 2^12, 100 at 2^16 and 2^20,
float32): record, forward and the backward of the leaf's gradient, against the same chain in numpy
ufuncs with a hand-written backward; (2) one node's forward and fused VJP at 2^22 elements (float32)
against numpy's ufunc and its hand-written derivative. Times are medians of --reps calls after a
warm-up, with the spread (min-max); ratios are tapewise / numpy from the same run (lower is faster).

    python3 bench/bench_cpu.py [--threads 1,2] [--reps 7] [--json out.json]

Needs the tapewise package (pip install .) and numpy; torch is not needed.
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


def chain_tapewise(backend, x, nodes):
    def run():
        tape = tapewise.Tape(backend)
        leaf = h = tape.leaf(x)
        for i in range(nodes):
            k = i % 5
            h = (tape.sin(h) if k == 0 else tape.tanh(h) if k == 1 else tape.sigmoid(h) if k == 2
                 else tape.scale(h, 0.9) if k == 3 else tape.relu(h))
        grads = tape.backward(h, np.ones_like(x), wanted=[leaf])
        return np.asarray(grads[leaf])
    return run


def chain_numpy(x, nodes):
    def run():
        values, h = [x], x
        with np.errstate(all="ignore"):
            for i in range(nodes):
                k = i % 5
                h = (np.sin(h) if k == 0 else np.tanh(h) if k == 1 else 1 / (1 + np.exp(-h)) if k == 2
                     else h * F32(0.9) if k == 3 else np.maximum(h, F32(0)))
                values.append(h)
            g = np.ones_like(x)
            for i in reversed(range(nodes)):
                k, v = i % 5, values[i]
                if k == 0:
                    g = g * np.cos(v)
                elif k == 1:
                    y = np.tanh(v)
                    g = g * (1 - y * y)
                elif k == 2:
                    s = 1 / (1 + np.exp(-v))
                    g = g * (s * (1 - s))
                elif k == 3:
                    g = g * F32(0.9)
                else:
                    g = np.where(v > 0, g, F32(0))
        return g
    return run


# One node's forward and derivative in numpy (the peer of tapewise's forward and fused VJP).
NUMPY_NODES = {
    "exp": (np.exp, lambda x, g: g * np.exp(x)),
    "log": (np.log, lambda x, g: g / x),
    "sin": (np.sin, lambda x, g: g * np.cos(x)),
    "cos": (np.cos, lambda x, g: -g * np.sin(x)),
    "tanh": (np.tanh, lambda x, g: g * (1 - np.tanh(x) ** 2)),
    "sqrt": (np.sqrt, lambda x, g: g * (0.5 / np.sqrt(x))),
    "relu": (lambda x: np.maximum(x, F32(0)), lambda x, g: np.where(x > 0, g, F32(0))),
    "neg": (np.negative, lambda x, g: -g),
}


def node_forward(backend, op, x):
    def run():
        tape = tapewise.Tape(backend)
        return np.asarray(tape.value(getattr(tape, op)(tape.leaf(x))))
    return run


def node_vjp(backend, op, x, g):
    tape = tapewise.Tape(backend)
    leaf = tape.leaf(x)
    y = getattr(tape, op)(leaf)
    tape.value(y)  # the forward runs before the timing

    def run():
        return np.asarray(tape.backward(y, g, wanted=[leaf])[leaf])
    return run


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

    rng = np.random.default_rng(0)
    rows = []

    def record(kind, name, size, threads, tw, peer):
        ratio = tw[0] / peer[0]
        rows.append({"kind": kind, "name": name, "log2_elements": size, "threads": threads,
                     "tapewise_s": tw[0], "tapewise_spread_s": tw[1], "numpy_s": peer[0],
                     "numpy_spread_s": peer[1], "ratio": ratio})
        print(f"{kind:7} {name:22} 2^{size:<3} {threads:>2} threads  tapewise {tw[0] * 1e3:9.2f} ms "
              f"({tw[1][0] * 1e3:.2f}-{tw[1][1] * 1e3:.2f})  numpy {peer[0] * 1e3:9.2f} ms  "
              f"tapewise/numpy {ratio:5.2f}", flush=True)

    for size, nodes in ((12, 1000), (16, 100), (20, 100)):
        x = rng.standard_normal(1 << size).astype(F32)
        peer = timed(chain_numpy(x, nodes), args.reps)
        for threads in thread_counts:
            record("chain", f"{nodes} nodes", size, threads,
                   timed(chain_tapewise(tapewise.cpu(threads=threads), x, nodes), args.reps), peer)
    x = rng.uniform(0.1, 8.0, 1 << 22).astype(F32)
    g = rng.standard_normal(1 << 22).astype(F32)
    for op, (forward, derivative) in NUMPY_NODES.items():
        peer_fwd = timed(lambda: forward(x), args.reps)
        peer_vjp = timed(lambda: derivative(x, g), args.reps)
        for threads in thread_counts:
            backend = tapewise.cpu(threads=threads)
            record("forward", op, 22, threads, timed(node_forward(backend, op, x), args.reps), peer_fwd)
            record("vjp", op, 22, threads, timed(node_vjp(backend, op, x, g), args.reps), peer_vjp)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema": "tapewise-bench-cpu/1", "machine": platform.machine(), "cpus": os.cpu_count(),
                       "processor": platform.processor(), "numpy": np.__version__,
                       "tapewise": tapewise.__version__, "reps": args.reps, "rows": rows}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
