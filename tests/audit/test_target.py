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

TARGET = SimpleNamespace(name="tiny-target", projects=())  # no provider variants to audit


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
