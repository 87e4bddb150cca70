#!/usr/bin/env python3
"""tools/check_exports.py — the shared library exports its public API and nothing else: every dynamic
symbol libtapewise.so defines is the C ABI (tw_*) or a name of namespace tapewise outside its detail
namespace (with its classes' vtables and typeinfo); none is the engine's (tapewise::detail, Prim, the
staged forms), a standard-library or tl-expected instantiation, or the CUDA runtime's. The public API's
landmarks must be there, so an empty or stripped table fails too. Reads `nm -D --defined-only -C`.

  python3 tools/check_exports.py LIBRARY.so     check a built shared library (test_package.sh does)
  python3 tools/check_exports.py --self-test    check that planted violations are found
"""
import argparse
import re
import subprocess
import sys

# What the linker itself defines in every shared object.
LINKER_SYMBOLS = {"_init", "_fini", "__bss_start", "_edata", "_end", "__end__", "__bss_end__"}
PUBLIC = re.compile(r"^(?:tw_\w+$|(?:(?:typeinfo name|typeinfo|vtable|VTT) for )?tapewise::(?!detail::))")
# Public names that would still be wrong to export: the engine's vocabulary outside tapewise::detail.
INTERNAL = re.compile(r"\bPrim\b|staged_vjp|staged_forward|run_program|inject_allocation_failure")
# Landmarks of the public API, one per header, that a correct library defines.
REQUIRED = ["tw_version", "tw_tape_backward", "tapewise::make_cpu_backend()", "tapewise::Tape::backward(",
            "tapewise::Backend::allocate(", "tapewise::Shape::numel() const", "tapewise::error_code_name("]


def defined_symbols(library):
    done = subprocess.run(["nm", "-D", "--defined-only", "-C", library], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"check_exports: nm -D {library} failed: {done.stderr.strip()}")
    names = []
    for line in done.stdout.splitlines():
        parts = line.split(maxsplit=2)  # address, type, name
        if len(parts) == 3:
            names.append(parts[2].split("@")[0])
    return names


def violations(names):
    """Every line wrong with a list of exported names: an unwanted export, or a landmark missing."""
    wrong = [f"exported but not public API: {n}" for n in names
             if n not in LINKER_SYMBOLS and (not PUBLIC.match(n) or INTERNAL.search(n))]
    wrong += [f"public API not exported: {r}" for r in REQUIRED if not any(n.startswith(r) for n in names)]
    return wrong


def self_test():
    good = ["tw_version", "tw_tape_backward", "tapewise::make_cpu_backend()", "_end",
            "tapewise::Tape::backward(long, tapewise::Buffer const&, tapewise::VjpPath) const",
            "tapewise::Backend::allocate(tapewise::Shape const&, tapewise::DType, tapewise::AllocTag)",
            "tapewise::Shape::numel() const", "tapewise::error_code_name(tapewise::ErrorCode)",
            "vtable for tapewise::Backend", "typeinfo name for tapewise::Backend"]
    planted = {"tapewise::detail::Engine::inject_allocation_failure(long)", "std::vector<int>::reserve(unsigned long)",
               "tapewise::staged_vjp(tapewise::Backend&)", "tapewise::prim_name(tapewise::Prim)", "cudaMalloc",
               "vtable for tapewise::detail::Engine"}
    if violations(good):
        sys.exit(f"check_exports self-test: a clean table was refused: {violations(good)}")
    found = violations(good + sorted(planted))
    missed = [p for p in planted if not any(p in line for line in found)]
    if missed:
        sys.exit(f"check_exports self-test: planted exports not found: {missed}")
    if not violations(good[1:]):
        sys.exit("check_exports self-test: a missing landmark (tw_version) was not found")
    print("check_exports self-test: planted exports and a missing landmark are found and named")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("library", nargs="?", help="the shared library (libtapewise.so)")
    ap.add_argument("--self-test", action="store_true", help="check that planted violations are found")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.library:
        ap.error("a library, or --self-test")
    names = defined_symbols(args.library)
    wrong = violations(names)
    for line in wrong:
        print(f"check_exports: {args.library}: {line}", file=sys.stderr)
    if wrong:
        sys.exit(1)
    print(f"check_exports: {args.library} exports {len(names)} symbols, all public API "
          f"({sum(n.startswith('tw_') for n in names)} of the C ABI)")


if __name__ == "__main__":
    main()
