"""The audit inside `build`: the hook refuses drift unless allowed, and says what it saw."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from patchwheel.audit import MypyEngine
from patchwheel.audit.target import audit_trees, build_hook
from patchwheel.config.audit import AuditSpec
from patchwheel.errors import AuditError, BuildError
from tests.audit._sample import CONSUMER, PROVIDER, line_of, write_tree

TARGET = SimpleNamespace(
    name="tiny-target", audit=AuditSpec(), projects=()
)  # no provider variants to audit


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


# A second consumer, as hs-connectors is beside speculators: it builds a Request without the
# keyword the mutant provider dropped, so the contract still holds for it.
PLUGIN = {
    "pyproject.toml": """
        [project]
        name = "plug"
        version = "1.0"
        dependencies = ["prov==1.0"]
        """,
    "plug/__init__.py": "",
    "plug/requests.py": """
        from prov.request import Request


        def one(ids: list[int]) -> Request:
            return Request("r0", ids)
        """,
}


def test_every_consumer_of_the_target_is_audited(
    trees: tuple[dict[str, Path], Path], engine: MypyEngine, tmp_path: Path
) -> None:
    vendor, baseline = trees
    vendor["plug"] = write_tree(tmp_path / "vendor" / "plug", PLUGIN)
    target = SimpleNamespace(
        name="two-consumers",
        audit=AuditSpec("vllm", ("speculators", "plug"), str(baseline)),
        projects=(),  # no provider variants to audit
    )
    out = io.StringIO()
    entry = build_hook(True, engine=engine, console=Console(file=out, soft_wrap=True))(
        target, vendor
    )
    # The target's baseline (no --baseline given) serves both; each consumer has its summary.
    assert set(entry["consumers"]) == {"speculators", "plug"}
    assert entry["consumers"]["plug"]["findings"] == 0
    assert entry["consumers"]["speculators"]["findings"] == 1
    assert entry["findings"] == 1 and entry["allowed"] is True
    assert entry["baseline"] == str(baseline)
    assert "plug" in out.getvalue()

    with pytest.raises(BuildError) as raised:
        build_hook(False, engine=engine, console=Console(file=io.StringIO()))(target, vendor)
    message = str(raised.value)
    assert "the patched speculators still has 1 signature drift(s) against vllm" in message
    assert "patches/two-consumers/speculators/" in message and "plug" not in message

    # A consumer the target does not build: not audited, and said so.
    del vendor["plug"]
    entry = build_hook(False, engine=engine)(target, vendor)
    assert entry == {"skipped": "the target does not build speculators, plug and vllm"}
