#!/usr/bin/env python3
"""bench/bench_torch_maximum.py — tapewise.torch against PyTorch eager on one GPU, in one run:

1. backward of maximum at 2^26 float32: tapewise.torch.maximum (one fused VJP kernel) against
   torch.maximum (target: tapewise >= 3x faster, Python overhead included);
2. per-call overhead at 2^12 float32: forward + backward of a tapewise.torch node against the eager
   PyTorch op (target: within 2x), for maximum, sin and clamp.

CUDA events, warm-up, medians of --reps calls, random inputs (never zeros). Prints a table and writes
JSON to --out.

    python3 bench/bench_torch_maximum.py --out evidence/performance/torch-nodes/python_bench.json
"""

import argparse
import json
import platform
import statistics
import sys

import torch

import tapewise
import tapewise.torch as twt


def timed_ms(fn, reps, warmup):
    """Median milliseconds of fn() over `reps` calls, each timed with CUDA events after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def random_inputs(n, generator):
    """a, b, g: normal values with a tie at every 7th element, never exactly zero."""
    a = torch.randn(n, device="cuda", generator=generator)
    b = torch.randn(n, device="cuda", generator=generator)
    b[::7] = a[::7]
    g = torch.rand(n, device="cuda", generator=generator) + 0.5
    for t in (a, b):
        t[t == 0] = 0.5
    return a, b, g


def backward_only(op, a, b, g):
    """A closure running only the backward of op(a, b) (a fresh graph is built outside the timing)."""
    state = {}

    def prepare():
        a.grad = b.grad = None
        state["y"] = op(a, b)

    def run():
        state["y"].backward(g)

    return prepare, run


def time_backward(op, a, b, g, reps, warmup):
    """Median ms of y.backward(g) alone (the forward runs before each timed call, untimed)."""
    prepare, run = backward_only(op, a, b, g)
    for _ in range(warmup):
        prepare()
        run()
    times = []
    for _ in range(reps):
        prepare()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def large_maximum(reps, warmup, generator):
    n = 1 << 26
    a, b, g = random_inputs(n, generator)
    a.requires_grad_()
    b.requires_grad_()
    torch_ms = time_backward(torch.maximum, a, b, g, reps, warmup)
    tapewise_ms = time_backward(twt.maximum, a, b, g, reps, warmup)
    return {"elements": n, "dtype": "float32", "torch_backward_ms": torch_ms, "tapewise_backward_ms": tapewise_ms,
            "speedup": torch_ms / tapewise_ms, "target_speedup": 3.0, "meets_target": torch_ms / tapewise_ms >= 3.0}


SMALL_OPS = {
    "maximum": (lambda a, b: torch.maximum(a, b), lambda a, b: twt.maximum(a, b)),
    "sin": (lambda a, b: torch.sin(a), lambda a, b: twt.sin(a)),
    "clamp": (lambda a, b: torch.clamp(a, -0.5, 0.5), lambda a, b: twt.clamp(a, -0.5, 0.5)),
}


def small_overhead(reps, warmup, generator, calls_per_sample=100):
    """Per call, forward + backward at 2^12 elements: each sample times `calls_per_sample` calls back to
    back (the host cost dominates at this size), reported per call in microseconds."""
    n = 1 << 12
    a, b, g = random_inputs(n, generator)
    a.requires_grad_()
    b.requires_grad_()
    rows = []
    for name, (eager, ours) in SMALL_OPS.items():
        def loop(op):
            def run():
                for _ in range(calls_per_sample):
                    op(a, b).backward(g)
            return run
        eager_us = timed_ms(loop(eager), reps, warmup) * 1000 / calls_per_sample
        ours_us = timed_ms(loop(ours), reps, warmup) * 1000 / calls_per_sample
        forward_eager = timed_ms(lambda: [eager(a, b) for _ in range(calls_per_sample)], reps, warmup) * 1000 / calls_per_sample
        forward_ours = timed_ms(lambda: [ours(a, b) for _ in range(calls_per_sample)], reps, warmup) * 1000 / calls_per_sample
        rows.append({"op": name, "elements": n, "dtype": "float32",
                     "torch_fwd_bwd_us": eager_us, "tapewise_fwd_bwd_us": ours_us, "ratio": ours_us / eager_us,
                     "torch_fwd_us": forward_eager, "tapewise_fwd_us": forward_ours,
                     "target_ratio": 2.0, "meets_target": ours_us / eager_us <= 2.0})
    return rows


def print_table(large, small):
    print(f"maximum backward, 2^26 float32: torch {large['torch_backward_ms']:.3f} ms, tapewise "
          f"{large['tapewise_backward_ms']:.3f} ms -> {large['speedup']:.2f}x faster "
          f"(target >= 3x: {'met' if large['meets_target'] else 'MISSED'})")
    print()
    print("per call at 2^12 float32 (us)   torch fwd+bwd  tapewise fwd+bwd  ratio   torch fwd  tapewise fwd  target <= 2x")
    for r in small:
        print(f"  {r['op']:<29} {r['torch_fwd_bwd_us']:>13.2f}  {r['tapewise_fwd_bwd_us']:>16.2f}  {r['ratio']:>5.2f}"
              f"  {r['torch_fwd_us']:>9.2f}  {r['tapewise_fwd_us']:>12.2f}  {'met' if r['meets_target'] else 'MISSED'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON output path")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available() or not tapewise.cuda_available():
        print(f"bench_torch_maximum: needs a CUDA device ({tapewise.cuda_unavailable_reason()})", file=sys.stderr)
        return 2
    generator = torch.Generator(device="cuda").manual_seed(20261130)
    large = large_maximum(args.reps, args.warmup, generator)
    small = small_overhead(args.reps, args.warmup, generator)
    print_table(large, small)
    report = {
        "schema": "tapewise.bench_torch_maximum/1",
        "device": torch.cuda.get_device_name(),
        "tapewise_backend": twt.backend_for(torch.empty(1, device="cuda")).describe(),
        "torch": torch.__version__, "tapewise": tapewise.__version__, "python": platform.python_version(),
        "reps": args.reps, "warmup": args.warmup, "timing": "CUDA events, median",
        "large_maximum_backward": large, "small_per_call": small,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
