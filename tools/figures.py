#!/usr/bin/env python3
"""tools/figures.py — every figure and every generated numbers table of the documentation, from the
committed measurements in evidence/ (one command: `python3 tools/figures.py`).

Figures (matplotlib, SVG, deterministic: fixed svg.hashsalt, no date, text kept as text) go to
docs/figures/; tables are written between `<!-- figures.py: NAME -->` and `<!-- figures.py: end NAME -->`
in docs/*.md (TABLES names each one's document). docs/figures/manifest.json records, per figure, the
SHA-256 of its source JSON files, of this script and of the SVG written.

`--check` (no matplotlib needed; a ctest test runs it) fails, naming what is stale and the command
that regenerates it, when a figure's sources or this script changed since it was drawn, when a figure
file differs from the one recorded, or when a table in the documents differs from what its JSON gives.

Exit status: 0 done (or, with --check, everything fresh); 1 with --check, something is stale; 2 an
input cannot be used: a file is missing or unreadable, or a measurement a figure or table needs is
NaN, infinite or null (the benchmark's JSON writer stores NaN as null). Nothing is written then: a
missing measurement is never drawn as a gap or printed as "-", nor a conclusion drawn without it.
"""
import argparse
import hashlib
import json
import math
import re
import sys
from pathlib import Path

REGENERATE = "python3 tools/figures.py"
MANIFEST = "docs/figures/manifest.json"

# The committed measurements each figure and table is drawn from (paths from the repository root).
# The chain's final run: tapewise-bench, all three shapes, with PyTorch's eager and CUDA-graph times of
# the same call attached to each row (bench/run_bench.sh's pairing).
CHAIN = "evidence/performance/chain/bench_chain_1.json"
# Every call of the current chain code (commit 0f0a908, 2026-12-04): the spread of the host's share
# between calls is wider than a call's own, so tables and figures give the median over these calls and
# their range, not one call's (the first call was also the fastest at 2^12). spread/ has the unary
# chain at 2^12 and 2^16 only, without peers.
CHAIN_CALLS = [CHAIN, "evidence/performance/chain/bench_chain_2.json",
               *(f"evidence/performance/chain/spread/bench_unary_{k}.json" for k in range(3, 8))]
# torch.compile takes 70-210 s to compile one shape at one size, so no one call holds all twelve: each
# of these calls compiled some, and timed tapewise beside them (its row's us_per_node).
CHAIN_COMPILED = [
    "evidence/performance/chain/compile/unary_all_sizes.json",     # unary, every size
    "evidence/performance/chain/compile/binary_fanout_2e12.json",  # binary and fanout, 2^12
    "evidence/performance/chain/compile/binary_fanout_2e16.json",  # 2^16
    "evidence/performance/chain/compile/binary_fanout_2e18.json",  # 2^18
    "evidence/performance/chain/compile/binary_fanout_2e20.json",  # 2^20
]
KERNELS = "evidence/performance/kernels/bench.json"      # per-node kernels at 2^26, with rooflines
ROOFLINE = "evidence/performance/kernels/roofline.json"  # which pipe bounds a compute-bound kernel
SWEEPS = {
    "float32, every bit pattern (unary)": "evidence/accuracy/tables/sweep_unary_f32.json",
    "float32, 2^32 exponent pairs (binary)": "evidence/accuracy/tables/sweep_binary_f32.json",
    "float64, 2^32 random cases": "evidence/accuracy/tables/sweep_f64.json",
    "bfloat16 and float16, every input (pair)": "evidence/accuracy/sweep/sweep_16bit.json",
}
SWEEP_16BIT = SWEEPS["bfloat16 and float16, every input (pair)"]
# Error against input needs the sweep's per-binade maxima, which the H200 sweeps above predate: the
# H200's exhaustive float32 unary sweep of 2026-12-02 (every bit pattern, CUDA's libdevice) has them.
BINADES = "evidence/accuracy/binades/sweep_unary_f32.json"
PEERS = [("compile", "torch.compile"), ("graph", "CUDA graph"), ("eager", "PyTorch eager")]
# Every JSON this script reads, for whatever copies its inputs (python/tests/test_figures.py).
ALL_SOURCES = {*CHAIN_CALLS, *CHAIN_COMPILED, KERNELS, ROOFLINE, *SWEEPS.values(), BINADES}


class InputError(Exception):
    """An input that cannot be used (exit status 2): the message names the file and the measurement."""


class Measured(dict):
    """A JSON object of a source file: `row[key]` is a measurement and must be a finite number or other
    value (NaN and null raise InputError naming it); `row.get(key)` is for what may be absent or null."""

    def __init__(self, items, where: str):
        super().__init__(items)
        self.where = where

    def __getitem__(self, key):
        value = super().__getitem__(key) if key in self else None
        if value is None:
            raise InputError(f"{self.where}.{key} is {'null' if key in self else 'missing'}: a measurement that a "
                             "figure or table needs is not there (a NaN the benchmark wrote as null?); "
                             "figures.py draws and concludes nothing without it")
        return value


def measured(value, where: str):
    """The parsed JSON with every object a Measured, refusing non-finite numbers by where they are."""
    if isinstance(value, dict):
        return Measured({k: measured(v, f"{where}.{k}") for k, v in value.items()}, where)
    if isinstance(value, list):
        return [measured(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{where} is {value}: a measurement is not a finite number; figures.py draws and "
                         "concludes nothing from it")
    return value


def read_input(root: Path, path: str) -> bytes:
    try:
        return (root / path).read_bytes()
    except OSError as error:
        raise InputError(f"cannot read {path} under {root}: {error.strerror or error}") from None


def load(root: Path, path: str):
    try:
        data = json.loads(read_input(root, path))
    except ValueError as error:
        raise InputError(f"{path} is not valid JSON: {error}") from None
    return measured(data, path)


def sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None


def g3(x) -> str:
    """Three significant digits, as the sweep's own text tables print them."""
    return "-" if x is None else f"{x:.3g}"


# --- the chain: µs per node against tensor size ---------------------------------------------------

def compiled_rows(root: Path) -> dict:
    """{(shape, log2n): (the row of the call that compiled it, that call's file)}."""
    rows = {}
    for source in CHAIN_COMPILED:
        for row in load(root, source)["chain"]:
            row["compile_us_per_node"], row["compile_first_call_s"]  # each of these calls compiled every row
            rows[(row.get("shape", "unary"), row["log2n"])] = (row, source)
    return rows


def chain_rows(root: Path, shape: str = "unary"):
    """(log2 n, tapewise row, peers) per size of one shape: eager and the CUDA graph from the same call,
    torch.compile (with the tapewise time of its own call, compile_call_us) from CHAIN_COMPILED."""
    compiled = compiled_rows(root)
    rows = sorted((row for row in load(root, CHAIN)["chain"] if row.get("shape", "unary") == shape),
                  key=lambda row: row["log2n"])
    result = []
    for row in rows:
        peers = {f"{name}_us_per_node": row[f"{name}_us_per_node"] for name in ("eager", "graph")}
        peers.update(compile_us_per_node=None, compile_first_call_s=None, compile_call_us=None)  # not compiled
        if (shape, row["log2n"]) in compiled:
            other, _ = compiled[(shape, row["log2n"])]
            peers.update(compile_us_per_node=other["compile_us_per_node"],
                         compile_first_call_s=other["compile_first_call_s"], compile_call_us=other["us_per_node"])
        result.append((row["log2n"], row, peers))
    return result


def median(values: list) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def chain_spread(root: Path, shape: str) -> list:
    """Per size of one shape, over CHAIN_CALLS: (log2 n, {measure: [one value per call that has it]}) for
    tapewise's and its device time, eager's and the CUDA graph's µs per node."""
    keys = ("us_per_node", "device_us_per_node", "eager_us_per_node", "graph_us_per_node")
    by_size = {}
    for source in CHAIN_CALLS:
        call = load(root, source)
        # A call given PyTorch's times (meta.torch_json) has peers in every row; the spread/ calls ran
        # tapewise alone, and their null peers are not measured, not NaN.
        measured_keys = keys if call["meta"].get("torch_json") else keys[:2]
        for row in call["chain"]:
            if row.get("shape", "unary") != shape:
                continue
            values = by_size.setdefault(row["log2n"], {key: [] for key in keys})
            for key in measured_keys:
                values[key].append(row[key])
    return sorted(by_size.items())


def spread_text(values: list) -> str:
    """"median (min–max, N calls)", or the one value."""
    if len(values) == 1:
        return f"{s3(values[0])} (1 call)"
    return f"{s3(median(values))} ({s3(min(values))}–{s3(max(values))}, {len(values)} calls)"


def peer_us(peers: dict, name: str):
    """A peer's µs per node, None where the run did not measure it (torch.compile of some shapes)."""
    return peers.get(f"{name}_us_per_node")


def strongest_peer_text(us: float, peers: dict) -> str:
    name, label = min((p for p in PEERS if peer_us(peers, p[0]) is not None), key=lambda p: peer_us(peers, p[0]))
    best = peer_us(peers, name)
    if abs(best / us - 1) < 0.02:
        return f"{label}, level ({us / best:.2f}×)"
    if us < best:
        return f"tapewise, {best / us:.2f}× ahead of {label}"
    text = f"{label}, {us / best:.2f}× faster"
    compiled = peer_us(peers, "compile")
    if name != "compile" and compiled is not None and us < compiled:
        text += f"; tapewise {compiled / us:.2f}× ahead of torch.compile"
    return text


def s3(x: float) -> str:
    """Three significant digits with trailing zeros kept (0.670, 7.70), as the tables print times."""
    return f"{x:#.3g}"


def first_call_text(seconds: float) -> str:
    # Under a second the call reused a graph compiled at a smaller size (dynamic shapes).
    return f"{seconds:.0f} s" if seconds >= 1 else f"graph reused, {seconds:.3f} s"


def compile_text(peers: dict) -> str:
    if peers["compile_us_per_node"] is None:
        return "-"
    return (f"{s3(peers['compile_us_per_node'])} ({first_call_text(peers['compile_first_call_s'])}; "
            f"tapewise {s3(peers['compile_call_us'])} in that call)")


def table_chain_summary(root: Path) -> str:
    lines = ["| shape | elements | tapewise: median (range, calls) | torch.compile | CUDA graph | eager |",
             "|---|---|---|---|---|---|"]
    compiled = compiled_rows(root)
    for shape in ("unary", "binary", "fanout"):
        for k, values in chain_spread(root, shape):
            compile_row = compiled.get((shape, k), ({}, None))[0]
            peers = [compile_row["compile_us_per_node"] if compile_row else None,
                     median(values["graph_us_per_node"]), median(values["eager_us_per_node"])]
            ours = median(values["us_per_node"])
            best = min([ours] + [v for v in peers if v is not None])
            cells = [f"**{spread_text(values['us_per_node'])}**" if ours == best else spread_text(values["us_per_node"])]
            cells += ["-" if v is None else f"**{s3(v)}**" if v == best else s3(v) for v in peers]
            lines.append(f"| {shape} | 2^{k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table_chain(root: Path) -> str:
    lines = ["| elements | tapewise | host: record / backward / teardown | device | PyTorch eager | CUDA graph | "
             "torch.compile (first call; tapewise in its call) | strongest peer |", "|---|---|---|---|---|---|---|---|"]
    for k, ours, peers in chain_rows(root):
        host = " / ".join(f"{ours[f'{part}_host_us_per_node']:.3g}" for part in ("record", "backward", "teardown"))
        lines.append(f"| 2^{k} | {s3(ours['us_per_node'])} | {host} | {s3(ours['device_us_per_node'])} | "
                     f"{s3(peers['eager_us_per_node'])} | {s3(peers['graph_us_per_node'])} | {compile_text(peers)} | "
                     f"{strongest_peer_text(ours['us_per_node'], peers)} |")
    return "\n".join(lines)


def table_chain_shapes(root: Path) -> str:
    lines = ["| shape | elements | tapewise | device | PyTorch eager | CUDA graph | "
             "torch.compile (first call; tapewise in its call) | strongest peer |", "|---|---|---|---|---|---|---|---|"]
    for shape in ("binary", "fanout"):
        for k, ours, peers in chain_rows(root, shape):
            leaves = f"{ours['leaves']} leaf" if ours["leaves"] == 1 else f"{ours['leaves']} leaves"
            lines.append(f"| {shape} ({ours['nodes']} nodes, {leaves}) | 2^{k} | {s3(ours['us_per_node'])} | "
                         f"{s3(ours['device_us_per_node'])} | {s3(peers['eager_us_per_node'])} | "
                         f"{s3(peers['graph_us_per_node'])} | {compile_text(peers)} | "
                         f"{strongest_peer_text(ours['us_per_node'], peers)} |")
    return "\n".join(lines)


def figure_chain(root: Path, plt) -> "Figure":
    """The three shapes side by side: tapewise's median over CHAIN_CALLS with its range (bars), its
    device time, and the peers (eager and CUDA graph: medians of the same calls; torch.compile: its
    own calls)."""
    compiled = compiled_rows(root)
    shapes = ("unary", "binary", "fanout")
    fig, axes = plt.subplots(1, 3, figsize=(11, 4.2), sharey=True)
    for ax, shape in zip(axes, shapes):
        spread = chain_spread(root, shape)
        sizes = [2 ** k for k, _ in spread]
        ours = [v["us_per_node"] for _, v in spread]
        middle = [median(v) for v in ours]
        ax.errorbar(sizes, middle, yerr=[[m - min(v) for m, v in zip(middle, ours)],
                                         [max(v) - m for m, v in zip(middle, ours)]],
                    fmt="o-", color="C3", lw=2.2, capsize=3, label="tapewise (median; bars: fastest–slowest call)")
        ax.plot(sizes, [median(v["device_us_per_node"]) for _, v in spread], "o:", color="C3", alpha=0.6,
                label="tapewise, device time only\n(the floor under its host work)")
        for (name, label), color in zip(PEERS, ("C0", "C2", "C7")):
            if name == "compile":
                times = [compiled[(shape, k)][0]["compile_us_per_node"] if (shape, k) in compiled else None
                         for k, _ in spread]
                label += " (compiled in other calls)"
            else:
                times = [median(v[f"{name}_us_per_node"]) for _, v in spread]
            ax.plot(sizes, times, "s--", color=color, label=label)
        calls = sorted({len(v) for v in ours})
        ax.set_title(f"{shape} ({'–'.join(map(str, (calls[0], calls[-1]))) if len(calls) > 1 else calls[0]} calls "
                     "per size)", fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("elements per tensor (float32)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("µs per node (record + backward + release)")
    fig.suptitle("1,000-node chain on the H200, three shapes: medians over the calls of the current code", fontsize=10)
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    fig.tight_layout()
    return fig


# --- per-node kernels: % of the copy roofline and × eager at 2^26 ---------------------------------

def kernel_rows(root: Path):
    """{(op, dtype, dir): row} at 2^26 for the forward and the fused VJP, in the op table's order."""
    rows = [r for r in load(root, KERNELS)["rows"] if r["log2n"] == 26 and r["dir"] in ("fwd", "vjp")]
    return {(r["op"], r["dtype"], r["dir"]): r for r in rows}


def table_kernels(root: Path) -> str:
    rows = kernel_rows(root)
    pipe = {(k["op"], k["dtype"], k["dir"]): k["compute_pipe"] for k in load(root, ROOFLINE)["kernels"]}
    ops = list(dict.fromkeys(op for op, _, _ in rows))
    lines = ["| node | float32 forward | float32 fused VJP | float64 forward | float64 fused VJP |",
             "|---|---|---|---|---|"]
    for op in ops:
        cells = []
        for dtype in ("f32", "f64"):
            for direction in ("fwd", "vjp"):
                r = rows[(op, dtype, direction)]
                bound = "memory" if r["roofline_ms"] == r["copy_ms"] else pipe[(op, dtype, direction)]
                cells.append(f"{r['ms']:.3f}, {bound}, {r['frac_roofline'] * 100:.0f}%, {r['ratio']:.2f}×")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure_roofline(root: Path, plt) -> "Figure":
    rows = kernel_rows(root)
    ops = list(dict.fromkeys(op for op, _, _ in rows))
    fig, ax = plt.subplots(figsize=(9, 4.4))
    width = 0.2
    series = [("f32", "fwd", "float32 forward"), ("f32", "vjp", "float32 fused VJP"),
              ("f64", "fwd", "float64 forward"), ("f64", "vjp", "float64 fused VJP")]
    for i, (dtype, direction, label) in enumerate(series):
        xs = [j + (i - 1.5) * width for j in range(len(ops))]
        ax.bar(xs, [rows[(op, dtype, direction)]["frac_copy"] * 100 for op in ops], width, label=label)
    ax.axhline(100, color="black", lw=0.8)
    ax.set_xticks(range(len(ops)), ops, rotation=60, fontsize=8)
    ax.set_ylabel("% of a device copy moving the same bytes")
    ax.set_ylim(0, 110)
    ax.set_title("Per-node kernels at 2^26 elements on the H200: speed against the copy roofline", pad=28)
    ax.legend(fontsize=8, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return fig


# --- accuracy: the sweep tables and bound use -----------------------------------------------------

def sweep_label(node: dict, repeated: set) -> str:
    return f"{node['op']} ({node['scalars']})" if node["op"] in repeated and node["scalars"] else node["op"]


def bound_text(bound: dict) -> str:
    return f"{bound['ulp']:.1f}" if bound["abs"] == 0 else f"{bound['ulp']:.1f}+{bound['abs']:.1f}eps"


def table_sweep(root: Path, path: str) -> str:
    nodes = load(root, path)["nodes"]
    ops = [n["op"] for n in nodes]
    repeated = {op for op in ops if ops.count(op) > 1}
    lines = ["| node | cases | s | y max ulp (domain / all finite) | dx max ulp (domain / finite), g=1 | "
             "dx g=R(0.7) | bound y / dx | above bound (in domain) |", "|---|---|---|---|---|---|---|---|"]
    for n in nodes:
        y, grads = n["outputs"][0], n["outputs"][1:]
        pair = lambda o: f"{g3(o['max_ulp_domain'])} / {g3(o['max_ulp_finite'])}"
        at = lambda g: " ; ".join(pair(o) for o in grads if abs(o["g"] - g) < 1e-6)
        above = sum(o["above_bound"] for o in n["outputs"])
        above_domain = sum(o["above_bound_domain"] for o in n["outputs"])
        lines.append(f"| {sweep_label(n, repeated)} | {n['cases']} | {n['seconds']:.2f} | {pair(y)} | {at(1.0)} | "
                     f"{at(0.7)} | {bound_text(y['bound'])} / {bound_text(grads[0]['bound'])} | "
                     f"{above} ({above_domain}) |")
    return "\n".join(lines)


def table_sweep_16bit(root: Path) -> str:
    """Both 16-bit formats side by side: the largest ULP error inside the domain (y; the gradients at
    both g), the share of the bound used, and the values above a bound outside the domains by cause."""
    per_op = {}
    for n in load(root, SWEEP_16BIT)["nodes"]:
        d = per_op.setdefault(n["op"], {}).setdefault(n["dtype"], {"y": 0.0, "d": 0.0, "use": 0.0, "cases": n["cases"], "causes": {}})
        for o in n["outputs"]:
            key = "y" if o.get("g") is None else "d"
            d[key] = max(d[key], o["max_ulp_domain"])
            d["use"] = max(d["use"], o["max_ratio_domain"])
            for cause, count in o["above_bound_by_cause"].items():
                if count:
                    d["causes"][cause] = d["causes"].get(cause, 0) + count
    lines = ["| node | cases | bfloat16 y | bfloat16 d | used | float16 y | float16 d | used | above bound outside the domain |",
             "|---|---|---|---|---|---|---|---|---|"]
    for op, formats in per_op.items():
        b, h = formats["bfloat16"], formats["float16"]
        causes = "; ".join(f"{name}: " + ", ".join(f"{c} {v:,}" for c, v in d["causes"].items())
                           for name, d in (("bf16", b), ("f16", h)) if d["causes"]) or "-"
        cases = "2^16" if b["cases"] == 1 << 16 else f"2^{int(math.log2(b['cases']))}"
        lines.append(f"| {op} | {cases} | {g3(b['y'])} | {g3(b['d'])} | {b['use']:.0%} | {g3(h['y'])} | {g3(h['d'])} | "
                     f"{h['use']:.0%} | {causes} |")
    return "\n".join(lines)


def bound_use_grid(root: Path):
    """{(op, column): max error / bound inside the domain}, the columns being dtype × output; a binary
    node's da and db, and a node swept at several scalars, take the larger."""
    grid, ops = {}, []
    for path in SWEEPS.values():
        for n in load(root, path)["nodes"]:
            ops.append(n["op"])
            for o in n["outputs"]:
                output = "y" if o.get("g") is None else f"d g={o['g']:.1g}"
                key = (n["op"], f"{n['dtype']} {output}")
                grid[key] = max(grid.get(key, 0.0), o["max_ratio_domain"])
    return grid, list(dict.fromkeys(ops))


def figure_bound_use(root: Path, plt) -> "Figure":
    """Per node, output and dtype, the largest error inside the domain over what its bound allows."""
    grid, ops = bound_use_grid(root)
    columns = [f"{dtype} {output}" for dtype in ("float32", "float64", "bfloat16", "float16")
               for output in ("y", "d g=1", "d g=0.7")]
    values = [[grid.get((op, c), float("nan")) for c in columns] for op in ops]
    fig, ax = plt.subplots(figsize=(11, 8))
    image = ax.imshow(values, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            if not math.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v < 0.6 else "black")
    ax.set_xticks(range(len(columns)), [c.replace(" ", "\n", 1) for c in columns], fontsize=8)
    ax.set_yticks(range(len(ops)), ops, fontsize=8)
    ax.xaxis.tick_top()
    fig.colorbar(image, ax=ax, fraction=0.04, label="largest |produced - exact| / allowed inside the domain\n(0: every result correctly rounded; 1: at the bound)")
    ax.set_title("Bound use per node, output and dtype (H200 sweeps; d: the gradient(s), at g = 1 and R(0.7))",
                 fontsize=9, pad=30)
    return fig


def figure_error_distribution(root: Path, plt) -> "Figure":
    """The float32 unary sweep's histogram: per node and output, the share of all 2^32 inputs in each
    error bucket above correct rounding (log colour scale; an empty cell: no input there)."""
    from matplotlib.colors import LogNorm
    nodes = load(root, SWEEPS["float32, every bit pattern (unary)"])["nodes"]
    ops = [n["op"] for n in nodes]
    repeated = {op for op in ops if ops.count(op) > 1}
    buckets = [("le_1", "(0.5, 1]"), ("le_2", "(1, 2]"), ("le_4", "(2, 4]"), ("le_8", "(4, 8]"), ("gt_8", "> 8"),
               ("nonfinite_expected", "non-finite,\nas the spec says")]
    labels, shares = [], []
    for n in nodes:
        for o in n["outputs"]:
            h = o["histogram"]
            total = sum(h.values())
            g = "" if o.get("g") is None else f" g={o['g']:.2g}"
            labels.append(f"{sweep_label(n, repeated)} {o['output']}{g}")
            shares.append([h[b] / total if h[b] else float("nan") for b, _ in buckets])
    fig, ax = plt.subplots(figsize=(7, 12))
    image = ax.imshow(shares, cmap="magma_r", norm=LogNorm(1e-9, 1), aspect="auto")
    for i, row in enumerate(shares):
        for j, v in enumerate(row):
            if not math.isnan(v):
                ax.text(j, i, f"{v:.0e}" if v < 0.01 else f"{v:.0%}", ha="center", va="center", fontsize=6,
                        color="black" if v < 1e-4 else "white")
    ax.set_xticks(range(len(buckets)), [name for _, name in buckets], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    fig.colorbar(image, ax=ax, fraction=0.04, label="share of the 2^32 float32 inputs")
    ax.set_title("Error per node and output in ulps of R(exact), every float32 input, in and outside the domain (H200);\n"
                 "the rest of each row is correctly rounded (at most 0.5 ulp)", fontsize=9, pad=28)
    return fig


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def sampling_text(nodes: list) -> str:
    """How the sweep chose its inputs: "every bit pattern", or "every 4th bit pattern"."""
    strides = sorted({n["stride"] for n in nodes})
    if strides == [1]:
        return "every bit pattern"
    return "every " + " or ".join(ordinal(k) for k in strides) + " bit pattern"


def figure_error_vs_input(root: Path, plt) -> "Figure":
    """Per unary node, the largest error inside the domain in each binade of x (the sweep's
    max_ulp_domain_by_binade), for y and for dx at g = 1, positive x solid and negative x dashed, with
    each output's bound: its ulp part as a dotted line, and the share of the whole bound used. A bound
    with an absolute part (k eps) allows millions of ulps where the result is near zero, which is
    where such curves climb: the panel's "used" says they stay inside it."""
    sweep = load(root, BINADES)
    nodes = [n for n in sweep["nodes"] if len(n["outputs"]) == 3]  # unary: y and dx at two g
    ops = [n["op"] for n in nodes]
    repeated = {op for op in ops if ops.count(op) > 1}
    columns = 4
    rows = math.ceil(len(nodes) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(12, 2.3 * rows), sharex=True)
    for ax, n in zip(axes.flat, nodes):
        largest = 0.0
        used = []
        for o, color in zip(n["outputs"][:2], ("C0", "C3")):
            by_binade = o.get("max_ulp_domain_by_binade")
            if by_binade is None:
                continue
            first = by_binade["min_exponent"]
            for sign, style in (("positive", "-"), ("negative", "--")):
                points = [(first + k, v) for k, v in enumerate(by_binade[sign]) if v is not None]
                if points:
                    label = f"{o['output']}, x {'>' if sign == 'positive' else '<'} 0"
                    ax.plot(*zip(*points), style, color=color, lw=1, label=label)
                    largest = max([largest] + [v for _, v in points])
            bound = o["bound"]
            ax.axhline(bound["ulp"], color=color, ls=":", lw=1,
                       label=f"{o['output']} bound's ulp part" if n is nodes[0] else None)
            largest = max(largest, bound["ulp"])
            used.append(f"{o['output']}: bound {bound_text(bound)}, used {o['max_ratio_domain']:.2f}")
        ax.set_title(sweep_label(n, repeated) + "\n" + "; ".join(used), fontsize=6.5)
        ax.set_yscale("symlog", linthresh=1)
        ax.set_ylim(-0.3, max(2.0, 2 * largest))  # zero (exact) stays visible above the frame
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(nodes):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=5.5)
    fig.supxlabel("binade of x: floor(log2 |x|)", fontsize=9)
    fig.supylabel("largest error inside the domain (ulps of R(exact))", fontsize=9)
    fig.suptitle(f"Error against input, float32, {sweep['backend']} backend ({sampling_text(nodes)}); "
                 "bound = u ulp + k eps: near a zero result k eps is millions of ulps; "
                 "used = largest error / bound", fontsize=9)
    fig.tight_layout()
    return fig


FIGURES = {
    "chain_cost.svg": (figure_chain, [*CHAIN_CALLS, *CHAIN_COMPILED]),
    "roofline.svg": (figure_roofline, [KERNELS]),
    "bound_use.svg": (figure_bound_use, list(SWEEPS.values())),
    "error_distribution.svg": (figure_error_distribution, [SWEEPS["float32, every bit pattern (unary)"]]),
    "error_vs_input.svg": (figure_error_vs_input, [BINADES]),
}

TABLES = {  # name: (document, function of the root)
    "chain-summary": ("docs/performance.md", table_chain_summary),
    "chain": ("docs/performance.md", table_chain),
    "chain-shapes": ("docs/performance.md", table_chain_shapes),
    "kernels": ("docs/performance.md", table_kernels),
    "sweep-unary-f32": ("docs/accuracy.md", lambda root: table_sweep(root, SWEEPS["float32, every bit pattern (unary)"])),
    "sweep-binary-f32": ("docs/accuracy.md", lambda root: table_sweep(root, SWEEPS["float32, 2^32 exponent pairs (binary)"])),
    "sweep-f64": ("docs/accuracy.md", lambda root: table_sweep(root, SWEEPS["float64, 2^32 random cases"])),
    "sweep-16bit": ("docs/accuracy.md", table_sweep_16bit),
}


# --- tables between markers -----------------------------------------------------------------------

def marker_pattern(name: str) -> re.Pattern:
    """The begin marker (its indentation: a table inside a list item is indented), the table, the end."""
    return re.compile(rf"^([ \t]*)<!-- figures\.py: {re.escape(name)} -->\n(.*?)^[ \t]*<!-- figures\.py: end "
                      rf"{re.escape(name)} -->", re.S | re.M)


def rendered_tables(root: Path) -> dict:
    """{document: its text with every table rendered} for the documents whose tables changed, and the
    problems: a document without a table's markers."""
    texts, problems = {}, []
    for name, (document, make) in TABLES.items():
        text = texts.get(document) or read_input(root, document).decode()
        match = marker_pattern(name).search(text)
        if not match:
            problems.append(f"{document}: no '<!-- figures.py: {name} -->' ... '<!-- figures.py: end {name} -->' "
                            f"markers for table '{name}'")
            continue
        table = "".join(match.group(1) + line + "\n" for line in make(root).split("\n"))
        texts[document] = text[:match.start(2)] + table + text[match.end(2):]
    return texts, problems


def table_problems(root: Path) -> list:
    texts, problems = rendered_tables(root)
    for document, text in texts.items():
        committed = read_input(root, document).decode()
        for name, (table_document, _) in TABLES.items():
            if table_document != document:
                continue
            ours, theirs = marker_pattern(name).search(text), marker_pattern(name).search(committed)
            if theirs and ours.group(2) != theirs.group(2):
                problems.append(f"{document}: table '{name}' differs from what its JSON gives (regenerate: {REGENERATE})")
    return problems


# --- figures and their manifest -------------------------------------------------------------------

def figure_problems(root: Path) -> list:
    manifest_path = root / MANIFEST
    if not manifest_path.exists():
        return [f"{MANIFEST} is missing (regenerate: {REGENERATE})"]
    manifest = json.loads(manifest_path.read_text())
    script = sha256(root / "tools/figures.py")
    problems = []
    for name, (_, sources) in FIGURES.items():
        entry = manifest.get(name)
        figure = root / "docs/figures" / name
        stale = lambda why: problems.append(f"docs/figures/{name} is stale: {why} (regenerate: {REGENERATE})")
        if entry is None or not figure.exists():
            stale("not generated")
            continue
        if entry["script_sha256"] != script:
            stale("tools/figures.py changed since it was drawn")
        recorded = entry["sources"]
        for source in sources:
            if source not in recorded:
                stale(f"it now draws from {source}")
            elif recorded[source] != sha256(root / source):
                stale(f"its source {source} changed")
        if entry["svg_sha256"] != sha256(figure):
            stale("the file differs from the one tools/figures.py wrote")
    return problems


def draw_figures(root: Path) -> dict:
    """{figure name: its SVG bytes}, every one drawn before any is written."""
    import io
    import matplotlib
    matplotlib.use("svg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"svg.hashsalt": "tapewise", "svg.fonttype": "none", "font.size": 9})
    drawn = {}
    for name, (draw, _) in FIGURES.items():
        fig = draw(root, plt)
        svg = io.BytesIO()
        fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": "tools/figures.py"}, bbox_inches="tight")
        plt.close(fig)
        drawn[name] = svg.getvalue()
    return drawn


def write_everything(root: Path) -> None:
    """Draws every figure and renders every table, then writes them and the manifest: an input that
    cannot be used stops it before anything is written."""
    drawn = draw_figures(root)
    texts, problems = rendered_tables(root)
    if problems:
        raise InputError("; ".join(problems))
    out = root / "docs/figures"
    out.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name, svg in drawn.items():
        sources = FIGURES[name][1]
        (out / name).write_bytes(svg)
        manifest[name] = {"sources": {s: sha256(root / s) for s in sources},
                          "script_sha256": sha256(root / "tools/figures.py"), "svg_sha256": sha256(out / name)}
        print(f"docs/figures/{name} from {', '.join(sources)}")
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    for document, text in texts.items():
        (root / document).write_text(text)
    print(f"{len(TABLES)} tables written between their markers")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when a figure or table is stale; writes nothing")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the repository root (default: this script's)")
    args = parser.parse_args()
    try:
        if not args.check:
            write_everything(args.root)
            return 0
        problems = figure_problems(args.root) + table_problems(args.root)
    except InputError as error:
        print(f"figures.py{' --check' if args.check else ''}: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"figures.py --check: {problem}", file=sys.stderr)
    if not problems:
        print(f"figures.py --check: {len(FIGURES)} figures and {len(TABLES)} tables match their JSON")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
