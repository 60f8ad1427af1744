"""The audit inside `build`: the hook refuses drift unless allowed, and says what it saw."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from patchwheel.audit import MypyEngine
from patchwheel.audit.target import audit_trees, build_hook
from patchwheel.errors import AuditError, BuildError
from tests.audit._sample import CONSUMER, PROVIDER, line_of, write_tree

TARGET = SimpleNamespace(name="tiny-target")


@pytest.fixture
def trees(tmp_path: Path) -> tuple[dict[str, Path], Path]:
    """A target's vendor trees (consumer "speculators", provider "vllm") and the baseline."""
    baseline = write_tree(tmp_path / "prov-1.0", PROVIDER)
    mutant = dict(PROVIDER)
    mutant["prov/request.py"] = mutant["prov/request.py"].replace(
        ", eos_token_id: int | None = None", ""
    )
    trees = {
        "speculators": write_tree(tmp_path / "vendor" / "speculators", CONSUMER),
        "vllm": write_tree(tmp_path / "vendor" / "vllm", mutant),
    }
    return trees, baseline


def test_drift_stops_the_build(trees: tuple[dict[str, Path], Path], engine: MypyEngine) -> None:
    vendor, baseline = trees
    hook = build_hook(
        False, baseline=baseline, engine=engine, console=Console(file=io.StringIO(), soft_wrap=True)
    )
    with pytest.raises(BuildError) as raised:
        hook(TARGET, vendor)
    message = str(raised.value)
    line = line_of(vendor["speculators"] / "src/cons/generator.py", "Request(request_id=")
    assert "target tiny-target" in message
    assert f"unexpected-argument prov.request.Request at src/cons/generator.py:{line}" in message
    assert "--allow-audit-findings" in message


def test_allowed_drift_is_recorded(trees: tuple[dict[str, Path], Path], engine: MypyEngine) -> None:
    vendor, baseline = trees
    out = io.StringIO()
    hook = build_hook(
        True, baseline=baseline, engine=engine, console=Console(file=out, soft_wrap=True)
    )
    entry = hook(TARGET, vendor)
    assert entry["allowed"] is True
    assert entry["findings"] == 1
    assert entry["symbols"] == ["unexpected-argument:prov.request.Request"]
    assert entry["baseline"] == str(baseline)
    line = line_of(vendor["speculators"] / "src/cons/generator.py", "Request(request_id=")
    assert f"unexpected-argument src/cons/generator.py:{line}" in out.getvalue()


def test_clean_target_passes(trees: tuple[dict[str, Path], Path], engine: MypyEngine) -> None:
    vendor, baseline = trees
    vendor["vllm"] = baseline
    entry = build_hook(
        False, baseline=baseline, engine=engine, console=Console(file=io.StringIO(), soft_wrap=True)
    )(TARGET, vendor)
    assert entry["findings"] == 0 and entry["allowed"] is False


def test_a_target_without_the_consumer(engine: MypyEngine, tmp_path: Path) -> None:
    with pytest.raises(AuditError, match="no speculators project to audit"):
        audit_trees({"vllm": tmp_path}, engine=engine)
    entry = build_hook(False, engine=engine)(TARGET, {"vllm": tmp_path})
    assert entry == {"skipped": "the target does not build both speculators and vllm"}


PLUGIN = {
    "pyproject.toml": '[project]\nname = "hs-connectors"\nversion = "0.9"\n',
    "src/hs_connectors/__init__.py": "",
    "src/hs_connectors/executor.py": """
        from prov.executor.abstract import Executor


        class PluginExecutor(Executor):
            def initialize_from_config(self, kv_cache_configs: list[int]) -> None: ...
        """,
}


def test_several_consumers_of_one_target(
    trees: tuple[dict[str, Path], Path], engine: MypyEngine
) -> None:
    """speculators and hs-connectors against one provider: each with its baseline, one report
    each, one manifest entry; the build stops naming both series."""
    vendor, baseline = trees
    mutant = dict(PROVIDER)
    mutant["prov/request.py"] = mutant["prov/request.py"].replace(
        ", eos_token_id: int | None = None", ""
    )
    mutant["prov/executor/abstract.py"] = mutant["prov/executor/abstract.py"].replace(
        "kv_cache_configs: list[int]) -> None", "kv_cache_configs: list[int], blocks: int) -> None"
    )
    vendor["vllm"] = write_tree(vendor["vllm"].parent / "vllm-2", mutant)
    vendor["hs-connectors"] = write_tree(vendor["vllm"].parent / "hs-connectors", PLUGIN)
    out = io.StringIO()
    consumers = ("speculators", "hs-connectors")
    # hs-connectors declares no provider version: the target names its baseline.
    baselines = {"hs-connectors": baseline}
    entry = build_hook(
        True,
        consumers=consumers,
        baseline=baseline,
        baselines=baselines,
        engine=engine,
        console=Console(file=out, soft_wrap=True, width=300),
    )(TARGET, vendor)
    assert entry["allowed"] is True and entry["findings"] == 3
    assert [(c["consumer"], c["findings"]) for c in entry["consumers"]] == [
        ("speculators (patched)", 2),
        ("hs-connectors (patched)", 1),
    ]
    assert (
        "override-signature:prov.executor.abstract.Executor.initialize_from_config"
        in (entry["symbols"])
    )
    text = out.getvalue()
    assert "API-drift audit hs-connectors (patched) against vllm (patched)" in text
    assert "PluginExecutor.initialize_from_config overrides Executor.initialize_from_config" in (
        text
    )
    with pytest.raises(BuildError) as raised:
        build_hook(
            False,
            consumers=consumers,
            baseline=baseline,
            baselines=baselines,
            engine=engine,
            console=Console(file=io.StringIO()),
        )(TARGET, vendor)
    message = str(raised.value)
    assert "the patched speculators and hs-connectors still have 3 API drift(s)" in message
    assert "patches/tiny-target/speculators/, patches/tiny-target/hs-connectors/" in message
    # A consumer the target does not build is left out; none at all: not audited.
    del vendor["speculators"]
    only = build_hook(
        True, consumers=consumers, baselines=baselines, engine=engine, console=Console(file=out)
    )(TARGET, vendor)
    assert only["findings"] == 1 and "consumers" not in only
    del vendor["hs-connectors"]
    skipped = build_hook(True, consumers=consumers, engine=engine)(TARGET, vendor)
    assert skipped == {
        "skipped": "the target does not build vllm and one of speculators, hs-connectors"
    }
