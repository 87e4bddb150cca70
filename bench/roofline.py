#!/usr/bin/env python3
# bench/roofline.py NCU_CSV [--json OUT] — the compute roofline of every elementwise kernel, from
# Nsight Compute's instruction counts (`ncu --csv --print-kernel-base mangled` over `tapewise-bench
# --once`, metrics below; bench/run_bench.sh runs it): the time the kernel cannot beat issuing its
# instructions, max over the pipes it uses of warp instructions / (SMs x pipe rate x SM clock). With
# the copy time of its bytes, the larger of the two is the kernel's roofline (tapewise-bench --roofline).
import argparse
import csv
import json
import re
import sys
import tempfile
from pathlib import Path

# Metrics asked of ncu (one pass): warp instructions in all and per pipe, and what ran.
METRICS = ['gpu__time_duration.sum', 'smsp__inst_executed.sum', 'sm__inst_executed_pipe_fp64.sum',
           'sm__inst_executed_pipe_xu.sum', 'sm__warps_active.avg.pct_of_peak_sustained_active',
           'smsp__issue_active.avg.pct_of_peak_sustained_active', 'dram__bytes_read.sum', 'dram__bytes_write.sum',
           'sm__cycles_elapsed.avg.per_second']
# Warp instructions per SM per clock on Hopper (sm_90): 4 schedulers issue one each; 64 FP64 lanes;
# 16 special-function (MUFU) lanes.
RATES = {'issue': 4.0, 'fp64': 2.0, 'xu': 0.5}
TIME_UNITS = {'nsecond': 1e-6, 'ns': 1e-6, 'usecond': 1e-3, 'us': 1e-3, 'msecond': 1.0, 'ms': 1.0, 'second': 1e3, 's': 1e3}
# A kernel's node, direction and element type in its mangled name: ForwardFnILNS_2OpE13EfEE is sin's
# float32 forward; the 16-bit types are named (NS_8bfloat16, NS_7float16).
KERNEL = re.compile(r'(ForwardFn|VjpFn)ILNS_2OpE(\d+)E(f|d|NS_8bfloat16|NS_7float16)E')
DTYPES = {'f': 'f32', 'd': 'f64', 'NS_8bfloat16': 'bf16', 'NS_7float16': 'f16'}


def op_names(root):
    # Op enumerators in table order (spec/ops.def): the number in a mangled Op template argument.
    text = (root / 'spec' / 'ops.def').read_text()
    return re.findall(r'^TAPEWISE_OP\((\w+),', text, flags=re.M)


REQUIRED_COLUMNS = ('ID', 'Kernel Name', 'Metric Name', 'Metric Value')


def number(text):
    text = (text or '').replace(',', '').strip()
    if text in ('', 'n/a'): return None
    try:
        return float(text)
    except ValueError:
        sys.exit(f'roofline: metric value {text[:40]!r} is not a number')


def read_ncu(path):
    # ncu's long CSV (one row per kernel launch and metric) -> {launch id: {kernel, metrics}}.
    launches = {}
    try:
        with open(path, newline='') as f:
            lines = [line for line in f if line.startswith('"')]  # ncu's own messages start with ==
    except (OSError, UnicodeDecodeError) as e:
        sys.exit(f'roofline: cannot read {path}: {e}')
    reader = csv.DictReader(lines)
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if lines and missing: sys.exit(f'roofline: {path} lacks the column(s) {", ".join(missing)}')
    for row in reader:
        launch = launches.setdefault(row['ID'], {'kernel': row['Kernel Name'] or '', 'grid': row.get('Grid Size'),
                                                 'block': row.get('Block Size'), 'metrics': {}})
        value = number(row['Metric Value'])
        if value is None: continue
        unit = row.get('Metric Unit', '')
        if row['Metric Name'] == 'gpu__time_duration.sum': value *= TIME_UNITS.get(unit, 1.0)
        launch['metrics'][row['Metric Name']] = value
    return launches


def rooflines(path, names, sms, log2n):
    # Each tapewise node kernel's launch in the CSV -> its compute roofline and what ncu measured.
    kernels = []
    for launch in read_ncu(path).values():
        m = KERNEL.search(launch['kernel'])
        metrics = launch['metrics']
        if not m or 'smsp__inst_executed.sum' not in metrics: continue
        clock = metrics.get('sm__cycles_elapsed.avg.per_second')
        if not clock: sys.exit(f'roofline: no SM clock for {launch["kernel"][:80]}')
        if int(m.group(2)) >= len(names):
            sys.exit(f'roofline: {launch["kernel"][:80]} names op {m.group(2)}, which spec/ops.def does not have')
        n = 1 << log2n
        pipes = {'issue': metrics['smsp__inst_executed.sum'], 'fp64': metrics.get('sm__inst_executed_pipe_fp64.sum', 0.0),
                 'xu': metrics.get('sm__inst_executed_pipe_xu.sum', 0.0)}
        bound_ms = {pipe: 1e3 * count / (sms * RATES[pipe] * clock) for pipe, count in pipes.items()}
        pipe = max(bound_ms, key=bound_ms.get)
        kernels.append({
            'op': names[int(m.group(2))], 'dtype': DTYPES[m.group(3)],
            'dir': 'fwd' if m.group(1) == 'ForwardFn' else 'vjp', 'log2n': log2n,
            'compute_ms': bound_ms[pipe], 'compute_pipe': pipe, 'pipe_ms': bound_ms,
            'warp_inst_per_element': {p: c / n for p, c in pipes.items()},
            'thread_inst_per_element': 32 * pipes['issue'] / n,
            'ncu_ms': metrics.get('gpu__time_duration.sum'), 'sm_clock_hz': clock,
            'achieved_occupancy_pct': metrics.get('sm__warps_active.avg.pct_of_peak_sustained_active'),
            'issue_active_pct': metrics.get('smsp__issue_active.avg.pct_of_peak_sustained_active'),
            'dram_bytes': metrics.get('dram__bytes_read.sum', 0.0) + metrics.get('dram__bytes_write.sum', 0.0),
            'grid': launch['grid'], 'block': launch['block']})
    return kernels


def self_test():
    # A made-up ncu CSV with a float32, a bfloat16 and a float16 node kernel and a prim: the node
    # kernels are read with their op, dtype and direction, the prim is not, and the roofline is the
    # issue bound (2^26 warp instructions over 132 SMs x 4 a clock at 2 GHz = 0.0636 ms); and hostile
    # CSVs (none, a column missing, an op the table lacks, a value that is no number), each refused
    # with a clear error.
    names = op_names(Path(__file__).resolve().parents[1])
    base = '_ZN8tapewise10map_kernelINS_6detail'
    launches = [('1', base + '9ForwardFnILNS_2OpE%dEfEES5_Li128ELi2EEEvT_' % names.index('sin')),
                ('2', base + '9ForwardFnILNS_2OpE%dENS_8bfloat16EEES5_Li128ELi2EEEvT_' % names.index('sin')),
                ('3', base + '5VjpFnILNS_2OpE%dENS_7float16EEES5_Li128ELi1EEEvT_' % names.index('exp')),
                ('4', base + '6PrimFnIfLi1EEEfLi128ELi1EEEvT_')]
    header = '"ID","Kernel Name","Grid Size","Block Size","Metric Name","Metric Unit","Metric Value"'

    def ncu_csv(kernels, instructions='67,108,864'):
        rows = [header]
        for launch_id, kernel in kernels:
            for metric, unit, value in (('smsp__inst_executed.sum', 'inst', instructions),
                                        ('sm__cycles_elapsed.avg.per_second', 'cycle/second', '2000000000'),
                                        ('gpu__time_duration.sum', 'usecond', '80')):
                rows.append(f'"{launch_id}","{kernel}","(65536, 1, 1)","(128, 1, 1)","{metric}","{unit}","{value}"')
        return '\n'.join(rows) + '\n'

    past_the_table = ('1', base + '9ForwardFnILNS_2OpE%dEfEES5_Li128ELi2EEEvT_' % len(names))
    hostile = {'missing': None, 'no Metric Value column': header.replace(',"Metric Value"', '') + '\n',
               'an op past the table': ncu_csv([past_the_table]),
               'a value that is no number': ncu_csv(launches[:1], instructions='lots')}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / 'ncu.csv'
        path.write_text('==PROF== a message ncu prints\n' + ncu_csv(launches))
        kernels = rooflines(path, names, 132, 26)
        refused = []
        for what, text in hostile.items():
            bad = Path(folder) / 'bad.csv'
            if text is None: bad.unlink(missing_ok=True)
            else: bad.write_text(text)
            try:
                rooflines(bad, names, 132, 26)
            except SystemExit as e:
                if str(e.code).startswith('roofline: '): refused.append(what)
    if refused != list(hostile):
        print(f'roofline self-test: expected clear errors for {list(hostile)}, got them for {refused}', file=sys.stderr)
        return 1
    got = [(k['op'], k['dtype'], k['dir']) for k in kernels]
    want = [('sin', 'f32', 'fwd'), ('sin', 'bf16', 'fwd'), ('exp', 'f16', 'vjp')]
    expected_ms = 1e3 * 67108864 / (132 * 4.0 * 2e9)
    if got != want or any(abs(k['compute_ms'] - expected_ms) > 1e-12 or k['ncu_ms'] != 0.08 for k in kernels):
        print(f'roofline self-test: expected {want} at {expected_ms:.6f} ms, got {got} '
              f'{[(k["compute_ms"], k["ncu_ms"]) for k in kernels]}', file=sys.stderr)
        return 1
    print('roofline self-test: float32, bfloat16 and float16 node kernels read, the prim skipped; '
          f'refused with a clear error: {", ".join(hostile)}')
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('csv', nargs='?', help="ncu --csv output")
    ap.add_argument('--json', help='write the rooflines here (default: stdout)')
    ap.add_argument('--sms', type=int, default=132, help='multiprocessors (H200: 132)')
    ap.add_argument('--log2n', type=int, default=26, help='log2 of the elements each profiled kernel covered')
    ap.add_argument('--print-metrics', action='store_true', help='print the metric list for ncu and exit')
    ap.add_argument('--self-test', action='store_true', help='check the parsing on a made-up CSV and exit')
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.print_metrics:
        print(','.join(METRICS))
        return 0
    if not args.csv: ap.error('the ncu CSV is required')
    names = op_names(Path(__file__).resolve().parents[1])
    kernels = rooflines(args.csv, names, args.sms, args.log2n)
    if not kernels: sys.exit(f'roofline: no tapewise kernel with instruction counts in {args.csv}')
    kernels.sort(key=lambda k: (k['dtype'], names.index(k['op']), k['dir']))
    doc = {'tool': 'bench/roofline.py', 'source': str(args.csv), 'sms': args.sms, 'rates_per_sm_clock': RATES,
           'kernels': kernels}
    text = json.dumps(doc, indent=1)
    if args.json: Path(args.json).write_text(text + '\n')
    else: print(text)
    for k in kernels:
        print(f"{k['op']:9s} {k['dtype']} {k['dir']}: {k['thread_inst_per_element']:6.1f} inst/elem, compute "
              f"{k['compute_ms']:.4f} ms ({k['compute_pipe']}), ncu {k['ncu_ms'] or 0:.4f} ms, occupancy "
              f"{k['achieved_occupancy_pct'] or 0:.0f}%", file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
