#!/usr/bin/env python3
"""conform/frameworks/answer.py — answers a `tapewise-conform vectors` folder with PyTorch, torch.compile
or JAX (adapters.py), writing every suite's out_*.npy and DIR/implementation.json.

    python3 conform/frameworks/answer.py --framework torch|torch-compile|jax|jax-jit [--device cpu|cuda] DIR
    python3 conform/frameworks/answer.py --framework jax --from VECTORS DIR     # copy VECTORS to DIR first

Then: tapewise-conform check DIR; python3 conform/frameworks/diff.py VECTORS DIR [DIR ...].
Exit status: 0 every suite answered, 1 some suite failed (listed), 2 usage error or framework missing.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import adapters  # noqa: E402
import suites  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", required=True, choices=adapters.FRAMEWORKS)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--from", dest="source", metavar="VECTORS", help="copy this vectors folder to DIR first")
    p.add_argument("dir", metavar="DIR", help="the vectors folder to answer (in place)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.source:
            suites.copy_vectors(args.source, args.dir)
        adapter = adapters.make_adapter(args.framework, args.device)
    except (ImportError, RuntimeError, FileExistsError) as e:
        print(f"answer.py: {args.framework}: {e}", file=sys.stderr)
        return 2
    info = adapters.answer_folder(adapter, args.dir, command=[sys.executable] + sys.argv)
    print(f"{info['framework']} {info['version']} on {info['device']}: answered {info['suites_answered']}/"
          f"{info['suites']} suites in {args.dir} ({info['elapsed_s']} s); "
          f"float32 scalars: {info['scalar_rounding'].get('result')}")
    for e in info["errors"]:
        print(f"  failed: {e['suite']}: {e['error']}")
    return 1 if info["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
