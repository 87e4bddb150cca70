#!/usr/bin/env python3
"""conform/frameworks/diff.py — the convention diff report: for every special point of a vectors folder
(one row of spec/special_points each), the spec's exact value beside each framework's, per output, and
the cause of every difference (classify.py: convention, staging, saturation, nan-inf).

    python3 conform/frameworks/diff.py VECTORS ANSWERED [ANSWERED ...] [--json FILE] [--markdown FILE] [--summary-only]

VECTORS is the folder `tapewise-conform vectors` wrote; each ANSWERED is a copy of it answered by
answer.py (one per framework). Prints every point, then a per-node table (special points matched /
total per framework, one line per kind of difference); --markdown writes that table for a README,
--json every difference with its class. Exit status: 0 every difference classified, 1 some difference
is `unclassified` (listed), 2 usage or input error.
"""

import argparse
import json
import os
import sys
from collections import Counter, OrderedDict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import classify  # noqa: E402
import suites  # noqa: E402

DIFF_SCHEMA = "tapewise-frameworks.diff/1"


# --- reading --------------------------------------------------------------------------------------------

def values(a, dtype_name):
    """A suite's array as numpy values: bfloat16's uint16 bits become the float32 values they widen to
    (exactly; numpy has no bfloat16), every other dtype is itself."""
    if dtype_name != "bfloat16" or a is None:
        return a
    return (a.astype(np.uint32) << 16).view(np.float32)


def rounded_scalar(v, dtype_name):
    """R(v) in the dtype, as the spec rounds a scalar: once, or R16(R32(v)) for the 16-bit formats."""
    with np.errstate(over="ignore"):  # R(1e300) = inf in float32 is the point of such rows
        if dtype_name == "float64":
            return np.float64(v)
        f = np.float32(v)
        if dtype_name == "float16":
            return np.float16(f)
        if dtype_name == "bfloat16":
            u = int(np.array(f).view(np.uint32))
            if not np.isnan(f):  # round to nearest even at bit 16 (a carry into the exponent is right)
                u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
            return np.array(u, dtype=np.uint32).view(np.float32)[()]
        return f


def special_points(vectors_dir, index):
    """Every element of every special suite, in index order: one dict per row of spec/special_points."""
    points = []
    for suite in index["suites"]:
        if suite.get("kind") != "special":
            continue
        name = suite["dtype"]
        inputs, g = suites.load_inputs(vectors_dir, suite)
        inputs, g = [values(a, name) for a in inputs], values(g, name)
        expected = {n: values(e, name) for n, e in suites.load_expected(vectors_dir, suite).items()}
        scalars = {n: rounded_scalar(v, name) for n, v in suites.suite_scalars(suite).items()}
        dtype = np.dtype(np.float32) if name == "bfloat16" else suites.DTYPES[name]
        rows = suite.get("rows", [])
        for i in range(suite["count"]):
            row = rows[i] if i < len(rows) else {"line": 0, "note": ""}
            point = classify.Point(op=suite["op"], dtype=dtype, g=g[i], scalars=scalars,
                                   raw_scalars=suites.suite_scalars(suite), same=suite.get("same", False),
                                   inputs={n: a[i] for n, a in zip(suites.input_names(suite), inputs)}, fmt=name)
            points.append({"suite": suite, "index": i, "line": row["line"], "note": row["note"], "point": point,
                           "spec": {n: e[i] for n, e in expected.items()}})
    return points


def framework_label(info, answered_dir):
    if not info.get("framework"):
        return os.path.basename(os.path.normpath(answered_dir))
    return f"{info['framework']}/{info.get('device', '?')}"


def load_frameworks(answered_dirs):
    """[{label, name, dir, info, outputs: {suite id: {name: array or None}}}] per answered folder."""
    frameworks, labels = [], Counter()
    for d in answered_dirs:
        info = suites.read_implementation(d)
        label = framework_label(info, d)
        labels[label] += 1
        if labels[label] > 1:
            label = f"{label}#{labels[label]}"
        index = suites.read_index(d)
        outputs = {s["id"]: {n: values(a, s["dtype"]) for n, a in suites.load_outputs(d, s).items()}
                   for s in index["suites"] if s.get("kind") == "special"}
        frameworks.append({"label": label, "name": info.get("framework", label), "dir": d, "info": info,
                           "outputs": outputs})
    return frameworks


# --- comparing ----------------------------------------------------------------------------------------------

def compare(points, frameworks):
    """Fills point["got"][label][output] and point["diff"][label][output] = (class, reason) or None."""
    for p in points:
        p["got"], p["diff"] = {}, {}
        for fw in frameworks:
            produced = fw["outputs"].get(p["suite"]["id"], {})
            p["got"][fw["label"]], p["diff"][fw["label"]] = {}, {}
            for name, spec in p["spec"].items():
                array = produced.get(name)
                got = None if array is None else array[p["index"]]
                p["got"][fw["label"]][name] = got
                p["diff"][fw["label"]][name] = classify.classify(p["point"], name, spec, got, fw["name"])


def differences(points, frameworks):
    """Every differing output as a flat dict (the --json rows)."""
    rows = []
    for p in points:
        for fw in frameworks:
            for name, verdict in p["diff"][fw["label"]].items():
                if verdict is None:
                    continue
                got = p["got"][fw["label"]][name]
                rows.append({"framework": fw["label"], "op": p["point"].op, "dtype": p["suite"]["dtype"],
                             "suite": p["suite"]["id"], "index": p["index"], "line": p["line"], "note": p["note"],
                             "inputs": {n: hex_value(v) for n, v in p["point"].inputs.items()},
                             "g": hex_value(p["point"].g), "scalars": p["suite"].get("scalars", {}),
                             "same": p["point"].same, "output": name, "spec": hex_value(p["spec"][name]),
                             "got": None if got is None else hex_value(got),
                             "class": verdict[0], "reason": verdict[1]})
    return rows


def node_summary(points, frameworks, diffs):
    """Per node, in op-table order: points, matched per framework, headline lines (one per kind of difference)."""
    nodes = OrderedDict()
    for p in points:
        node = nodes.setdefault(p["point"].op, {"op": p["point"].op, "points": 0, "matched": Counter(), "by_class": {}})
        node["points"] += 1
        for fw in frameworks:
            if all(v is None for v in p["diff"][fw["label"]].values()):
                node["matched"][fw["label"]] += 1
    for node in nodes.values():
        node["by_class"] = {fw["label"]: Counter() for fw in frameworks}
        node["headlines"] = Counter()
    for d in diffs:
        node = nodes[d["op"]]
        node["by_class"][d["framework"]][d["class"]] += 1
        node["headlines"][(d["framework"], d["class"], d["reason"])] += 1
    return list(nodes.values())


# --- formatting ---------------------------------------------------------------------------------------------

def hex_value(v):
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float(v).hex()


def short_value(v):
    """Shortest text that round-trips in the dtype: +0, -0, inf, nan, 2, 0.5, 1.4e-45."""
    if v is None:
        return "(none)"
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "-0" if np.signbit(v) else "+0"
    if 1e-4 <= abs(v) < 1e7:
        return np.format_float_positional(v, unique=True, trim="-")
    return np.format_float_scientific(v, unique=True, trim="-")


def point_inputs_text(p):
    pt = p["point"]
    parts = [f"{n}={short_value(v)}" for n, v in pt.inputs.items()]
    if pt.same:
        parts.append("same")
    parts += [f"{n}={short_value(v)}" for n, v in pt.scalars.items()]
    parts.append(f"g={short_value(pt.g)}")
    return " ".join(parts)


def print_points(points, frameworks, out):
    """Every special point, every output: the spec's value beside each framework's, with the class."""
    width = 24
    current = None
    for p in points:
        op = p["point"].op
        if op != current:
            current = op
            out.write(f"\n== {op}\n")
            out.write(f"{'line':>5} {'dtype':7} {'out':3} {'spec':>14}  " +
                      "".join(f"{fw['label']:{width}}" for fw in frameworks) + "inputs\n")
        for k, (name, spec) in enumerate(p["spec"].items()):
            cells = []
            for fw in frameworks:
                verdict = p["diff"][fw["label"]][name]
                text = short_value(p["got"][fw["label"]][name])
                cells.append(f"{text + ('' if verdict is None else ' [' + verdict[0] + ']'):{width}}")
            first = k == 0
            lead = f"{p['line']:>5} {p['suite']['dtype']:7}" if first else " " * 13
            tail = (point_inputs_text(p) + (f"   # {p['note']}" if p["note"] else "")) if first else ""
            out.write(f"{lead} {name:3} {short_value(spec):>14}  {''.join(cells)}{tail}\n")


def headline_lines(node):
    """One line per (class, reason), with the frameworks showing it and their output counts, most first."""
    grouped = {}
    for (label, cls, reason), n in node["headlines"].items():
        grouped.setdefault((cls, reason), {})[label] = n
    order = sorted(grouped.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    return [f"{cls} ({', '.join(f'{label} ×{n}' for label, n in counts.items())}): {reason}"
            for (cls, reason), counts in order]


def summary_markdown(nodes, frameworks):
    """The per-node table (Markdown): special points matched / total per framework, then the differences."""
    head = "| node | " + " | ".join(f"{fw['label']} matched" for fw in frameworks) + " | differences: class (framework ×outputs): cause |"
    rule = "|---|" + "---|" * len(frameworks) + "---|"
    lines = [head, rule]
    for node in nodes:
        cells = [f"{node['matched'][fw['label']]}/{node['points']}" for fw in frameworks]
        diffs = "<br>".join(line.replace("|", "\\|") for line in headline_lines(node)) or "none"
        lines.append(f"| {node['op']} | " + " | ".join(cells) + f" | {diffs} |")
    return "\n".join(lines) + "\n"


def totals_text(nodes, frameworks, diffs):
    lines = []
    for fw in frameworks:
        matched = sum(n["matched"][fw["label"]] for n in nodes)
        total = sum(n["points"] for n in nodes)
        by_class = Counter(d["class"] for d in diffs if d["framework"] == fw["label"])
        classes = ", ".join(f"{c} {by_class[c]}" for c in classify.CLASSES if by_class[c]) or "no differences"
        version = fw["info"].get("version", "?")
        lines.append(f"{fw['label']} ({fw['name']} {version}): {matched}/{total} special points match the spec "
                     f"bit for bit; differing outputs: {classes}")
    return lines


def json_report(args, index, frameworks, nodes, diffs):
    return {
        "schema": DIFF_SCHEMA,
        "vectors": args.vectors,
        "seed": index.get("seed"),
        "classes": classify.CLASSES,
        "staging_max_ulps": classify.STAGING_MAX_ULPS,
        "frameworks": [{"label": fw["label"], "name": fw["name"], "version": fw["info"].get("version"),
                        "dir": fw["dir"], "implementation": fw["info"]} for fw in frameworks],
        "nodes": [{"op": n["op"], "points": n["points"],
                   "frameworks": {fw["label"]: {"matched": n["matched"][fw["label"]],
                                                "differences_by_class": dict(n["by_class"][fw["label"]])}
                                  for fw in frameworks},
                   "headlines": headline_lines(n)} for n in nodes],
        "differences": diffs,
        "unclassified": sum(1 for d in diffs if d["class"] == "unclassified"),
    }


# --- main -----------------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("vectors", help="the folder `tapewise-conform vectors` wrote (the spec's exact values)")
    p.add_argument("answered", nargs="+", help="answered copies, one per framework (answer.py)")
    p.add_argument("--json", metavar="FILE", help="write every difference with its class")
    p.add_argument("--markdown", metavar="FILE", help="write the per-node summary table (for a README)")
    p.add_argument("--summary-only", action="store_true", help="skip the per-point listing")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        index = suites.read_index(args.vectors)
        points = special_points(args.vectors, index)
        frameworks = load_frameworks(args.answered)
    except (OSError, ValueError, KeyError) as e:
        print(f"diff.py: {e}", file=sys.stderr)
        return 2
    if not points:
        print(f"diff.py: {args.vectors} has no special suites", file=sys.stderr)
        return 2
    compare(points, frameworks)
    diffs = differences(points, frameworks)
    nodes = node_summary(points, frameworks, diffs)
    out = sys.stdout
    if not args.summary_only:
        print_points(points, frameworks, out)
        out.write("\n")
    out.write(summary_markdown(nodes, frameworks) + "\n")
    for line in totals_text(nodes, frameworks, diffs):
        out.write(line + "\n")
    unclassified = [d for d in diffs if d["class"] == "unclassified"]
    for d in unclassified:
        out.write(f"UNCLASSIFIED {d['framework']} {d['suite']}[{d['index']}] (spec/special_points:{d['line']}) "
                  f"{d['output']}: spec {d['spec']}, got {d['got']} ({d['reason']})\n")
    out.write(f"{len(unclassified)} unclassified differences\n")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(summary_markdown(nodes, frameworks))
            f.write("\n" + "\n".join(f"- {line}" for line in totals_text(nodes, frameworks, diffs)) + "\n")
            f.write("\nClasses: " + "; ".join(f"`{c}`: {t}" for c, t in classify.CLASSES.items()) + ".\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(json_report(args, index, frameworks, nodes, diffs), f, indent=1)
            f.write("\n")
    return 1 if unclassified else 0


if __name__ == "__main__":
    sys.exit(main())
