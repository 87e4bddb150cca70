"""conform/frameworks/suites.py — reads and writes the folders of `tapewise-conform vectors`
(schema tapewise-conform.vectors/1, README "Vectors layout"): the index, each suite's inputs, the
spec's expected values and the out_*.npy files an implementation under test writes.

Only numpy is needed here, so the tapewise side of the framework audit runs without any framework.
"""

import json
import math
import os
import shutil

import numpy as np

VECTORS_SCHEMA = "tapewise-conform.vectors/1"
INDEX_FILE = "index.json"
IMPLEMENTATION_FILE = "implementation.json"
# Each dtype's .npy storage. numpy has no bfloat16: its files hold the bits as '<u2' (as
# tapewise-conform vectors writes them), and this module hands bfloat16 arrays around as those uint16
# bits; the adapters convert them to and from the framework's own bfloat16.
DTYPES = {"float32": np.dtype("<f4"), "float64": np.dtype("<f8"), "float16": np.dtype("<f2"),
          "bfloat16": np.dtype("<u2")}


def read_index(vectors_dir):
    """The parsed index.json of a vectors folder; raises ValueError when it is not one."""
    path = os.path.join(vectors_dir, INDEX_FILE)
    with open(path) as f:
        index = json.load(f)
    if index.get("schema") != VECTORS_SCHEMA:
        raise ValueError(f"{path}: schema is not {VECTORS_SCHEMA}")
    if not isinstance(index.get("suites"), list):
        raise ValueError(f"{path}: no 'suites' array")
    return index


def scalar_value(v):
    """A scalar as index.json writes it: a JSON number, or "inf", "-inf", "nan"."""
    if isinstance(v, str):
        return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}[v]
    return float(v)


def suite_scalars(suite):
    """The suite's scalars as Python floats (double), exactly as the index gives them."""
    return {name: scalar_value(v) for name, v in suite.get("scalars", {}).items()}


def input_names(suite):
    """The suite's input names in order: ["x"], ["a", "b"] or, for `same` suites, ["a"]."""
    return [name for name in suite["inputs"] if name != "g"]


def output_names(suite):
    """The outputs to write, in order: "y" first, then the gradients (dx, or da and db)."""
    return list(suite["outputs"])


def load_array(folder, filename, dtype_name):
    """One .npy file of a suite, checked to be 1-D and of the suite's dtype."""
    if dtype_name not in DTYPES:
        raise ValueError(f"{folder}: a {dtype_name!r} suite; the framework audit reads {', '.join(DTYPES)}")
    a = np.load(os.path.join(folder, filename))
    if a.dtype != DTYPES[dtype_name] or a.ndim != 1:
        raise ValueError(f"{folder}/{filename}: {a.dtype} {a.shape}, the suite is 1-D {dtype_name}")
    return a


def load_inputs(vectors_dir, suite):
    """(inputs in order, g) of a suite, as numpy arrays of its dtype."""
    folder = os.path.join(vectors_dir, suite["id"])
    inputs = [load_array(folder, suite["inputs"][n], suite["dtype"]) for n in input_names(suite)]
    g = load_array(folder, suite["inputs"]["g"], suite["dtype"])
    return inputs, g


def load_expected(vectors_dir, suite):
    """{output name: array} of the suite's expected files (the spec's exact values for special suites)."""
    folder = os.path.join(vectors_dir, suite["id"])
    return {n: load_array(folder, suite["expected"][n], suite["dtype"]) for n in output_names(suite)}


def load_outputs(answered_dir, suite):
    """{output name: array or None} of what an implementation wrote (None where a file is missing)."""
    folder = os.path.join(answered_dir, suite["id"])
    out = {}
    for name in output_names(suite):
        path = os.path.join(folder, suite["outputs"][name])
        out[name] = load_array(folder, suite["outputs"][name], suite["dtype"]) if os.path.exists(path) else None
    return out


def write_outputs(answered_dir, suite, values):
    """Writes {output name: array} as the suite's out_*.npy: 1-D, little-endian, the suite's dtype
    (bfloat16: its uint16 bits)."""
    folder = os.path.join(answered_dir, suite["id"])
    dtype = DTYPES[suite["dtype"]]
    for name in output_names(suite):
        a = np.ascontiguousarray(np.asarray(values[name]).reshape(-1))
        if a.dtype != dtype:
            # A framework that answers in another dtype is reported, not silently converted.
            raise TypeError(f"{suite['id']}: output {name} is {a.dtype}, the suite is {suite['dtype']}")
        if a.shape[0] != suite["count"]:
            raise ValueError(f"{suite['id']}: output {name} has {a.shape[0]} elements, the suite {suite['count']}")
        np.save(os.path.join(folder, suite["outputs"][name]), a.astype(dtype, copy=False))


def remove_outputs(answered_dir, suite):
    """Deletes any out_*.npy of a suite, so a failed answer never leaves stale files behind."""
    for filename in suite["outputs"].values():
        path = os.path.join(answered_dir, suite["id"], filename)
        if os.path.exists(path):
            os.remove(path)


def copy_vectors(vectors_dir, answered_dir):
    """A fresh copy of a vectors folder to answer into (one per framework)."""
    if os.path.exists(answered_dir):
        raise FileExistsError(f"{answered_dir} exists; answer into a new folder")
    shutil.copytree(vectors_dir, answered_dir)


def read_implementation(answered_dir):
    """The implementation.json answer.py wrote, or {} when there is none."""
    path = os.path.join(answered_dir, IMPLEMENTATION_FILE)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def write_implementation(answered_dir, info):
    with open(os.path.join(answered_dir, IMPLEMENTATION_FILE), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
