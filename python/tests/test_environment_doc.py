"""docs/environment.md's table names every environment variable the project reads: getenv in C and C++,
os.environ in Python, ${NAME:-default} in the shell scripts (the variables a script only sets for what it
runs are not read by it, and loop variables are not in the environment)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["cuda", "conform", "prove", "bench", "python/src", "python/tapewise", "tools", "examples", "proptest"]
READS = [
    re.compile(r'getenv\("([A-Z][A-Z0-9_]+)"\)'),
    re.compile(r'environ(?:\.get)?[\[(]\s*["\']([A-Z][A-Z0-9_]+)["\']'),
    re.compile(r'\$\{([A-Z][A-Z0-9_]+):[-=]'),
]
# Read by the shell or a test harness for its own purpose, not as a setting of tapewise.
NOT_SETTINGS = {"HOME", "PATH", "SECONDS", "LC_ALL", "PYTHONPATH"}


def read_variables():
    found = {}
    for folder in SOURCES:
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in {".c", ".cpp", ".hpp", ".cu", ".py", ".sh"} or not path.is_file():
                continue
            text = path.read_text(errors="replace")
            for pattern in READS:
                for name in pattern.findall(text):
                    found.setdefault(name, str(path.relative_to(ROOT)))
    return {name: where for name, where in found.items() if name not in NOT_SETTINGS}


def test_every_variable_read_is_in_the_table():
    table = (ROOT / "docs" / "environment.md").read_text()
    variables = read_variables()
    assert "TAPEWISE_LOG" in variables and "TAPEWISE_MAP_SHAPE" in variables  # the scan sees the library
    missing = {name: where for name, where in variables.items() if f"`{name}`" not in table}
    assert not missing, f"read but not in docs/environment.md: {missing}"
