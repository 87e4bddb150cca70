"""The HTML API reference (tools/api_docs.sh, Doxygen over the installed headers): its main page says
what the reference covers, and each declaration carries its own comment (a Doxygen comment after a
forward declaration once documented tw_backend with DLPack's line, and namespace tapewise too)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "api_docs.sh"
pytestmark = [pytest.mark.skipif(not SCRIPT.exists(), reason="not run from a source tree (no tools/api_docs.sh)"),
              pytest.mark.skipif(shutil.which("doxygen") is None, reason="doxygen is not installed")]


@pytest.fixture(scope="module")
def xml(tmp_path_factory):
    build = tmp_path_factory.mktemp("api-docs")
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "TAPEWISE_DOCS_BUILD": str(build)})
    assert done.returncode == 0, done.stdout + done.stderr
    return build / "docs/api/xml"


def brief(xml_text: str, kind: str, name: str) -> str:
    for block in re.findall(rf'<memberdef kind="{kind}".*?</memberdef>', xml_text, re.S):
        if re.search(rf"<name>{re.escape(name)}</name>", block):
            text = re.search(r"<briefdescription>(.*?)</briefdescription>", block, re.S).group(1)
            return " ".join(re.sub(r"<[^>]+>", "", text).split())
    raise AssertionError(f"no {kind} {name} in the reference")


def test_the_main_page_says_what_the_reference_covers(xml):
    page = (xml / "indexpage.xml").read_text()
    assert "tapewise API reference" in page
    for entry in ("tapewise::Tape", "make_cpu_backend", "tw_last_error", "docs/cpp.md"):
        assert entry in page, entry


def test_the_handles_and_the_namespace_carry_their_own_comments(xml):
    c_abi = (xml / "tapewise_8h.xml").read_text()
    for handle, what in (("tw_backend", "a backend"), ("tw_tape", "a tape"), ("tw_buffer", "a buffer"),
                         ("tw_gradients", "the gradients")):
        assert brief(c_abi, "typedef", handle).startswith(f"Opaque handle: {what}"), handle
    namespace = (xml / "namespacetapewise.xml").read_text()
    # The forward declaration of DLManagedTensor's line documented nothing of its own (both headers).
    assert "include it to exchange tensors" not in c_abi
    assert "callers that exchange tensors include it" not in namespace
