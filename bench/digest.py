#!/usr/bin/env python3
# bench/digest.py JSON — the digest run_bench.sh prints last (the part a remote run's output tail
# keeps) from a tapewise-bench JSON: the 2^26 rows, every chain shape at every size beside PyTorch's
# three forms with the strongest peer named, and the summary. Formatting only.
import json
import sys


def fmt(value, spec='{:.3f}'):
    return spec.format(value) if value is not None else '-'


def strongest_peer(row, ours_key):
    # "compile 1.21x": the fastest peer and its time over ours (below 1x it wins); '-' without peers.
    peer = row.get('peer')
    if not peer: return '-'
    ms = peer.get('ms', peer.get('us_per_node'))
    ratio = ms / row[ours_key]
    return f"{peer['name']} {ratio:.2f}x" + (' WINS' if ratio < 1 else '')


def kernel_lines(prod):
    yield f"{'op':9s} {'dt':3s} {'dir':4s} {'ms':>8s} {'%copy':>6s} {'%roof':>6s} {'eager':>6s} {'strongest peer':>22s} verdict"
    for r in prod['rows']:
        if r['log2n'] != 26 or r['dir'] == 'staged': continue
        ratio = f"{r['ratio']:.2f}x" if r.get('ratio') else '-'
        yield (f"{r['op']:9s} {r['dtype']:3s} {r['dir']:4s} {r['ms']:8.4f} {100 * r['frac_copy']:5.1f}% "
               f"{100 * r['frac_roofline']:5.1f}% {ratio:>6s} {strongest_peer(r, 'ms'):>22s} {r['verdict']}")


def chain_lines(chains):
    # Each shape's block: ours (host clock, and device time where gated) beside eager, CUDA graph and
    # torch.compile, us per node, and the strongest of the three over ours.
    shape = None
    for c in chains:
        if c.get('shape', 'unary') != shape:
            shape = c.get('shape', 'unary')
            leaves = c.get('leaves', 1)
            yield f"chain {shape}: {c['nodes']} nodes, {leaves} {'leaf' if leaves == 1 else 'leaves'} [{c['ops']}], us per node"
            yield (f"  {'n':6s} {'tapewise':>8s} {'device':>8s} | {'eager':>8s} {'graph':>8s} {'compile':>8s} | "
                   f"{'strongest peer':20s} verdict")
        yield (f"  2^{c['log2n']:<4d} {c['us_per_node']:8.3f} {fmt(c['device_us_per_node']):>8s} | "
               f"{fmt(c['eager_us_per_node'], '{:.2f}'):>8s} {fmt(c['graph_us_per_node'], '{:.2f}'):>8s} "
               f"{fmt(c['compile_us_per_node']):>8s} | {strongest_peer(c, 'us_per_node'):20s} {c['verdict']}")


def digest(prod):
    m = prod['meta']
    roof = prod['copy'].get('roofline_1GiB')
    yield (f"\n== digest: {m['gpu']} | {m['date']} | commit {m['commit']} | copy roofline "
           + (f"{roof['gbps']:.0f} GB/s" if roof else 'not measured'))
    if any(r['log2n'] == 26 for r in prod['rows']): yield from kernel_lines(prod)
    yield from chain_lines(prod.get('chain', []))
    s = prod['summary']
    yield f"summary: {s['pass']} PASS, {s['miss']} MISS of {s['judged']}; check failures: {len(s['check_failures'])}"
    for line in s['misses'] + ['peer wins: ' + w for w in s['peer_wins']] + s['check_failures']:
        yield '    ' + line


def main():
    if len(sys.argv) != 2: sys.exit('usage: bench/digest.py TAPEWISE_BENCH_JSON')
    try:
        with open(sys.argv[1]) as f: prod = json.load(f)
    except (OSError, ValueError) as ex:
        sys.exit(f'digest: no tapewise JSON ({ex})')
    for line in digest(prod): print(line)


if __name__ == '__main__':
    main()
