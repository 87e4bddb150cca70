#!/usr/bin/env python3
# tools/bench_torch.py — the peer for tapewise-bench: PyTorch eager on the same GPU, per node, dtype and
# size, forward and backward (torch.autograd.grad) medians, the copy, and the 1,000-node chain. Same op
# definitions, inputs and timing as shared/perf/torch_baseline.py and torch_extra.py; writes JSON for
# `tapewise-bench --torch FILE`. It measures PyTorch only; the comparison is tapewise-bench's.
import argparse
import datetime
import json
import os
import platform
import sys
import time

EPS = 1e-6
POS = {'sqrt', 'log', 'div', 'inv'}  # inputs |x| + 0.5, as torch_baseline.py


def ops(torch, F):
    # Verbatim from shared/perf/torch_baseline.py.
    return {
      'add': (2, lambda a,b: a+b), 'sub': (2, lambda a,b: a-b), 'mul': (2, lambda a,b: a*b),
      'neg': (1, lambda x: -x), 'scale': (1, lambda x: x*0.37), 'abs': (1, torch.abs),
      'sqrt': (1, torch.sqrt), 'clamp': (1, lambda x: torch.clamp(x, -0.5, 0.5)),
      'max': (2, torch.maximum), 'min': (2, torch.minimum), 'div': (2, lambda a,b: a/b),
      'relu': (1, torch.relu), 'exp': (1, torch.exp), 'sin': (1, torch.sin), 'cos': (1, torch.cos),
      'log': (1, torch.log), 'inv': (1, torch.reciprocal),
      'safeLog': (1, lambda x: torch.log(F.softplus(x) + EPS)),
      'sigmoid': (1, torch.sigmoid), 'tanh': (1, torch.tanh), 'silu': (1, F.silu),
      'gelu': (1, lambda x: F.gelu(x, approximate='tanh')), 'softplus': (1, F.softplus),
    }


def timeit(torch, fn, reps):
    # torch_baseline.py's timeit: 3 warm-ups, synchronize, one event pair per call, median.
    s = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    e = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for _ in range(3): fn()
    torch.cuda.synchronize()
    for i in range(reps):
        s[i].record(); fn(); e[i].record()
    torch.cuda.synchronize()
    t = sorted(s[i].elapsed_time(e[i]) for i in range(reps))
    return t[len(t)//2]


def kernels(torch, fn):
    # CUDA kernels one call launches (torch_baseline.py); None where the profiler is unavailable.
    try:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            fn(); torch.cuda.synchronize()
        return sum(1 for ev in p.events() if ev.device_type == torch.autograd.DeviceType.CUDA)
    except Exception as ex:  # noqa: BLE001 - a count is a nicety, never a reason to lose the timings
        print(f'  (kernel count unavailable: {ex!r})', flush=True)
        return None


def chain(torch, dev, nodes=1000, m=1 << 12):
    # Verbatim method of shared/perf/torch_extra.py: record + backward, host clock, 2 warm-up + 5 runs.
    x = torch.randn(m, device=dev, requires_grad=True)
    fs = [torch.sin, torch.tanh, torch.sigmoid, lambda t: t*0.9, torch.relu]
    def run():
        h = x
        for i in range(nodes): h = fs[i % 5](h)
        torch.autograd.grad(h, [x], torch.ones_like(h))
    for _ in range(2): run()
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(5): run()
    torch.cuda.synchronize()
    return {'nodes': nodes, 'n': m, 'dtype': 'f32', 'ops': 'sin, tanh, sigmoid, t*0.9, relu',
            'warmup': 2, 'runs': 5, 'us_per_node': (time.perf_counter() - t0) / 5 / nodes * 1e6}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--sizes', default='26,12', help='log2 element counts, comma-separated')
    ap.add_argument('--dtypes', default='f32,f64')
    ap.add_argument('--ops', default='all', help="'all' or comma-separated node names")
    ap.add_argument('--reps', type=int, default=20, help='timed runs for sizes >= 2^20; 10x that below')
    ap.add_argument('--json', required=True, help='output JSON (tapewise-bench --torch reads it)')
    ap.add_argument('--no-chain', action='store_true')
    ap.add_argument('--no-kernels', action='store_true', help='skip the profiler kernel counts')
    ap.add_argument('--seed', type=int, default=20261130)
    args = ap.parse_args()
    if args.reps < 20: sys.exit('bench_torch: --reps must be >= 20')

    try:
        import torch
        import torch.nn.functional as F
    except ImportError as ex:
        sys.exit(f'bench_torch: PyTorch is not importable ({ex}); run this where python3 has torch')
    if not torch.cuda.is_available():
        sys.exit('bench_torch: torch.cuda.is_available() is False: no usable GPU here')
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = 'cuda'
    table = ops(torch, F)
    names = list(table) if args.ops == 'all' else args.ops.split(',')
    for name in names:
        if name not in table: sys.exit(f'bench_torch: unknown node {name!r}')
    sizes = [int(s) for s in args.sizes.split(',') if s]
    dtypes = {'f32': torch.float32, 'f64': torch.float64}
    for d in args.dtypes.split(','):
        if d not in dtypes: sys.exit(f'bench_torch: unknown dtype {d!r} (f32, f64)')
    props = torch.cuda.get_device_properties(0)
    res = {
        'meta': {'tool': 'bench_torch.py', 'torch': torch.__version__, 'cuda': torch.version.cuda,
                 'gpu': torch.cuda.get_device_name(0), 'sm_count': props.multi_processor_count,
                 'l2_bytes': getattr(props, 'L2_cache_size', None), 'python': platform.python_version(),
                 'date': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d'),
                 'reps': args.reps, 'reps_below_2^20': 10 * args.reps, 'seed': args.seed,
                 'timing': 'median of per-call CUDA event pairs after 3 warm-ups (torch_baseline.py)',
                 'backward': 'torch.autograd.grad(y, inputs, g, retain_graph=True)'},
        'copy': {}, 'ops': {}, 'errors': []}

    def save():
        with open(args.json, 'w') as f: json.dump(res, f, indent=1)

    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    # ~0.25 s of 1 GiB copies first, so that no measurement runs at idle clocks.
    x0 = torch.randn(1 << 28, device=dev, generator=gen); y0 = torch.empty_like(x0)
    for _ in range(500): y0.copy_(x0)
    torch.cuda.synchronize()
    del x0, y0
    for dname in args.dtypes.split(','):
        dtype = dtypes[dname]
        for logn in sizes:
            n = 1 << logn
            reps = args.reps if logn >= 20 else 10 * args.reps
            key = f'{dname}_{logn}'
            x0 = torch.randn(n, device=dev, dtype=dtype, generator=gen); y0 = torch.empty_like(x0)
            res['copy'][key] = {'ms': timeit(torch, lambda: y0.copy_(x0), reps), 'bytes': 2 * n * x0.element_size()}
            del x0, y0
            print(f'{key}: copy {res["copy"][key]["ms"]:.4f} ms', flush=True)
            for name in names:
                ar, f = table[name]
                try:
                    ins = [torch.randn(n, device=dev, dtype=dtype, generator=gen) for _ in range(ar)]
                    if name in POS: ins = [i.abs() + 0.5 for i in ins]
                    ins = [i.requires_grad_() for i in ins]
                    g = torch.randn(n, device=dev, dtype=dtype, generator=gen)
                    fwd = timeit(torch, lambda: f(*ins), reps)
                    y = f(*ins)
                    bwd = timeit(torch, lambda: torch.autograd.grad(y, ins, g, retain_graph=True), reps)
                    res['ops'].setdefault(name, {})[key] = {'fwd_ms': fwd, 'bwd_ms': bwd, 'arity': ar}
                    print(f'{key}: {name:9s} fwd {fwd:.4f} ms  bwd {bwd:.4f} ms', flush=True)
                    del ins, g, y
                except Exception as ex:  # noqa: BLE001 - record it, keep measuring the rest
                    res['errors'].append(f'{name} {key}: {ex!r}')
                    print(f'{key}: {name} FAILED: {ex!r}', flush=True)
            torch.cuda.empty_cache()
            save()

    if not args.no_chain:
        res['chain'] = chain(torch, dev)
        print(f'chain: {res["chain"]["us_per_node"]:.2f} us/node', flush=True)
    # A 1 GiB copy, for comparison with tapewise-bench's roofline.
    x0 = torch.randn(1 << 28, device=dev, generator=gen); y0 = torch.empty_like(x0)
    ms = timeit(torch, lambda: y0.copy_(x0), args.reps)
    res['copy']['1GiB'] = {'ms': ms, 'bytes': 2 << 30, 'gbps': (2 << 30) / (ms * 1e-3) / 1e9}
    print(f'copy 1 GiB: {ms:.4f} ms, {res["copy"]["1GiB"]["gbps"]:.1f} GB/s', flush=True)
    del x0, y0
    torch.cuda.empty_cache()
    save()

    # Kernel counts, after every timing (the profiler stays out of the timed runs): float32, largest size.
    if not args.no_kernels and 'f32' in args.dtypes.split(','):
        logn = max(sizes); n = 1 << logn; key = f'f32_{logn}'
        for name in names:
            ar, f = table[name]
            if key not in res['ops'].get(name, {}): continue
            ins = [torch.randn(n, device=dev, generator=gen) for _ in range(ar)]
            if name in POS: ins = [i.abs() + 0.5 for i in ins]
            ins = [i.requires_grad_() for i in ins]
            g = torch.randn(n, device=dev, generator=gen)
            y = f(*ins)
            res['ops'][name][key]['fwd_kernels'] = kernels(torch, lambda: f(*ins))
            res['ops'][name][key]['bwd_kernels'] = kernels(torch, lambda: torch.autograd.grad(y, ins, g, retain_graph=True))
            del ins, g, y
        torch.cuda.empty_cache()
    save()
    print(f'wrote {args.json}' + (f' ({len(res["errors"])} errors)' if res['errors'] else ''), flush=True)
    return 1 if res['errors'] else 0


if __name__ == '__main__':
    sys.exit(main())
