"""The committed targets as they are: built from the repository's patches/, audit on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import support
from tests.conftest import copy_tree


@pytest.mark.network
@pytest.mark.slow
def test_the_committed_vllm_0_26_target_builds_with_the_audit_and_no_drift(
    tmp_path: Path, shared_cache_dir: Path
) -> None:
    """README says vllm-0.26 has no drift: a build with the audit on (no allowance) proves it."""
    root = tmp_path / "root"
    copy_tree(support.REPO_ROOT / "patches", root / "patches")

    result = support.patchwheel(root, "build", "--target", "vllm-0.26", cache=shared_cache_dir)

    assert result.returncode == 0, result.stderr[-4000:]
    manifest = json.loads((root / "build" / "vllm-0.26" / "manifest.json").read_text())
    audit = manifest["audit"]
    assert "skipped" not in audit, audit
    # the provider audited is the target's own (patched) vLLM, pinned at 0.26.0
    assert audit["provider"] == "vllm (patched)", audit
    assert manifest["pins"]["vllm"]["pin"] == "vllm==0.26.0", manifest["pins"]
    assert audit["findings"] == 0 and audit["symbols"] == [], audit
    assert audit["allowed"] is False
    versions = {w["distribution"]: w["version"] for w in manifest["wheels"]}
    assert versions["vllm"].startswith("0.26.0") and "+pw" in versions["speculators"]
