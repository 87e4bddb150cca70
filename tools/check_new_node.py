#!/usr/bin/env python3
"""tools/check_new_node.py — adding a node is loud: a throwaway 24th row, with a scalar name no node
has and the tie rule, appended to a copy of spec/ops.def, must make every piece of the library that
it still lacks fail to compile, each error naming the node. Run by ctest (adding_a_node_is_loud).

The pieces, in the order docs/adding-a-node.md fills them:
  1. a row that breaks a rule of the table (op.hpp: a tie whose same_parent is not `once`; a scalar
     without a contract) is refused naming the rule and the node;
  2. the C ABI has no pinned id for it (tapewise.h: TW_OP_<name>);
  3. no forward or fused VJP (op_math.cuh: OpMath<Op::<name>>), compiled for the CPU backend;
  4. no staging (spec/stagings.def: cuda/tape/staging.cpp asserts a forward and a vjp row per node);
  5. no MPFR transcription (reference.cpp: the switch misses the node);
  6. no bounds (spec/bounds.def: one TAPEWISE_BOUND row and one sweep record per node and dtype).
The data pieces read at run time (its special points, its section of spec/conventions.md) are
checked by tapewise_tests (SpecialPointsFile.LoadsAndCoversEveryOp,
ConventionsFile.HasASectionForEveryNodeInTableOrder), which name the node the same way.

  python3 tools/check_new_node.py --build build [--cxx g++]
Exit status: 0 when every piece fails as it should, 1 when one compiles or fails without naming
the node, 2 on bad usage. Compiles with -fsyntax-only: about a minute on two cores.
"""
import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE = "throwaway"
# A binary node with a scalar no other node has (k) and the tie rule: the columns a plain unary
# node would not exercise. Its aten and sweep columns say `none`: no ATen staging, not swept.
ROW = (f'TAPEWISE_OP({NODE}, 2, "k", "", any, -4, 4, 0, tie, {{same}}, normal, none, inputs, none,\n'
       '            ({1}), (), (),\n'
       '            "native: a test row")\n')
FLAGS = ["-std=c++20", "-fsyntax-only", "-ffp-contract=off", "-Werror=switch"]


def copy_tree(dest):
    for rel in ("include", "spec", "cuda", "reference", "third_party"):
        shutil.copytree(os.path.join(ROOT, rel), os.path.join(dest, rel),
                        ignore=shutil.ignore_patterns("__pycache__"))


def write_generated(dest, build, same_parent):
    """The build's generated headers (version), and the op table with the throwaway row appended."""
    generated = os.path.join(dest, "generated", "tapewise")
    os.makedirs(generated, exist_ok=True)
    for name in ("version.hpp", "version.h"):
        shutil.copy2(os.path.join(build, "include", "tapewise", name), generated)
    shutil.copy2(os.path.join(ROOT, "spec", "stagings.def"), generated)
    with open(os.path.join(ROOT, "spec", "ops.def")) as f:
        table = f.read()
    for path in (os.path.join(generated, "ops.def"), os.path.join(dest, "spec", "ops.def")):
        with open(path, "w") as f:
            f.write(table + ROW.replace("{same}", same_parent))


def pin_c_id(dest):
    """Gives the node the next C op id, as the guide's step 2 does."""
    path = os.path.join(dest, "include", "tapewise", "tapewise.h")
    with open(path) as f:
        text = f.read()
    last = "  TW_OP_softplus = 22,\n"
    if last not in text:
        raise RuntimeError("tapewise.h: TW_OP_softplus = 22 not found; update check_new_node.py's step 2")
    with open(path, "w") as f:
        f.write(text.replace(last, last + f"  TW_OP_{NODE} = 23,\n").replace("TW_OP_COUNT = 23", "TW_OP_COUNT = 24"))


def compile_errors(cxx, dest, source, extra=()):
    """The compiler's messages for one translation unit (empty when it compiles)."""
    includes = [os.path.join(dest, d) for d in ("generated", "include", "cuda", "reference")]
    cmd = [cxx, *FLAGS, *[f"-I{d}" for d in includes], "-I/usr/include/eigen3",
           "-idirafter", os.path.join(dest, "third_party", "tl-expected", "include"),
           "-idirafter", os.path.join(dest, "third_party", "dlpack", "include"), *extra,
           os.path.join(dest, source)]
    # LC_ALL=C: the compiler quotes names with ASCII quotes, whatever the caller's locale.
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    return "" if done.returncode == 0 else done.stderr


def expect_failure(name, messages, *needles):
    """One verdict line: the piece failed, and its messages hold every needle."""
    if not messages:
        return f"FAILED  {name}: compiled, though the node lacks it"
    missing = [n for n in needles if n not in messages]
    if missing:
        return f"FAILED  {name}: the error does not name {missing}:\n{messages[-1500:]}"
    return f"ok      {name}: refused, naming {', '.join(needles)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="a configured build folder (its include/tapewise has version.hpp)")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if not os.path.isfile(os.path.join(build, "include", "tapewise", "version.hpp")):
        print(f"check_new_node: {build} is not a configured build folder (no include/tapewise/version.hpp)",
              file=sys.stderr)
        return 2
    probe = os.path.join("include", "tapewise", "op_probe.cpp")
    with tempfile.TemporaryDirectory(prefix="tapewise_new_node_") as tmp:
        broken, dest = os.path.join(tmp, "broken"), os.path.join(tmp, "tree")
        for folder, same in ((broken, "twice"), (dest, "once")):
            copy_tree(folder)
            write_generated(folder, build, same)
            with open(os.path.join(folder, probe), "w") as f:
                f.write("#include <tapewise/op.hpp>\nint main() { return tapewise::kOpCount; }\n")
        checks = {
            "the table's rules": (broken, probe, ("kink_tie_passes_g_once_for_the_same_parent", f"Op::{NODE}")),
            "the C op id": (dest, "cuda/c_api/c_api.cpp", (f"TW_OP_{NODE}",)),
        }
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
            first = {name: pool.submit(compile_errors, args.cxx, tree, src) for name, (tree, src, _) in checks.items()}
            verdicts = [expect_failure(name, first[name].result(), *checks[name][2]) for name in checks]
            pin_c_id(dest)
            later = {
                "the forward and fused VJP": ("cuda/backends/cpu_backend.cpp", (f"Op::{NODE}",)),
                "the staging": ("cuda/tape/staging.cpp", (f"no forward and vjp staging for {NODE}",)),
                "the MPFR transcription": ("reference/reference.cpp", (f"'{NODE}' not handled in switch",)),
                "the bounds": ("reference/bounds.cpp", ("one_bound_row_per_node_and_dtype", f"Op::{NODE}")),
            }
            runs = {name: pool.submit(compile_errors, args.cxx, dest, src) for name, (src, _) in later.items()}
            verdicts += [expect_failure(name, runs[name].result(), *later[name][1]) for name in later]
        c_api_after_pin = compile_errors(args.cxx, dest, "cuda/c_api/c_api.cpp")
        if f"TW_OP_{NODE}" in c_api_after_pin:
            verdicts.append(f"FAILED  the C op id: still refused after TW_OP_{NODE} = 23 was pinned")
    for v in verdicts:
        print(v)
    failed = sum(v.startswith("FAILED") for v in verdicts)
    print(f"check_new_node: {len(verdicts) - failed} of {len(verdicts)} missing pieces of a new node "
          f"'{NODE}' are refused by the build, each naming it")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
