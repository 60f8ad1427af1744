"""The roll's reports name the checkout's folders relative to it and the cache by its variable:
nothing of the machine that ran it (reports/roll/ commits them as written)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchwheel.roll.paths import CACHE, machine_free, replacements
from patchwheel.workspace import Workspace


def test_checkout_and_cache_paths_become_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PATCHWHEEL_CACHE", str(cache))
    root = tmp_path / "checkout"
    pairs = replacements(Workspace.at(root))
    data = {
        "consumer": f"speculators (patched): {root}/vendor/vllm-0.34/speculators",
        "baseline": [f"{cache}/trees/sha256-{'a' * 64}", 3, None],
        "nested": {"report": f"see {root}/build/vllm-0.34/roll.md and {root}/patches/x"},
    }
    out = machine_free(data, pairs)
    assert out == {
        "consumer": "speculators (patched): vendor/vllm-0.34/speculators",
        "baseline": [f"{CACHE}/trees/sha256-{'a' * 64}", 3, None],
        "nested": {"report": "see build/vllm-0.34/roll.md and patches/x"},
    }
    assert str(tmp_path) not in str(out)
    assert machine_free("nothing to change", pairs) == "nothing to change"
