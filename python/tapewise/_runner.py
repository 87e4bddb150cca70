"""tapewise._runner — the console script `tapewise-conform` of a wheel: runs the conformance runner
the wheel carries (tapewise/bin/tapewise-conform, built by tools/build_wheel.sh), with the same
arguments, output and exit status."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

BUNDLED = Path(__file__).resolve().parent / "bin" / "tapewise-conform"


def bundled_runner() -> Optional[str]:
    """The runner inside the installed package, or None where this install has none (a `pip install .`
    without TAPEWISE_BUILD_TOOLS=ON builds only the module)."""
    return str(BUNDLED) if BUNDLED.is_file() and os.access(BUNDLED, os.X_OK) else None


def main() -> int:
    runner = bundled_runner()
    if runner is None:
        print(f"tapewise-conform: this install of tapewise has no runner ({BUNDLED} is missing): install a wheel "
              "built by tools/build_wheel.sh, or `pip install . -C cmake.define.TAPEWISE_BUILD_TOOLS=ON` (needs the "
              "test tools' packages), or build it with CMake (build/bin/tapewise-conform)", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execv(runner, [runner, *sys.argv[1:]])  # replaces this process: the runner's exit status is ours
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(main())
