"""The documents' claims of equal bits between two ways of running the same graph (a tape program or
one kernel per node, the interpreter or a compiled piece, the CPU or the GPU, tapewise.torch or
Tape.backward) say "up to NaN": those ways may give NaNs of different sign and payload, so a plain
"same bits" would be false for NaN results."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
pytestmark = pytest.mark.skipif(not (ROOT / "docs").is_dir(), reason="not run from a source tree (no docs/)")

BITS_CLAIM = re.compile(r"same bits|bits are those|bit-identical|Tape\.backward's bits", re.I)
TWO_WAYS = re.compile(r"program|piece|interpreter|per-node|one kernel per node|Tape\.backward|CPU and the GPU", re.I)


def sentences(text: str):
    """The sentences of a Markdown text: each paragraph, list item, table row and code line apart."""
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*|#]|\d+\.)\s)|\n(?=```)", text):
        if block.lstrip().startswith("```"):
            yield from block.splitlines()
            continue
        flat = " ".join(block.split())
        yield from re.split(r"(?<=[.;])\s+(?=[A-Z(`*])", flat)


def test_equal_bits_between_two_ways_of_running_are_claimed_up_to_nan():
    unqualified = [f"{path.relative_to(ROOT)}: {sentence[:200]}"
                   for path in DOCUMENTS for sentence in sentences(path.read_text())
                   if BITS_CLAIM.search(sentence) and TWO_WAYS.search(sentence) and "NaN" not in sentence]
    assert not unqualified, "claims of the same bits without 'up to NaN':\n" + "\n".join(unqualified)


def test_the_glossary_says_what_up_to_nan_payload_allows():
    glossary = (ROOT / "docs/glossary.md").read_text()
    assert "bit-identical up to NaN payload" in glossary and "sign and payload may differ" in glossary
