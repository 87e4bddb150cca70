"""conform/aten_parity.py without a GPU: its libm stand-in against the CPU backend on nodes without a
libm stage (every byte must match, a test of the script's staging and of its reading of the op
table; the CPU backend's exp, log, sin, cos and tanh are exact mode's, not glibc's), and its refusal
to run when the table's aten_parity column and its stagings disagree."""

import json
import os
import subprocess
import sys

import tapewise
from conftest import conform_binary

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "conform", "aten_parity.py")
NEW = "synthetic_node"  # a row the tests add to the table: a name no node has
assert NEW not in tapewise.NODE_NAMES


def table_file(tmp_path, rows):
    path = tmp_path / "ops.json"
    path.write_text(json.dumps({"schema": "tapewise-conform.ops/1", "ops": rows}))
    return str(path)


def parity(tmp_path, ops_json, ops):
    return subprocess.run([sys.executable, SCRIPT, "--conform", conform_binary(), "--out", str(tmp_path / "out"),
                           "--lib", "libm", "--backend", "cpu", "--elements", "512", "--ops", ops,
                           "--ops-json", ops_json], capture_output=True, text=True, cwd=REPO, timeout=600)


def test_libm_stand_in_matches_the_cpu_backend_on_the_tables_nodes(tmp_path):
    # silu (ungraded: TorchLean's staging is not published) is run for its row's grading alone: its
    # exp is glibc's in the stand-in and exact mode's on the CPU backend, so its bytes may differ.
    done = parity(tmp_path, table_file(tmp_path, tapewise.op_table()), "scale,clamp,max,inv,div,silu")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    with open(tmp_path / "out" / "aten_parity.json") as f:
        report = json.load(f)
    rows = report["rows"]
    assert {r["op"] for r in rows} == {"scale", "clamp", "max", "inv", "div", "silu"}
    assert len([r for r in rows if r["op"] == "scale"]) == 2 * 2 * 2  # two run sets x dtypes x paths
    assert all(r["total"] == 0 for r in rows if r["op"] != "silu")
    assert {r["op"] for r in rows if not r["graded"]} == {"silu"}  # aten_parity ungraded


def test_refuses_a_node_whose_row_and_staging_disagree(tmp_path):
    rows = tapewise.op_table()
    new = dict(rows[-1], name=NEW, index=len(rows), aten_parity="graded")  # the script has no staging for it
    done = parity(tmp_path, table_file(tmp_path, rows + [new]), f"sin,{NEW}")
    assert done.returncode == 2 and f"{NEW} (aten_parity graded, no staging in this script)" in done.stderr
    relu = next(r for r in rows if r["name"] == "relu")
    relu["aten_parity"] = "none"  # TorchLean has no such node, says the table; but the script has a staging
    done = parity(tmp_path, table_file(tmp_path, rows), "relu")
    assert done.returncode == 2 and "relu (aten_parity none, a staging in this script)" in done.stderr


def test_a_node_torchlean_lacks_is_listed_not_compared(tmp_path):
    rows = tapewise.op_table()
    new = dict(next(r for r in rows if r["name"] == "neg"), name=NEW, index=len(rows), aten_parity="none")
    done = parity(tmp_path, table_file(tmp_path, rows + [new]), f"neg,{NEW}")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert f"not compared (TorchLean has no such node; spec/ops.def aten_parity none): {NEW}" in done.stdout
    with open(tmp_path / "out" / "aten_parity.json") as f:
        assert json.load(f)["not_compared"] == [NEW]
