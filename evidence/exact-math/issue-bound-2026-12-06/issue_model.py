#!/usr/bin/env python3
"""issue_model.py — an estimate of exact mode's float32 kernels on an H200 from their instruction counts.

Usage: python3 issue_model.py NCU_CSV (ncu --metrics sm__inst_executed.sum,... --csv of tapewise-bench --once at
2^26, as calls j and k ran it on an H100). An H100 SXM and an H200 have the same 132 SMs at 1,980 MHz, so a
kernel bound by instruction issue takes the same time on both; the H200 only copies faster. The model: time
= (copy^p + issue^p)^(1/p), issue = n / K0 (n instructions an element, K0 the instructions an element that
issue in the H200's copy time of a forward, 1.5 K0 for a VJP's 12 bytes an element against 8), p = 12. K0 is
fitted to four forwards of 8930a26 measured on an H200 (2026-12-06, fd4f955's kernels for log, sin and cos,
exp's four vectors) with their counts from call h (2^22, the same kernels): log 50.1 instructions at 85%, sin
49.0 at 88%, cos 49.9 at 86.75%, exp 42.9 at 94.6%. p = 12 is where the four K0 agree best (43.1-44.0); the
range printed is that spread. An estimate, not a measurement.
"""
import csv
import io
import re
import sys

OPS = {'12': 'exp', '15': 'log', '13': 'sin', '14': 'cos', '19': 'tanh', '18': 'sigmoid', '20': 'silu',
       '21': 'gelu', '22': 'softplus', '17': 'safeLog'}
CALIBRATION = {'log': (50.1, 0.85), 'sin': (49.0, 0.88), 'cos': (49.9, 0.8675), 'exp': (42.9, 0.946)}
P = 12


def kernels(path):
    lines = open(path).read().split('\n')
    header = next(k for k, line in enumerate(lines) if line.startswith('"ID"'))
    found = {}
    for row in csv.DictReader(io.StringIO('\n'.join(lines[header:]))):
        m = re.search(r'map_kernel<(ForwardFn|VjpFn)<(\d+), float>, float, (\d+), (\d+)>', row['Kernel Name'])
        if not m or m.group(2) not in OPS:
            continue
        key = (OPS[m.group(2)], 'fwd' if m.group(1) == 'ForwardFn' else 'vjp')
        found.setdefault(key, {'shape': f't{m.group(3)}v{m.group(4)}'})[row['Metric Name']] = float(
            row['Metric Value'].replace(',', ''))
    return found


def share(n, k):
    return 1 / (1 + (n / k) ** P) ** (1 / P)


def main():
    fitted = [n / ((1 / s) ** P - 1) ** (1 / P) for n, s in CALIBRATION.values()]
    k0 = sum(fitted) / len(fitted)
    print(f'K0 = {k0:.1f} instructions an element ({min(fitted):.1f}-{max(fitted):.1f}), p = {P}')
    for (op, direction), metrics in kernels(sys.argv[1]).items():
        n = metrics['sm__inst_executed.sum'] * 32 / 2**26
        scale = 1.5 if direction == 'vjp' else 1.0
        low, high = share(n, min(fitted) * scale), share(n, max(fitted) * scale)
        print(f'{op:8s} {direction} {metrics["shape"]} {n:6.1f} instructions an element, '
              f'H200 estimate {100 * share(n, k0 * scale):5.1f}% of the copy ({100 * low:.1f}-{100 * high:.1f})')


if __name__ == '__main__':
    main()
