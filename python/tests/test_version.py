"""One version: the package's (pyproject.toml reads it from CMakeLists.txt), tapewise.__version__
(compiled from the CMake project's) and the CMake project's are the same."""

import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

import tapewise

REPO = Path(__file__).resolve().parents[2]


def cmake_project_version() -> str:
    cmake = (REPO / "CMakeLists.txt").read_text()
    return re.search(r"project\(\s*tapewise\s+VERSION\s+([0-9.]+)", cmake).group(1)


def test_the_version_is_the_cmake_projects():
    assert tapewise.__version__ == cmake_project_version()
    assert metadata.version("tapewise") == cmake_project_version()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_pyproject_reads_the_version_from_cmake():
    import tomllib
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    provider = pyproject["tool"]["scikit-build"]["metadata"]["version"]
    assert provider["provider"] == "scikit_build_core.metadata.regex" and provider["input"] == "CMakeLists.txt"
    assert re.search(provider["regex"], (REPO / "CMakeLists.txt").read_text()).group("value") == cmake_project_version()
