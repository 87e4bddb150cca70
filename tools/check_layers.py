#!/usr/bin/env python3
"""tools/check_layers.py — the include graph has layers, each allowed to include its own and lower ones:
the public headers and the op table (include/, spec/) < cuda/'s own floors (core < kernels < backends <
tape < c_api) < the reference (reference/) < the conformance library (conform/library: the .npy codec,
index, graph, cases, exec, grade, report) < the tools (the runner in conform/, prove/, bench/,
python/src/, examples/) < the tests (proptest/, python/tests/). A file that includes a higher layer's
file is named, with the line, and the exit status is 1. Reads #include lines only (no compiler): about a
tenth of a second.

  python3 tools/check_layers.py [--root DIR]    check a tree (default: this repository)
  python3 tools/check_layers.py --self-test     check that planted violations are found
"""
import argparse
import re
import sys
import tempfile
from pathlib import Path


# (layer name, the repository-relative prefixes that belong to it), lowest first.
LAYERS = [
    ("public headers", ("include/", "spec/")),
    ("cuda/core", ("cuda/core/",)),
    ("cuda/kernels", ("cuda/kernels/",)),
    ("cuda/backends", ("cuda/backends/",)),
    ("cuda/tape", ("cuda/tape/",)),
    ("cuda/c_api", ("cuda/c_api/",)),
    ("reference", ("reference/",)),
    ("conformance library", ("conform/library/",)),
    ("tools", ("conform/", "prove/", "bench/", "python/src/", "examples/")),
    ("tests", ("proptest/", "python/tests/")),
]
NAMES = [name for name, _ in LAYERS]

# Where quoted includes are looked up after the including file's own folder: the build's include
# folders (CMakeLists.txt), lowest layer first.
SEARCH = ["include", "cuda", "spec", "reference", "conform/library", "proptest"]
SOURCES = ["include", "cuda", "spec", "reference", "conform", "prove", "bench", "proptest", "python/src", "examples"]
SUFFIXES = {".h", ".hpp", ".c", ".cpp", ".cu", ".cuh", ".def"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(rel: str):
    """The layer index of a repository-relative path, or None for a file outside the layers. The first
    matching prefix decides, so conform/library/ is the conformance library, not a tool."""
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(rel.startswith(p) for p in prefixes):
            return index
    return None


def resolve(root: Path, including: Path, bracket: str, name: str):
    """The repository-relative path an #include names, or None (a system or third-party header)."""
    if bracket == "<":
        # The library's installed headers (the op table and the version header are generated there).
        return "include/" + name if name.startswith("tapewise/") else None
    for folder in [including.parent] + [root / s for s in SEARCH]:
        candidate = (folder / name).resolve()
        if candidate.is_file():
            try:
                return candidate.relative_to(root.resolve()).as_posix()
            except ValueError:
                return None
    return None


def violations(root: Path):
    found = []
    for top in SOURCES:
        for path in sorted((root / top).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            mine = layer_of(rel)
            if mine is None:
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve(root, path, m.group(1), m.group(2))
                theirs = layer_of(target) if target else None
                if theirs is not None and theirs > mine:
                    found.append(f"{rel}:{number}: {NAMES[mine]} includes {target} ({NAMES[theirs]})")
    return found


def self_test() -> int:
    """A tree with two planted upward includes (the tape including the reference, a kernel including a
    backend) beside allowed ones must give exactly those two violations, naming the files."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel, text in {
            "reference/reference.hpp": '#include <tapewise/core.hpp>\n',
            "include/tapewise/core.hpp": "",
            "cuda/tape/tape.cpp": '#include <tapewise/core.hpp>\n#include "reference.hpp"\n',
            "proptest/a_test.cpp": '#include "reference.hpp"\n',
            "cuda/kernels/program.hpp": "",
            "cuda/backends/engine.hpp": '#include "kernels/program.hpp"\n',
            "cuda/kernels/launch.cu": '#include "kernels/program.hpp"\n#include "backends/engine.hpp"\n',
        }.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        got = violations(root)
    want = ["cuda/kernels/launch.cu:2: cuda/kernels includes cuda/backends/engine.hpp (cuda/backends)",
            "cuda/tape/tape.cpp:2: cuda/tape includes reference/reference.hpp (reference)"]
    if got != want:
        print(f"check_layers self-test: expected {want}, got {got}", file=sys.stderr)
        return 1
    print("check_layers self-test: the planted violations are found and named")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    found = violations(args.root)
    for v in found:
        print(v, file=sys.stderr)
    if found:
        print(f"check_layers: {len(found)} include(s) of a higher layer (layers: {' < '.join(NAMES)})",
              file=sys.stderr)
        return 1
    print(f"check_layers: no file includes a higher layer ({' < '.join(NAMES)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
