#!/usr/bin/env python3
# tools/bench/roofline.py NCU_CSV [--json OUT] — the compute roofline of every elementwise kernel, from
# Nsight Compute's instruction counts (`ncu --csv --print-kernel-base mangled` over `tapewise-bench
# --once`, metrics below; tools/bench/run_bench.sh runs it): the time the kernel cannot beat issuing its
# instructions, max over the pipes it uses of warp instructions / (SMs x pipe rate x SM clock). With
# the copy time of its bytes, the larger of the two is the kernel's roofline (tapewise-bench --roofline).
import argparse
import csv
import json
import re
import sys
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
KERNEL = re.compile(r'(ForwardFn|VjpFn)ILNS_2OpE(\d+)E([fd])')


def op_names(root):
    # Op enumerators in table order (spec/ops.def): the number in a mangled Op template argument.
    text = (root / 'spec' / 'ops.def').read_text()
    return re.findall(r'^TAPEWISE_OP\((\w+),', text, flags=re.M)


def number(text):
    text = text.replace(',', '').strip()
    return float(text) if text not in ('', 'n/a') else None


def read_ncu(path):
    # ncu's long CSV (one row per kernel launch and metric) -> {launch id: {kernel, metrics}}.
    launches = {}
    with open(path, newline='') as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own messages start with ==
    for row in csv.DictReader(lines):
        launch = launches.setdefault(row['ID'], {'kernel': row['Kernel Name'], 'grid': row.get('Grid Size'),
                                                 'block': row.get('Block Size'), 'metrics': {}})
        value = number(row['Metric Value'])
        if value is None: continue
        unit = row.get('Metric Unit', '')
        if row['Metric Name'] == 'gpu__time_duration.sum': value *= TIME_UNITS.get(unit, 1.0)
        launch['metrics'][row['Metric Name']] = value
    return launches


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('csv', nargs='?', help="ncu --csv output")
    ap.add_argument('--json', help='write the rooflines here (default: stdout)')
    ap.add_argument('--sms', type=int, default=132, help='multiprocessors (H200: 132)')
    ap.add_argument('--log2n', type=int, default=26, help='log2 of the elements each profiled kernel covered')
    ap.add_argument('--print-metrics', action='store_true', help='print the metric list for ncu and exit')
    args = ap.parse_args()
    if args.print_metrics:
        print(','.join(METRICS))
        return 0
    if not args.csv: ap.error('the ncu CSV is required')
    names = op_names(Path(__file__).resolve().parents[2])
    kernels = []
    for launch in read_ncu(args.csv).values():
        m = KERNEL.search(launch['kernel'])
        metrics = launch['metrics']
        if not m or 'smsp__inst_executed.sum' not in metrics: continue
        clock = metrics.get('sm__cycles_elapsed.avg.per_second')
        if not clock: sys.exit(f'roofline: no SM clock for {launch["kernel"][:80]}')
        n = 1 << args.log2n
        pipes = {'issue': metrics['smsp__inst_executed.sum'], 'fp64': metrics.get('sm__inst_executed_pipe_fp64.sum', 0.0),
                 'xu': metrics.get('sm__inst_executed_pipe_xu.sum', 0.0)}
        bound_ms = {pipe: 1e3 * count / (args.sms * RATES[pipe] * clock) for pipe, count in pipes.items()}
        pipe = max(bound_ms, key=bound_ms.get)
        kernels.append({
            'op': names[int(m.group(2))], 'dtype': 'f32' if m.group(3) == 'f' else 'f64',
            'dir': 'fwd' if m.group(1) == 'ForwardFn' else 'vjp', 'log2n': args.log2n,
            'compute_ms': bound_ms[pipe], 'compute_pipe': pipe, 'pipe_ms': bound_ms,
            'warp_inst_per_element': {p: c / n for p, c in pipes.items()},
            'thread_inst_per_element': 32 * pipes['issue'] / n,
            'ncu_ms': metrics.get('gpu__time_duration.sum'), 'sm_clock_hz': clock,
            'achieved_occupancy_pct': metrics.get('sm__warps_active.avg.pct_of_peak_sustained_active'),
            'issue_active_pct': metrics.get('smsp__issue_active.avg.pct_of_peak_sustained_active'),
            'dram_bytes': metrics.get('dram__bytes_read.sum', 0.0) + metrics.get('dram__bytes_write.sum', 0.0),
            'grid': launch['grid'], 'block': launch['block']})
    if not kernels: sys.exit(f'roofline: no tapewise kernel with instruction counts in {args.csv}')
    kernels.sort(key=lambda k: (k['dtype'], names.index(k['op']), k['dir']))
    doc = {'tool': 'tools/bench/roofline.py', 'source': str(args.csv), 'sms': args.sms, 'rates_per_sm_clock': RATES,
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
