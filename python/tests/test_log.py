"""TAPEWISE_LOG (docs/environment.md): off by default, silent; at info and debug, stderr names the path each
backward ran (one tape program or node by node), the backend made, and at debug each flush and each node
run at once; an unknown value is said once and leaves logging off."""

import os
import subprocess
import sys

import pytest

SCRIPT = """
import numpy as np, tapewise
tape = tapewise.Tape(tapewise.cpu())
x = tape.leaf(np.linspace(-1.0, 1.0, 8))
y = tape.sin(tape.exp(x))
tape.backward(y)                      # 8 elements: one tape program
tape.backward(y, path="staged")       # the spec's stages: node by node
tape.program_threshold = 4
z = tape.tanh(y)                      # above the threshold: run at once
tape.backward(z)                      # node by node, fused
print("done")
"""


def run(level):
    env = {k: v for k, v in os.environ.items() if k != "TAPEWISE_LOG"}
    if level is not None:
        env["TAPEWISE_LOG"] = level
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr
    return proc.stderr.splitlines()


@pytest.mark.parametrize("level", [None, "", "off", "0"])
def test_off_by_default_and_silent(level):
    assert run(level) == []


def test_info_names_the_path_each_backward_ran():
    lines = run("info")
    assert all(line.startswith("tapewise[info] ") for line in lines), lines
    assert any(line.startswith("tapewise[info] backend: CPU") for line in lines), lines
    backwards = [line for line in lines if ": backward from #" in line]
    assert len(backwards) == 3, lines
    assert "2 VJPs as one program (fused; 8 elements, program_threshold 16)" in backwards[0]
    assert "2 VJPs node by node (staged; 8 elements" in backwards[1]
    assert "3 VJPs node by node (fused; 8 elements, program_threshold 4)" in backwards[2]


def test_debug_adds_flushes_and_nodes_run_at_once():
    lines = run("DEBUG")
    assert any("flush for a backward: 2 pending nodes run as one program, 0 of them left pending" in line
               for line in lines), lines
    assert any("tanh #3 runs node by node, now: 8 elements, above program_threshold 4" in line for line in lines), lines
    assert any(line.startswith("tapewise[info] ") for line in lines)


def test_an_unknown_level_is_said_once_and_logging_stays_off():
    lines = run("verbose")
    assert lines == ["tapewise: TAPEWISE_LOG=verbose is not one of off, error, warn, info, debug: logging stays off"]
