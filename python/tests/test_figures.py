"""tools/figures.py --check, the staleness test of the documentation's figures and generated tables:
on a copy of the files it reads, it passes as committed and fails, naming what is stale and the
command that regenerates it, once a source JSON, a figure or a table drifts."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "figures.py"
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="not run from a source tree (no tools/figures.py)")


def figures_module():
    """tools/figures.py as a module: its lists of sources and tables."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import figures
    finally:
        sys.path.pop(0)
    return figures


@pytest.fixture
def tree(tmp_path):
    """The script, the documents, the figures and every source JSON, in their places under tmp_path."""
    figures = figures_module()
    sources = figures.ALL_SOURCES
    documents = {document for document, _ in figures.TABLES.values()}
    for relative in ["tools/figures.py", "docs/figures", *documents, *sources]:
        source, target = ROOT / relative, tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copyfile)(source, target)
    return tmp_path


def check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "tools/figures.py"), "--check", "--root", str(root)],
                          capture_output=True, text=True, timeout=120)


def test_the_committed_figures_and_tables_match_their_json(tree):
    done = check(tree)
    assert done.returncode == 0, done.stderr
    assert "figures and" in done.stdout and "tables match their JSON" in done.stdout


def test_a_changed_source_makes_its_figures_stale(tree):
    source = figures_module().CHAIN  # the chain's newest run, which chain_cost.svg is drawn from
    chain = tree / source
    chain.write_text(chain.read_text() + "\n")
    done = check(tree)
    assert done.returncode == 1
    assert (f"docs/figures/chain_cost.svg is stale: its source {source} "
            "changed (regenerate: python3 tools/figures.py)") in done.stderr
    assert "roofline.svg" not in done.stderr  # only the figures drawn from it


def test_an_edited_figure_or_table_is_stale(tree):
    figure = tree / "docs/figures/roofline.svg"
    figure.write_text(figure.read_text().replace("copy", "kopy", 1))
    accuracy = tree / "docs/accuracy.md"
    accuracy.write_text(accuracy.read_text().replace("| exp | 4294967296 |", "| exp | 4294967295 |", 1))
    done = check(tree)
    assert done.returncode == 1
    assert "docs/figures/roofline.svg is stale: the file differs from the one tools/figures.py wrote" in done.stderr
    assert ("docs/accuracy.md: table 'sweep-unary-f32' differs from what its JSON gives "
            "(regenerate: python3 tools/figures.py)") in done.stderr


def test_missing_markers_are_named(tree):
    performance = tree / "docs/performance.md"
    performance.write_text(performance.read_text().replace("<!-- figures.py: end chain-summary -->", ""))
    done = check(tree)
    assert done.returncode == 1
    assert "docs/performance.md: no '<!-- figures.py: chain-summary -->'" in done.stderr
