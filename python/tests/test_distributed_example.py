"""examples/distributed.py, run for real: two ranks launched by torchrun on localhost (gloo, tapewise's
CPU backend; and two ranks sharing GPU 0 where CUDA is available), each run must exit 0 after rank 0
printed PASS for the gathered gradients against a one-rank run. Skips where PyTorch is not installed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tapewise

torch = pytest.importorskip("torch", reason="PyTorch is not installed (the distributed example runs where it is)")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("this PyTorch has no torch.distributed with gloo", allow_module_level=True)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distributed.py"
# Generous for a run of a few seconds: a hung rendezvous or collective fails the test instead of hanging it.
LAUNCH_TIMEOUT_S = 240


def launch_two_ranks(*example_args):
    """torchrun --standalone (localhost, a free port) with two ranks; returns the completed process."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               str(EXAMPLE), "--timeout", "120", *example_args]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: the host's name may resolve to no usable address
    return subprocess.run(command, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S, env=env)


def assert_passed(run, variant):
    report = f"exit status {run.returncode}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr[-4000:]}"
    verdicts = [line for line in run.stdout.splitlines() if line.startswith(("PASS:", "FAIL:"))]
    assert run.returncode == 0, report
    assert len(verdicts) == 1, report  # rank 0 alone prints the verdict
    assert verdicts[0].startswith(f"PASS: 2 ranks ({variant})"), report


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_two_cpu_ranks_on_gloo(dtype):
    assert_passed(launch_two_ranks("--backend", "gloo", "--dtype", dtype), "gloo")


@pytest.mark.skipif(not (torch.cuda.is_available() and tapewise.cuda_available()), reason="no CUDA device")
def test_two_ranks_sharing_one_gpu():
    assert_passed(launch_two_ranks("--backend", "shared-gpu"), "shared-gpu")
