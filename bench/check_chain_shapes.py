#!/usr/bin/env python3
# bench/check_chain_shapes.py --bench TAPEWISE_BENCH [--torch] [--backend cuda] — the chain
# benchmark's graph shapes, checked: tapewise-bench (--backend cpu; cuda on a GPU machine) at 2^6 elements
# and 20 nodes (every shape's JSON row sane; each recording's output and leaf gradients equal to this
# file's own transcription of the shape's math; a per-node tape's equal to the program's bit for bit;
# PyTorch's numbers attached and the strongest peer named, in the report and in digest.py). --torch:
# bench_torch.py's shapes (chain_graph) against the same recordings, its compiled forms against its eager
# ones, and a --device cpu run read back by tapewise-bench; exits 77 (ctest's skip) where torch does not
# import.
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = ('unary', 'binary', 'fanout')
LOG2N, NODES = 6, 20
TAPE_NODES = {'unary': 20, 'binary': 20, 'fanout': 18}  # fanout: whole cycles of six
LEAVES = {'unary': 1, 'binary': 21, 'fanout': 1}
BENCH = None  # set from --bench
BACKEND = 'cpu'  # --backend cuda: the same checks of the CUDA backend, on a GPU machine


def run_bench(out_dir, name, *extra):
    # tapewise-bench on the CPU backend, the chain alone at the tiny size; returns (json, values, stdout).
    json_path, values_path = os.path.join(out_dir, name + '.json'), os.path.join(out_dir, name + '_values.json')
    done = subprocess.run([BENCH, '--backend', BACKEND, '--no-kernels', '--chain-sizes', str(LOG2N), '--chain-nodes',
                           str(NODES), '--json', json_path, '--chain-values', values_path, *extra],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f'tapewise-bench {" ".join(extra)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}')
    with open(json_path) as f: doc = json.load(f)
    with open(values_path) as f: values = json.load(f)
    return doc, {c['shape']: c for c in values['chains']}, done.stdout


# --- the shapes' math, transcribed from the issue's words (not from chain.cpp or bench_torch.py) -----------
# Forward in float32, one rounding per node as the spec's nodes round; backward in float64 from those
# values, so a node recorded wrong (another op, order or operand) moves the result far past the tolerance.

def f32(v):
    return struct.unpack('f', struct.pack('f', v))[0]


def sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v))


def unary_reference(x):
    # sin, tanh, sigmoid, scale 0.9, relu repeated; returns (output, d output / d x).
    c = f32(0.9)
    steps = [(lambda v: math.sin(v), lambda v, y: math.cos(v)),
             (lambda v: math.tanh(v), lambda v, y: 1.0 - math.tanh(v) ** 2),
             (lambda v: sigmoid(v), lambda v, y: sigmoid(v) * (1.0 - sigmoid(v))),
             (lambda v: c * v, lambda v, y: c),
             (lambda v: max(v, 0.0), lambda v, y: 1.0 if v > 0 else 0.0)]
    h, slopes = x, []
    for i in range(NODES):
        fwd, slope = steps[i % 5]
        y = f32(fwd(h))
        slopes.append(slope(h, y))
        h = y
    return h, [math.prod(slopes)]


def binary_reference(leaves):
    # node i: mul, add, max, sub (repeated) of h and leaf i + 1; returns (output, gradient of every leaf).
    h, record = leaves[0], []
    for i in range(NODES):
        b = leaves[i + 1]
        op = i % 4
        y = f32(h * b if op == 0 else h + b if op == 1 else max(h, b) if op == 2 else h - b)
        record.append((op, h, b))
        h = y
    g, grads = 1.0, [0.0] * len(leaves)
    for i in reversed(range(NODES)):
        op, a, b = record[i]
        da, db = {0: (b, a), 1: (1.0, 1.0), 2: (1.0, 0.0) if a > b else (0.0, 1.0), 3: (1.0, -1.0)}[op]
        grads[i + 1] = g * db
        g *= da
    grads[0] = g
    return h, grads


def fanout_reference(x):
    # h -> sin, tanh, sigmoid -> (sin + tanh) + sigmoid -> scale 0.5, three cycles; (output, d output / d x).
    h, slope = x, 1.0
    for _ in range(NODES // 6):
        s, t, g = f32(math.sin(h)), f32(math.tanh(h)), f32(sigmoid(h))
        y = f32(0.5 * f32(f32(s + t) + g))
        slope *= 0.5 * (math.cos(h) + (1.0 - math.tanh(h) ** 2) + sigmoid(h) * (1.0 - sigmoid(h)))
        h = y
    return h, [slope]


def reference(shape, leaves, i):
    # Element i of the shape's output and of each leaf's gradient, from the leaves' element i.
    if shape == 'binary': return binary_reference([leaf[i] for leaf in leaves])
    return (unary_reference if shape == 'unary' else fanout_reference)(leaves[0][i])


def close(got, want, scale):
    # float32 roundings over 20 nodes: well inside 1e-4 of the quantity's size.
    return got is not None and math.isfinite(got) and abs(got - want) <= 1e-4 * max(abs(want), scale, 1e-30)


class Checks(unittest.TestCase):
    def assert_close(self, what, got, want):
        # Element by element, within 1e-4 of the larger of the value and a thousandth of the list's largest.
        scale = 1e-3 * max(abs(w) for w in want)
        bad = [i for i, (g, w) in enumerate(zip(got, want)) if not close(g, w, scale)]
        self.assertEqual(len(got), len(want), what)
        if bad:
            self.fail(f'{what} differs at elements {bad[:5]}: got {[got[i] for i in bad[:3]]}, '
                      f'want {[want[i] for i in bad[:3]]}')

    def assert_matches(self, what, got, want):
        # got, want: (output, [each leaf's gradient]), each a list of elements.
        self.assert_close(f'{what}: output', got[0], want[0])
        self.assertEqual(len(got[1]), len(want[1]), f'{what}: leaves')
        for k, (g, w) in enumerate(zip(got[1], want[1])):
            self.assert_close(f'{what}: leaf {k} gradient', g, w)

    def reference_of(self, shape, values):
        # The math's (output, [each leaf's gradient]) from the recording's leaves.
        leaves = values['leaves']
        per_element = [reference(shape, leaves, i) for i in range(len(values['output']))]
        return ([out for out, _ in per_element], [[grads[k] for _, grads in per_element] for k in range(len(leaves))])


def bfloat16_representable(v):
    # A float32 whose low 16 bits are zero: a bfloat16 value (every bfloat16 widens exactly so).
    return v is None or (struct.unpack('<I', struct.pack('<f', v))[0] & 0xffff) == 0


class Bfloat16Chain(unittest.TestCase):
    # --chain-dtype bf16: every value and gradient a bfloat16, the per-node tape the program's bits,
    # and not the float32 chain's values (the dtype reached the nodes).
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.doc, cls.values, _ = run_bench(cls.tmp.name, 'bf16', '--chain-dtype', 'bf16')
        _, cls.per_node, _ = run_bench(cls.tmp.name, 'bf16_per_node', '--chain-dtype', 'bf16', '--program-threshold', '0')
        _, cls.f32, _ = run_bench(cls.tmp.name, 'f32')

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_rows_say_bfloat16(self):
        self.assertEqual({r['dtype'] for r in self.doc['chain']}, {'bf16'})
        self.assertEqual(self.doc['meta']['chain_dtype'], 'bf16')

    def test_every_value_is_a_bfloat16(self):
        for shape in SHAPES:
            v = self.values[shape]
            numbers = [x for leaf in v['leaves'] for x in leaf] + v['output'] + [x for g in v['gradients'] if g for x in g]
            self.assertTrue(numbers and all(bfloat16_representable(x) for x in numbers), shape)
            self.assertNotEqual(v['output'], self.f32[shape]['output'], f'{shape}: the bf16 chain gave float32 values')

    def test_a_per_node_tape_gives_the_programs_bits(self):
        for shape in SHAPES:
            self.assertEqual(self.per_node[shape], self.values[shape], f'{shape}: per-node tape != program (bf16)')


class TapewiseBench(Checks):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.doc, cls.values, cls.stdout = run_bench(cls.tmp.name, 'leaf')
        _, cls.per_node, _ = run_bench(cls.tmp.name, 'per_node', '--program-threshold', '0')
        _, cls.every, _ = run_bench(cls.tmp.name, 'every', '--chain-gradients', 'all')
        # As programs (on the CPU too), flushed every 3 nodes while recording, the rest left for the backward.
        _, cls.few_pending, _ = run_bench(cls.tmp.name, 'few_pending', '--program-threshold', str(2 ** LOG2N),
                                          '--max-pending-nodes', '3')

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_every_shape_has_a_sane_row(self):
        rows = {r['shape']: r for r in self.doc['chain']}
        self.assertEqual(sorted(rows), sorted(SHAPES))
        for shape, r in rows.items():
            self.assertEqual((r['nodes'], r['leaves'], r['log2n']), (TAPE_NODES[shape], LEAVES[shape], LOG2N), shape)
            for key in ('us_per_node', 'record_host_us_per_node', 'backward_host_us_per_node', 'teardown_host_us_per_node'):
                self.assertTrue(math.isfinite(r[key]) and r[key] > 0, f'{shape} {key} = {r[key]}')
            device = r['device_us_per_node']
            if BACKEND == 'cpu': self.assertIsNone(device, 'the CPU backend has no gated device time')
            else: self.assertTrue(device is not None and math.isfinite(device) and device > 0, f'{shape} device {device}')
        self.assertEqual(self.doc['meta']['chain_shapes'], list(SHAPES))

    def test_recordings_match_the_shapes_math(self):
        for shape in SHAPES:
            with self.subTest(shape=shape):
                v = self.values[shape]
                self.assertEqual((v['nodes'], len(v['leaves']), len(v['output'])), (TAPE_NODES[shape], LEAVES[shape], 64))
                self.assert_matches(f'tapewise {shape}', (v['output'], v['gradients']), self.reference_of(shape, v))

    def test_a_per_node_tape_gives_the_programs_bits(self):
        for shape in SHAPES:
            self.assertEqual(self.per_node[shape], self.values[shape], f'{shape}: per-node tape != program')

    def test_few_pending_nodes_give_the_same_recording(self):
        for shape in SHAPES:
            self.assertEqual(self.few_pending[shape], self.values[shape], f'{shape}: --max-pending-nodes 3 changed it')

    def test_every_gradient_keeps_the_leaves_gradients(self):
        for shape in SHAPES:
            self.assertEqual(self.every[shape], self.values[shape], f'{shape}: --chain-gradients all changed the leaves')

    def test_chain_calls_give_the_median_block_and_every_blocks_time(self):
        for r in self.doc['chain']:
            self.assertEqual((r['calls'], r['us_per_node_calls']), (1, [r['us_per_node']]), r['shape'])
        doc, values, stdout = run_bench(self.tmp.name, 'calls', '--chain-calls', '3')
        self.assertEqual(doc['meta']['chain_calls'], 3)
        for r in doc['chain']:
            blocks = r['us_per_node_calls']
            self.assertEqual((r['calls'], len(blocks)), (3, 3), r['shape'])
            self.assertTrue(all(math.isfinite(b) and b > 0 for b in blocks), f"{r['shape']}: {blocks}")
            self.assertEqual(r['us_per_node'], sorted(blocks)[1], f"{r['shape']}: the median block")
        self.assertEqual(stdout.count('over 3 blocks'), len(SHAPES))
        self.assertEqual(values, self.values, 'more timed blocks change no recording')

    def test_a_bad_count_is_refused_naming_the_option(self):
        common = ('0', '-1', '1.5', 'abc', '', '99999999999999999999', 'nan')
        for option, bads in (('--chain-calls', common + ('101',)), ('--max-pending-nodes', common + ('65537', '1e3'))):
            for bad in bads:
                with self.subTest(option=option, bad=bad):
                    json_path = os.path.join(self.tmp.name, 'refused.json')
                    done = subprocess.run([BENCH, '--backend', BACKEND, '--no-kernels', '--chain-sizes', str(LOG2N),
                                           option, bad, '--json', json_path], capture_output=True, text=True, timeout=60)
                    self.assertNotEqual(done.returncode, 0)
                    self.assertIn(option, done.stdout + done.stderr)
                    self.assertFalse(os.path.exists(json_path), 'nothing written')

    def test_peers_attached_and_the_strongest_named(self):
        # A PyTorch file of the new form for binary and fanout (fanout's node count wrong on purpose: not
        # compared), and the older form (the unary chain under "chain") for unary.
        torch_doc = {'meta': {'torch': 'test', 'gpu': 'cpu'},
                     'chain': {'nodes': NODES, 'sizes': {str(LOG2N): {'eager_us_per_node': 1e3, 'graph_us_per_node': 2e3}}},
                     'chain_shapes': {
                         'binary': {'nodes': NODES, 'sizes': {str(LOG2N): {
                             'eager_us_per_node': 1e3, 'graph_us_per_node': 1e-3, 'compile_us_per_node': 5.0}}},
                         'fanout': {'nodes': NODES, 'sizes': {str(LOG2N): {'eager_us_per_node': 1e3}}}}}
        torch_path = os.path.join(self.tmp.name, 'torch.json')
        with open(torch_path, 'w') as f: json.dump(torch_doc, f)
        doc, _, stdout = run_bench(self.tmp.name, 'peers', '--torch', torch_path)
        rows = {r['shape']: r for r in doc['chain']}
        self.assertEqual(rows['unary']['peer']['name'], 'eager')
        self.assertAlmostEqual(rows['unary']['speedup_over_peer'], 1e3 / rows['unary']['us_per_node'])
        self.assertEqual(rows['binary']['peer'], {'name': 'graph', 'us_per_node': 1e-3})
        self.assertIsNone(rows['fanout']['peer'])
        self.assertIn("PyTorch's fanout chain has 20 nodes, this one 18: not compared", stdout)
        self.assertIn('chain binary 2^6: graph', ' '.join(doc['summary']['peer_wins']))
        digest = subprocess.run([sys.executable, os.path.join(HERE, 'digest.py'), os.path.join(self.tmp.name, 'peers.json')],
                                capture_output=True, text=True, check=True).stdout
        for shape, named in (('unary', 'eager'), ('binary', 'graph'), ('fanout', '-')):
            block = digest.split(f'chain {shape}:')[1].split('chain ')[0]
            line = next(l for l in block.splitlines() if l.strip().startswith(f'2^{LOG2N}'))
            self.assertIn(f'| {named}', line, f'digest, {shape}: {line}')
        self.assertIn('WINS', digest.split('chain binary:')[1].split('chain fanout:')[0])


class TorchShapes(Checks):
    @classmethod
    def setUpClass(cls):
        import torch
        sys.path.insert(0, HERE)
        import bench_torch
        cls.torch, cls.bench_torch = torch, bench_torch
        cls.tmp = tempfile.TemporaryDirectory()
        _, cls.values, _ = run_bench(cls.tmp.name, 'leaf')

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def torch_run(self, shape, values, compiled=False):
        # bench_torch.py's forward of the shape on the recording's leaves; (output, leaf gradients) as lists.
        torch = self.torch
        forward, fresh, nodes, _ = self.bench_torch.chain_graph(torch, shape, NODES)
        self.assertEqual((nodes, 1 + fresh), (values['nodes'], len(values['leaves'])), shape)
        leaves = [torch.tensor(v, dtype=torch.float32, requires_grad=True) for v in values['leaves']]
        fn = torch.compile(forward) if compiled else forward
        out = fn(*leaves)
        grads = torch.autograd.grad(out, leaves, torch.ones_like(out))
        return out.tolist(), [g.tolist() for g in grads]

    def test_torch_shapes_match_the_recordings_and_the_math(self):
        for shape in SHAPES:
            with self.subTest(shape=shape):
                v = self.values[shape]
                got = self.torch_run(shape, v)
                self.assert_matches(f'torch {shape} against tapewise', got, (v['output'], v['gradients']))
                self.assert_matches(f'torch {shape} against the math', got, self.reference_of(shape, v))

    def test_compiled_shapes_match_eager(self):
        for shape in SHAPES:
            with self.subTest(shape=shape):
                v = self.values[shape]
                self.assert_matches(f'torch.compile {shape}', self.torch_run(shape, v, compiled=True),
                                    self.torch_run(shape, v))

    def test_a_cpu_run_is_read_back_by_tapewise_bench(self):
        torch_path = os.path.join(self.tmp.name, 'torch.json')
        subprocess.run([sys.executable, os.path.join(HERE, 'bench_torch.py'), '--device', 'cpu', '--no-compile',
                        '--sizes', '', '--chain-sizes', str(LOG2N), '--chain-nodes', str(NODES), '--json', torch_path],
                       check=True, capture_output=True, text=True, timeout=300)
        with open(torch_path) as f: chains = json.load(f)['chain_shapes']
        self.assertEqual(sorted(chains), sorted(SHAPES))
        doc, _, _ = run_bench(self.tmp.name, 'with_torch', '--torch', torch_path)
        for r in doc['chain']:
            eager = chains[r['shape']]['sizes'][str(LOG2N)]['eager_us_per_node']
            self.assertTrue(math.isfinite(eager) and eager > 0)
            self.assertEqual(r['peer'], {'name': 'eager', 'us_per_node': eager}, r['shape'])


def main():
    global BENCH, BACKEND
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--bench', required=True, help='the tapewise-bench binary')
    ap.add_argument('--torch', action='store_true', help="bench_torch.py's shapes (exit 77 without torch)")
    ap.add_argument('--backend', choices=('cpu', 'cuda'), default='cpu', help="tapewise-bench's backend (cuda: on a GPU)")
    args = ap.parse_args()
    BENCH, BACKEND = args.bench, args.backend
    if args.torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            print('check_chain_shapes: torch does not import here: skipped')
            return 77
    loader = unittest.defaultTestLoader
    suite = (loader.loadTestsFromTestCase(TorchShapes) if args.torch else
             unittest.TestSuite([loader.loadTestsFromTestCase(TapewiseBench), loader.loadTestsFromTestCase(Bfloat16Chain)]))
    return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1


if __name__ == '__main__':
    sys.exit(main())
