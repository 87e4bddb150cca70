"""tools/figures.py --check, the staleness test of the documentation's figures and generated tables:
on a copy of the files it reads, it passes as committed and fails, naming what is stale and the
command that regenerates it, once a source JSON, a figure or a table drifts."""

import json
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


def run_figures(root: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "tools/figures.py"), *options, "--root", str(root)],
                          capture_output=True, text=True, timeout=300)


def set_measurement(path: Path, shape_row: int, key: str, literal: str) -> None:
    """Writes `literal` (NaN, null) as row `shape_row`'s `key` in the chain's JSON, as a writer would."""
    data = json.loads(path.read_text())
    data["chain"][shape_row][key] = "__MEASUREMENT__"
    path.write_text(json.dumps(data).replace('"__MEASUREMENT__"', literal))


@pytest.mark.parametrize("literal, shown", [("NaN", "nan"), ("null", "null"), ("Infinity", "inf")])
def test_a_measurement_that_is_no_number_is_refused_by_name(tree, literal, shown):
    """A NaN (or the null a JSON writer makes of it) is neither drawn as a gap, printed as "-", nor
    left out of the strongest-peer conclusions: --check and a regeneration both stop, exit status 2,
    naming the file and the measurement, and write nothing."""
    source = figures_module().CHAIN
    set_measurement(tree / source, 0, "eager_us_per_node", literal)
    done = run_figures(tree, "--check")
    assert done.returncode == 2, done.stderr
    assert f"{source}.chain[0].eager_us_per_node is {shown}" in done.stderr
    assert "Traceback" not in done.stderr
    pytest.importorskip("matplotlib", reason="regenerating needs matplotlib")
    before = {p: p.read_bytes() for p in [*(tree / "docs").rglob("*.md"), *(tree / "docs/figures").iterdir()]}
    done = run_figures(tree)
    assert done.returncode == 2 and f"{source}.chain[0].eager_us_per_node is {shown}" in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in before} == before


def test_a_missing_input_is_a_clear_error_not_a_stale_figure(tree):
    source = figures_module().KERNELS
    (tree / source).unlink()
    done = run_figures(tree, "--check")
    assert done.returncode == 2, done.stderr  # 1 says "stale": regenerating would not help
    assert f"cannot read {tree / source}" in done.stderr or f"cannot read {source}" in done.stderr
    assert "No such file or directory" in done.stderr and "Traceback" not in done.stderr
    (tree / "docs/performance.md").unlink()
    done = run_figures(tree, "--check")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr


def test_the_chain_is_shown_as_medians_over_every_call_of_the_current_code():
    """The chain's summary and figure give each size's median over every call with its range, not
    the first (fastest) call's time, and the figure draws all three shapes."""
    import statistics
    figures = figures_module()
    calls = [json.loads((ROOT / source).read_text()) for source in figures.CHAIN_CALLS]
    unary_2e12 = [row["us_per_node"] for call in calls for row in call["chain"]
                  if row["shape"] == "unary" and row["log2n"] == 12]
    assert len(unary_2e12) == 7
    expected = (f"| unary | 2^12 | **{statistics.median(unary_2e12):#.3g} ({min(unary_2e12):#.3g}–"
                f"{max(unary_2e12):#.3g}, 7 calls)** |")
    assert expected in (ROOT / "docs/performance.md").read_text()
    svg = (ROOT / "docs/figures/chain_cost.svg").read_text()
    for shape in ("unary", "binary", "fanout"):
        assert f"{shape} (" in svg
    assert "tapewise (median; bars: fastest–slowest call)" in svg


def test_error_against_input_draws_the_bounds_and_names_its_sampling():
    figures = figures_module()
    assert figures.sampling_text([{"stride": 1}]) == "every bit pattern"
    assert [figures.ordinal(k) for k in (2, 3, 4, 11, 21, 112)] == ["2nd", "3rd", "4th", "11th", "21st", "112th"]
    assert figures.sampling_text([{"stride": 3}, {"stride": 4}]) == "every 3rd or 4th bit pattern"
    svg = (ROOT / "docs/figures/error_vs_input.svg").read_text()
    assert "every bit pattern" in svg and "1th" not in svg
    assert "bound's ulp part" in svg and "bound 4.0+1.5eps, used 0.50" in svg  # sigmoid's dx: 10^7 ulps, inside
