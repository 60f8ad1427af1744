"""The rebase report's advice from a patch's DEP-3 header read against the new pins."""

from __future__ import annotations

import pytest
from packaging.version import Version

from patchwheel.patching.patches import parse_patch
from patchwheel.rebase.report import drop_when_holds, notes_for
from tests import support


def test_drop_when_and_vllm_change_advice() -> None:
    versions = {"vllm": Version("0.11.0"), "speculators": Version("0.3.0")}
    assert drop_when_holds("speculators pin >= 0.4.0 or vLLM pin < 0.12", versions)
    assert not drop_when_holds("speculators pin >= 0.4.0", versions)
    assert not drop_when_holds("when upstream fixes it", versions)
    assert not drop_when_holds("vLLM pin < 0.12 and torch pin > 2", versions)  # unknown: no
    series = support.REPO_ROOT / "patches/pools/speculators-0.3.0"
    data = series / "v0.16-0001-data_generation-stop-passing-kv_cache_specs-to-get_k.patch"
    if not data.is_file():
        pytest.skip("the vllm-0.16 series is not in this checkout")
    notes = notes_for(parse_patch(data.name, data.read_bytes()), versions)
    assert any(n.startswith("Drop-When holds") for n in notes)
    assert any("Vllm-Change names vLLM 0.16.0, newer than the new pin" in n for n in notes)
