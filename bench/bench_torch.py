#!/usr/bin/env python3
# bench/bench_torch.py — the peers for tapewise-bench, on the same GPU: PyTorch eager per node, dtype and
# size (forward and backward medians), torch.compile (default mode; its compile time apart from its
# steady state) and CUDA-graph replay of the same calls for a representative subset of nodes (all with
# --peer-ops all), the copy, and the 1,000-node chain in tapewise-bench's three graph shapes (unary,
# binary, fanout: chain_graph) at several sizes in all three forms. Writes JSON for `tapewise-bench
# --torch FILE` (the chains under chain_shapes). It measures PyTorch only; the comparison is
# tapewise-bench's. --device cpu (with --no-compile) runs the same code on the host, for the tests.
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

OPS_SCHEMA = 'tapewise-conform.ops/1'

# The peers' default subset: a plain unary node, a compute-heavy one, one that eager runs as three
# kernels (safeLog) and a binary one whose eager backward launches many (max). torch.compile of all
# 23 nodes takes minutes; --peer-ops all does it.
PEER_OPS = 'sin,gelu,safeLog,max'


def read_table(conform, ops_json):
    # The op table (spec/ops.def) as `tapewise-conform ops --json` exports it: each node's first run
    # scalar set (what tapewise-bench passes) and its bench_inputs (normal, or positive: |x| + 0.5).
    if ops_json:
        with open(ops_json) as f: table = json.load(f)
    else:
        done = subprocess.run([conform, 'ops', '--json', '-'], capture_output=True, text=True)
        if done.returncode != 0: sys.exit(f'bench_torch: {conform} ops --json - failed: {done.stderr.strip()}')
        table = json.loads(done.stdout)
    if table.get('schema') != OPS_SCHEMA: sys.exit(f'bench_torch: op table schema {table.get("schema")!r}, not {OPS_SCHEMA}')
    return {op['name']: op for op in table['ops']}


def ops(torch, F, table):
    # Each node as PyTorch writes it (conform/frameworks/forms.py, the audit's forms too), with the table's
    # sample scalars (its first run set) bound; a node of the table without a form fails the run.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'conform', 'frameworks'))
    import forms
    missing = forms.missing_forms('torch', table)
    if missing: sys.exit(f'bench_torch: conform/frameworks/forms.py has no PyTorch form for {", ".join(missing)}')
    natural = forms.torch_forms(torch, F)

    def bound(name):
        sets = table[name]['run_scalars']
        scalars = sets[0] if sets else {}
        form = natural[name]
        return (lambda x: form(x, scalars)) if table[name]['arity'] == 1 else (lambda a, b: form(a, b, scalars))

    nodes = {name: (table[name]['arity'], bound(name)) for name in table}
    positive = {name for name, op in table.items() if op['bench_inputs'] == 'positive'}
    return nodes, positive


def synchronize(torch):
    # Waits for the GPU's queued work; on the CPU every call has finished when it returns.
    if torch.cuda.is_available() and torch.cuda.is_initialized(): torch.cuda.synchronize()


def timeit(torch, fn, reps, device='cuda'):
    # 3 warm-ups, synchronize, one CUDA event pair per call, median (ms); on the CPU a host clock per call.
    if device == 'cpu':
        for _ in range(3): fn()
        t = []
        for _ in range(reps):
            t0 = time.perf_counter(); fn(); t.append((time.perf_counter() - t0) * 1e3)
        return sorted(t)[len(t)//2]
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
    # CUDA kernels one call launches; None where the profiler is unavailable.
    try:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            fn(); torch.cuda.synchronize()
        return sum(1 for ev in p.events() if ev.device_type == torch.autograd.DeviceType.CUDA)
    except Exception as ex:  # noqa: BLE001 - a count is a nicety, never a reason to lose the timings
        print(f'  (kernel count unavailable: {ex!r})', flush=True)
        return None


def graph_of(torch, fn):
    # fn captured once as a CUDA graph (after warm-up on a side stream, as capture requires); replay it.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def host_clock(torch, fn, nodes, warmup=2, runs=5):
    # Host wall clock of whole runs, synchronized before and after (us per node).
    for _ in range(warmup): fn()
    synchronize(torch); t0 = time.perf_counter()
    for _ in range(runs): fn()
    synchronize(torch)
    return (time.perf_counter() - t0) / runs / nodes * 1e6


def op_peers(torch, name, f, ins, g, reps, compile_it, dev):
    # The same node as torch.compile (fwd; bwd = the compiled backward alone; step = fwd + bwd) and as
    # CUDA graphs replaying the eager calls (CUDA only). Errors are recorded, never fatal.
    out = {}
    try:
        if dev == 'cuda':
            y = f(*ins)
            gf = graph_of(torch, lambda: f(*ins))
            gb = graph_of(torch, lambda: torch.autograd.grad(y, ins, g, retain_graph=True))
            out['graph_fwd_ms'] = timeit(torch, gf.replay, reps)
            out['graph_bwd_ms'] = timeit(torch, gb.replay, reps)
            del gf, gb, y
    except Exception as ex:  # noqa: BLE001
        out['graph_error'] = repr(ex)[:300]
    if not compile_it: return out
    try:
        cf = torch.compile(lambda *xs: f(*xs))  # a lambda: some nodes are C builtins (torch.maximum)
        t0 = time.perf_counter()
        y = cf(*ins); torch.autograd.grad(y, ins, g); synchronize(torch)
        out['compile_s'] = time.perf_counter() - t0
        out['compile_fwd_ms'] = timeit(torch, lambda: cf(*ins), reps, dev)
        out['compile_step_ms'] = timeit(torch, lambda: torch.autograd.grad(cf(*ins), ins, g), reps, dev)
        try:
            y = cf(*ins)
            out['compile_bwd_ms'] = timeit(torch, lambda: torch.autograd.grad(y, ins, g, retain_graph=True), reps, dev)
            del y
        except RuntimeError:
            # A backward compiled with donated buffers refuses retain_graph: its time is the step's less
            # the forward's.
            out['compile_bwd_ms'] = out['compile_step_ms'] - out['compile_fwd_ms']
            out['compile_bwd_from_step'] = True
        del cf
    except Exception as ex:  # noqa: BLE001
        out['compile_error'] = repr(ex)[:300]
    return out


CHAIN_SHAPES = ('unary', 'binary', 'fanout')
FANOUT_CYCLE = 6  # sin, tanh, sigmoid, add, add, scale: the nodes of one fan-out cycle


def chain_graph(torch, shape, nodes):
    # tapewise-bench's chain shapes (bench/chain.cpp), the same math node for node: returns
    # forward(x, *fresh_leaves) -> h, the fresh leaves it takes beyond x, its nodes (leaves not counted)
    # and its ops in words. unary: sin, tanh, sigmoid, t * 0.9, relu repeated. binary: node i is
    # mul, add, maximum, sub (repeated) of h and fresh leaf i. fanout: h -> sin, tanh, sigmoid ->
    # (sin + tanh) + sigmoid -> * 0.5, whole cycles of six nodes only.
    if shape == 'unary':
        fs = [torch.sin, torch.tanh, torch.sigmoid, lambda t: t * 0.9, torch.relu]
        def forward(x):
            h = x
            for i in range(nodes): h = fs[i % 5](h)
            return h
        return forward, 0, nodes, 'sin, tanh, sigmoid, t*0.9, relu'
    if shape == 'binary':
        fs = [torch.mul, torch.add, torch.maximum, torch.sub]
        def forward(x, *leaves):
            h = x
            for i, leaf in enumerate(leaves): h = fs[i % 4](h, leaf)
            return h
        return forward, nodes, nodes, 'mul, add, maximum, sub, each with a fresh leaf'
    if shape == 'fanout':
        cycles = nodes // FANOUT_CYCLE
        def forward(x):
            h = x
            for _ in range(cycles): h = ((torch.sin(h) + torch.tanh(h)) + torch.sigmoid(h)) * 0.5
            return h
        return forward, 0, cycles * FANOUT_CYCLE, 'sin, tanh, sigmoid of h; (sin + tanh) + sigmoid; * 0.5'
    raise ValueError(f'unknown chain shape {shape!r} ({", ".join(CHAIN_SHAPES)})')


def chain(torch, dev, shape, sizes, nodes, compile_it, dname='f32', dtype=None):
    # One shape's chain, record + backward per run, host clock: eager; the same step captured once as a
    # CUDA graph and replayed (CUDA only); torch.compile (default mode) of the forward, backward through
    # its compiled backward. Backward asks for every leaf's gradient (x's, and binary's fresh leaves'),
    # as tapewise-bench's chain does. One compiled function for every size, as a user would call it: a
    # second size makes dynamo recompile once with dynamic shapes.
    forward, fresh, tape_nodes, ops = chain_graph(torch, shape, nodes)
    compiled = torch.compile(forward) if compile_it else None
    dtype = dtype or torch.float32
    out = {'shape': shape, 'nodes': tape_nodes, 'leaves': 1 + fresh, 'dtype': dname, 'ops': ops, 'sizes': {}}
    for logn in sizes:
        m = 1 << logn
        r = {'n': m}
        x = torch.randn(m, device=dev, dtype=dtype, requires_grad=True)
        leaves = [torch.randn(m, device=dev, dtype=dtype, requires_grad=True) for _ in range(fresh)]
        wanted = [x] + leaves
        ones = torch.ones(m, device=dev, dtype=dtype)
        def eager():
            h = forward(x, *leaves)
            torch.autograd.grad(h, wanted, torch.ones_like(h))
        r['eager_us_per_node'] = host_clock(torch, eager, tape_nodes)
        if dev == 'cuda':
            try:
                g = graph_of(torch, lambda: torch.autograd.grad(forward(x, *leaves), wanted, ones))
                r['graph_us_per_node'] = host_clock(torch, g.replay, tape_nodes, warmup=3, runs=20)
                del g
            except Exception as ex:  # noqa: BLE001
                r['graph_error'] = repr(ex)[:300]
        if compiled is not None:
            try:
                t0 = time.perf_counter()
                torch.autograd.grad(compiled(x, *leaves), wanted, ones); synchronize(torch)
                r['compile_first_call_s'] = time.perf_counter() - t0
                r['compile_us_per_node'] = host_clock(
                    torch, lambda: torch.autograd.grad(compiled(x, *leaves), wanted, ones), tape_nodes, warmup=3, runs=20)
            except Exception as ex:  # noqa: BLE001
                r['compile_error'] = repr(ex)[:300]
        out['sizes'][str(logn)] = r
        print(f'chain {shape} 2^{logn}: ' + ', '.join(f'{k} {v:.3f}' for k, v in r.items() if isinstance(v, float)),
              flush=True)
        del x, leaves, wanted, ones
        if dev == 'cuda': torch.cuda.empty_cache()
    return out


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--sizes', default='26,12', help='log2 element counts, comma-separated')
    ap.add_argument('--dtypes', default='f32,f64')
    ap.add_argument('--ops', default='all', help="'all' or comma-separated node names")
    ap.add_argument('--reps', type=int, default=20, help='timed runs for sizes >= 2^20; 10x that below')
    ap.add_argument('--json', required=True, help='output JSON (tapewise-bench --torch reads it)')
    ap.add_argument('--conform', help='tapewise-conform, asked for the op table (ops --json)')
    ap.add_argument('--ops-json', help='the op table as `tapewise-conform ops --json FILE` wrote it')
    ap.add_argument('--peer-ops', default=PEER_OPS,
                    help="nodes also run as torch.compile and CUDA graphs: 'all', 'none' or names")
    ap.add_argument('--peer-dtypes', default='f32', help='dtypes of the per-node peers')
    ap.add_argument('--no-compile', action='store_true', help='no torch.compile (CUDA graphs still run)')
    ap.add_argument('--chain-sizes', default='12,16,20', help="log2 sizes of the chain ('' for none)")
    ap.add_argument('--chain-nodes', type=int, default=1000, help='nodes per chain (fanout: whole cycles of 6)')
    ap.add_argument('--chain-shapes', default=','.join(CHAIN_SHAPES), help='graph shapes of the chain, comma-separated')
    ap.add_argument('--chain-dtype', default='f32', help="the chain's dtype: f32, f64, bf16 or f16")
    ap.add_argument('--device', choices=('cuda', 'cpu'), default='cuda',
                    help='cpu: the same code on the host with host clocks (no CUDA graphs, no kernel counts): for tests')
    ap.add_argument('--no-kernels', action='store_true', help='skip the profiler kernel counts')
    ap.add_argument('--seed', type=int, default=20261130)
    args = ap.parse_args()
    if args.reps < 20: sys.exit('bench_torch: --reps must be >= 20')
    if args.chain_nodes < FANOUT_CYCLE: sys.exit(f'bench_torch: --chain-nodes must be >= {FANOUT_CYCLE}')
    for shape in args.chain_shapes.split(','):
        if shape not in CHAIN_SHAPES: sys.exit(f'bench_torch: unknown chain shape {shape!r} ({", ".join(CHAIN_SHAPES)})')
    if args.sizes and not args.conform and not args.ops_json:
        sys.exit('bench_torch: the per-node rows need the op table: --conform BIN or --ops-json FILE (or --sizes "")')
    return args


def main():
    args = parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as ex:
        sys.exit(f'bench_torch: PyTorch is not importable ({ex}); run this where python3 has torch')
    dev = args.device
    if dev == 'cuda' and not torch.cuda.is_available():
        sys.exit('bench_torch: torch.cuda.is_available() is False: no usable GPU here (--device cpu runs on the host)')
    torch.backends.cuda.matmul.allow_tf32 = False
    sizes = [int(s) for s in args.sizes.split(',') if s]
    table, positive = ops(torch, F, read_table(args.conform, args.ops_json)) if sizes else ({}, set())
    names = (list(table) if args.ops == 'all' else args.ops.split(',')) if sizes else []
    peers = set() if not sizes or args.peer_ops == 'none' else set(table) if args.peer_ops == 'all' else set(args.peer_ops.split(','))
    for name in names + sorted(peers):
        if name not in table: sys.exit(f'bench_torch: unknown node {name!r}')
    chain_sizes = [int(s) for s in args.chain_sizes.split(',') if s]
    dtypes = {'f32': torch.float32, 'f64': torch.float64, 'bf16': torch.bfloat16, 'f16': torch.float16}
    for d in args.dtypes.split(',') + args.peer_dtypes.split(',') + [args.chain_dtype]:
        if d and d not in dtypes: sys.exit(f'bench_torch: unknown dtype {d!r} (f32, f64, bf16, f16)')
    props = torch.cuda.get_device_properties(0) if dev == 'cuda' else None
    res = {
        'meta': {'tool': 'bench_torch.py', 'torch': torch.__version__, 'cuda': torch.version.cuda, 'device': dev,
                 'gpu': torch.cuda.get_device_name(0) if props else 'cpu',
                 'sm_count': props.multi_processor_count if props else None,
                 'l2_bytes': getattr(props, 'L2_cache_size', None), 'python': platform.python_version(),
                 'date': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d'),
                 'reps': args.reps, 'reps_below_2^20': 10 * args.reps, 'seed': args.seed,
                 'timing': 'median of per-call CUDA event pairs after 3 warm-ups' if dev == 'cuda'
                           else 'median of per-call host clocks after 3 warm-ups (cpu)',
                 'backward': 'torch.autograd.grad(y, inputs, g, retain_graph=True)',
                 'peer_ops': sorted(peers), 'peer_dtypes': args.peer_dtypes,
                 'compile': None if args.no_compile else 'torch.compile, default mode; compile_s: first fwd + bwd call',
                 'graph': 'torch.cuda.CUDAGraph of the eager call, replayed' if dev == 'cuda' else None,
                 'chain_shapes': args.chain_shapes.split(',') if chain_sizes else []},
        'copy': {}, 'ops': {}, 'errors': []}

    def save():
        with open(args.json, 'w') as f: json.dump(res, f, indent=1)

    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    if dev == 'cuda':  # ~0.25 s of 1 GiB copies first, so that no measurement runs at idle clocks
        x0 = torch.randn(1 << 28, device=dev, generator=gen); y0 = torch.empty_like(x0)
        for _ in range(500): y0.copy_(x0)
        torch.cuda.synchronize()
        del x0, y0
    started = time.perf_counter()
    for dname in args.dtypes.split(','):
        dtype = dtypes[dname]
        for logn in sizes:
            n = 1 << logn
            reps = args.reps if logn >= 20 else 10 * args.reps
            key = f'{dname}_{logn}'
            x0 = torch.randn(n, device=dev, dtype=dtype, generator=gen); y0 = torch.empty_like(x0)
            res['copy'][key] = {'ms': timeit(torch, lambda: y0.copy_(x0), reps, dev), 'bytes': 2 * n * x0.element_size()}
            del x0, y0
            print(f'{key}: copy {res["copy"][key]["ms"]:.4f} ms', flush=True)
            for name in names:
                ar, f = table[name]
                try:
                    ins = [torch.randn(n, device=dev, dtype=dtype, generator=gen) for _ in range(ar)]
                    if name in positive: ins = [i.abs() + 0.5 for i in ins]
                    ins = [i.requires_grad_() for i in ins]
                    g = torch.randn(n, device=dev, dtype=dtype, generator=gen)
                    fwd = timeit(torch, lambda: f(*ins), reps, dev)
                    y = f(*ins)
                    bwd = timeit(torch, lambda: torch.autograd.grad(y, ins, g, retain_graph=True), reps, dev)
                    row = {'fwd_ms': fwd, 'bwd_ms': bwd, 'arity': ar}
                    del y
                    if name in peers and dname in args.peer_dtypes.split(','):
                        row.update(op_peers(torch, name, f, ins, g, reps, not args.no_compile, dev))
                    res['ops'].setdefault(name, {})[key] = row
                    print(f'{key}: {name:9s} ' + '  '.join(f'{k} {v:.4f}' for k, v in row.items() if isinstance(v, float)),
                          flush=True)
                    del ins, g
                except Exception as ex:  # noqa: BLE001 - record it, keep measuring the rest
                    res['errors'].append(f'{name} {key}: {ex!r}')
                    print(f'{key}: {name} FAILED: {ex!r}', flush=True)
            if dev == 'cuda': torch.cuda.empty_cache()
            save()
    res['meta']['per_node_s'] = time.perf_counter() - started

    if chain_sizes:
        started = time.perf_counter()
        res['chain_shapes'] = {shape: chain(torch, dev, shape, chain_sizes, args.chain_nodes, not args.no_compile,
                                            args.chain_dtype, dtypes[args.chain_dtype])
                               for shape in args.chain_shapes.split(',')}
        res['meta']['chain_s'] = time.perf_counter() - started
        save()
    if dev == 'cuda':  # a 1 GiB copy, for comparison with tapewise-bench's roofline
        x0 = torch.randn(1 << 28, device=dev, generator=gen); y0 = torch.empty_like(x0)
        ms = timeit(torch, lambda: y0.copy_(x0), args.reps)
        res['copy']['1GiB'] = {'ms': ms, 'bytes': 2 << 30, 'gbps': (2 << 30) / (ms * 1e-3) / 1e9}
        print(f'copy 1 GiB: {ms:.4f} ms, {res["copy"]["1GiB"]["gbps"]:.1f} GB/s', flush=True)
        del x0, y0
        torch.cuda.empty_cache()
        save()

    # Kernel counts, after every timing (the profiler stays out of the timed runs): float32, largest size.
    if dev == 'cuda' and names and not args.no_kernels and 'f32' in args.dtypes.split(','):
        logn = max(sizes); n = 1 << logn; key = f'f32_{logn}'
        for name in names:
            ar, f = table[name]
            if key not in res['ops'].get(name, {}): continue
            ins = [torch.randn(n, device=dev, generator=gen) for _ in range(ar)]
            if name in positive: ins = [i.abs() + 0.5 for i in ins]
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
