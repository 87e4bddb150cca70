"""bench/bench_cpu.py's peers compute what tapewise computes: each node's forward and hand-written
derivative, in numpy and (where torch imports) in PyTorch, agree with tapewise.cpu()'s forward and
fused VJP on small float32 inputs, and the chain's peers with tapewise's chain gradient; so the
benchmark times the same work beside each peer."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tapewise

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_cpu.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_cpu", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peers(bench):
    out = [bench.NumpyOps()]
    torch = bench.import_torch()
    if torch is not None:
        out.append(bench.TorchOps(torch))
    return out


def test_each_nodes_peer_matches_tapewise():
    bench = load_bench()
    rng = np.random.default_rng(1)
    x = rng.uniform(0.1, 8.0, 1 << 10).astype(np.float32)
    x2 = rng.uniform(0.1, 8.0, 1 << 10).astype(np.float32)
    g = rng.standard_normal(1 << 10).astype(np.float32)
    backend = tapewise.cpu(threads=1)
    for name, (forward, derivative) in bench.PEER_NODES.items():
        xs = [x, x2] if name in bench.BINARY else [x]
        value = bench.node_forward(backend, name, xs)()
        grads = bench.node_vjp(backend, name, xs, g)()
        for ops in peers(bench):
            arrays = [ops.array(v) for v in xs]
            np.testing.assert_allclose(np.asarray(forward(ops, *arrays)), value, rtol=1e-4, atol=1e-6,
                                       err_msg=f"{name} forward, {ops.name}")
            got = derivative(ops, *arrays, ops.array(g))
            got = got if isinstance(got, tuple) else (got,)
            assert len(got) == len(grads), name
            for want, peer in zip(grads, got):
                np.testing.assert_allclose(np.asarray(peer), want, rtol=1e-3, atol=1e-5,
                                           err_msg=f"{name} derivative, {ops.name}")


def test_the_chains_peers_match_tapewise():
    bench = load_bench()
    x = np.random.default_rng(2).standard_normal(1 << 8).astype(np.float32)
    want = bench.chain_tapewise(tapewise.cpu(threads=1), x, 25)()
    # Node by node instead of as tape programs: the same bits (no NaN arises here).
    np.testing.assert_array_equal(bench.chain_tapewise(tapewise.cpu(threads=1), x, 25, program_threshold=0)(), want)
    for ops in peers(bench):
        np.testing.assert_allclose(np.asarray(bench.chain_peer(ops, x, 25)()), want, rtol=1e-3, atol=1e-6,
                                   err_msg=ops.name)


def test_a_wrong_derivative_is_caught():
    # The comparison can fail: a peer whose sin derivative is the forward's is told apart.
    bench = load_bench()
    x = np.linspace(0.1, 8.0, 256, dtype=np.float32)
    g = np.ones_like(x)
    want = bench.node_vjp(tapewise.cpu(threads=1), "sin", [x], g)()[0]
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(g * np.sin(x), want, rtol=1e-3, atol=1e-5)
