"""Bisect on a real vLLM-shaped git history with real audits (mypy on the provider's sources)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from patchwheel.audit import MypyEngine
from patchwheel.bisect.run import store_report
from tests.bisect import _history
from tests.bisect.conftest import Ran, run_bisect

PATCH = "0001-generator-warm-up-and-resolve-the-KV-layout-after-in.patch"


def test_the_planted_breaking_commit_in_at_most_seven_runs(
    breaking: Ran, setup: _history.Setup
) -> None:
    report, commits = breaking.report, setup.history.commits
    assert report.steps == _history.BAD >= 64
    assert [s.key.detail for s in report.at_good] == []
    assert sorted(str(s.key) for s in report.at_bad) == sorted(
        str(f.subject.key) for f in report.flips
    )
    flip, _hook = report.flips  # by commit: eos_token_id (step 41), then the hook (step 60)
    assert flip.subject.key.kind == "unexpected-argument"
    assert flip.subject.key.detail == "eos_token_id"
    assert flip.change == "appears"
    assert flip.commit.id == commits[_history.APPEARS]
    assert flip.parent.id == commits[_history.APPEARS - 1]
    assert flip.position == _history.APPEARS
    assert flip.commit.subject == "[Frontend] Drop eos_token_id from Request (#1041)"
    assert flip.commit.pr == 1041
    assert flip.commit.date.startswith("2026-05-30T")
    assert flip.audit_runs <= 7
    # The two ends, then the log2 steps, shared by both findings (at most 7 more for both).
    assert flip.audit_runs + 2 <= len(report.runs) <= 2 + 7 + 7
    assert len({r.revision for r in report.runs}) == len(report.runs)  # never twice
    assert "eos_token_id: int | None = None" in flip.old
    assert flip.new == "Request(request_id: str, prompt_token_ids: list[int])"
    assert flip.changes == ("parameter eos_token_id removed",)
    assert flip.subject.patch is None  # the call is upstream speculators' own line


def test_an_override_finding_is_followed_to_the_commit_that_changed_the_base(
    breaking: Ran, setup: _history.Setup
) -> None:
    """The consumer's connector overrides ``KVConnectorBase.save``; step 60 adds a required
    ``kv_layer`` to the base, which the override does not accept."""
    report, commits = breaking.report, setup.history.commits
    hook = next(f for f in report.flips if f.subject.key.kind == "override-signature")
    assert hook.subject.key.detail == "kv_layer"
    assert hook.subject.key.anchor == "src/speculators/connector.py:5:4"
    assert hook.subject.symbol == "vllm.v1.connector.KVConnectorBase.save"
    assert hook.change == "appears"
    assert hook.commit.id == commits[_history.HOOK]
    assert hook.commit.subject == "[KV Connector] Pass the layer to save (#1060)"
    # Both sides are the base's hook as the provider declares it around the commit.
    assert hook.old == "save(layer_name: str) -> None"
    assert hook.new == "save(layer_name: str, kv_layer: int) -> None"
    assert hook.changes == ("new required parameter kv_layer",)
    assert hook.audit_runs <= 7


def test_findings_that_disappear_share_their_runs(answered: Ran, setup: _history.Setup) -> None:
    report, commits = answered.report, setup.history.commits
    assert report.steps == _history.BAD
    by_detail = {f.subject.key.detail: f for f in report.flips}
    assert sorted(by_detail) == ["compile_or_warm_up_model", "get_supported_layouts", "set_layout"]
    for name, step in (
        ("compile_or_warm_up_model", _history.ADDED),
        ("get_supported_layouts", _history.ADDED),
        ("set_layout", _history.LAYOUT),
    ):
        flip = by_detail[name]
        assert flip.change == "disappears"
        assert flip.commit.id == commits[step], name
        assert flip.subject.patch == PATCH
        assert flip.audit_runs <= 7
        assert flip.old.endswith(f"MultiprocExecutor.{name} (absent)")
        assert flip.changes == (f"{name} was added",)
    assert by_detail["compile_or_warm_up_model"].new == "compile_or_warm_up_model() -> None"
    assert by_detail["set_layout"].new == "set_layout(layout_name: str) -> None"
    # One run tells the status of every finding: the two at step 23 cost nothing extra, and
    # the search for step 50 reuses the first probes.
    same = by_detail["compile_or_warm_up_model"].probes
    assert by_detail["get_supported_layouts"].probes == same
    steps = len(report.runs) - 2
    assert steps < sum(f.audit_runs for f in report.flips)
    assert (
        steps
        < by_detail["compile_or_warm_up_model"].audit_runs + by_detail["set_layout"].audit_runs
    )


def test_a_finding_present_at_both_ends_is_beyond_the_history(answered: Ran) -> None:
    report = answered.report
    (kept,) = report.unchanged
    assert kept.key.kind == "missing-module" and kept.key.detail == "resolve_layout"
    assert kept.patch == PATCH
    assert report.source["later_on_main_line"] == 0
    note = report.unchanged_note()
    assert "present at both ends" in note
    assert "beyond the available history" in note
    markdown = report.to_markdown()
    assert "## Present at both ends" in markdown and "beyond the available history" in markdown


def test_progress_is_shown_per_step(answered: Ran) -> None:
    lines = [line for line in answered.output.splitlines() if " run " in line]
    assert len(lines) == len(answered.report.runs)
    assert "(good," in lines[0] and "(bad," in lines[1]
    timings = [line for line in answered.output.splitlines() if "audit " in line and " s" in line]
    assert len(timings) == len(answered.report.runs)


def test_reports_json_and_markdown(breaking: Ran, setup: _history.Setup, tmp_path: Path) -> None:
    report = breaking.report
    written = store_report(_history.workspace(setup), report, tmp_path / "copy")
    target_dir = setup.root / "build" / "old"
    assert target_dir.is_symlink()  # the target's output link, as a build makes it
    assert (target_dir / "bisect.json") in written and (tmp_path / "copy" / "bisect.md") in written
    data = json.loads((target_dir / "bisect.json").read_text())
    assert data["schema"] == "patchwheel.bisect/1"
    assert data["audit_runs"] == len(report.runs) == len(data["runs"])
    flip, hook = data["flips"]
    assert hook["commit"]["id"] == setup.history.commits[_history.HOOK]
    assert flip["commit"]["id"] == setup.history.commits[_history.APPEARS]
    assert flip["commit"]["pr"] == 1041
    assert flip["signature"]["changes"] == ["parameter eos_token_id removed"]
    assert data["source"]["later_on_main_line"] == _history.NEWEST - _history.BAD
    md = (tmp_path / "copy" / "bisect.md").read_text()
    assert setup.history.commits[_history.APPEARS] in md
    assert "| unexpected-argument eos_token_id at src/speculators/generator.py:12:11 |" in md
    assert "widen the range" not in md  # no finding at both ends here


def test_releases_bracket_the_change(
    setup: _history.Setup,
    engine: MypyEngine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATCHWHEEL_INDEX_URL", _history.release_index(setup.history, tmp_path))
    ran = run_bisect(setup, engine, "new", "vllm==0.1.0", "vllm==0.2.0")
    report = ran.report
    assert report.mode == "releases"
    assert (report.good.id, report.bad.id, report.steps) == ("vllm==0.1.0", "vllm==0.2.0", 4)
    assert report.source["releases"] == [
        "vllm==0.1.0",
        "vllm==0.1.1",
        "vllm==0.1.2",
        "vllm==0.1.3",
        "vllm==0.2.0",
    ]  # the pre-release 0.2.0rc1 is no step
    found = {f.subject.key.detail: (f.parent.id, f.commit.id) for f in report.flips}
    assert found == {
        "compile_or_warm_up_model": ("vllm==0.1.0", "vllm==0.1.1"),
        "get_supported_layouts": ("vllm==0.1.0", "vllm==0.1.1"),
        "set_layout": ("vllm==0.1.2", "vllm==0.1.3"),
    }
    (kept,) = report.unchanged
    assert kept.key.detail == "resolve_layout"
    assert report.source["later_on_main_line"] == 1  # 0.3.0 is on the index
    assert "widen the range" in report.unchanged_note()


def test_the_consumer_history_against_a_fixed_provider(
    setup: _history.Setup, engine: MypyEngine, tmp_path: Path
) -> None:
    """``--project speculators``: upstream speculators fixed the call itself at its commit 5."""
    baseline = tmp_path / "vllm-0.1.0"
    baseline.mkdir()
    archive = subprocess.run(
        ["git", "archive", "v0.1.0"], cwd=setup.history.repo, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive, check=True)
    ran = run_bisect(
        setup,
        engine,
        "new",
        "v0.3.0",
        "v0.4.0",
        project="speculators",
        repo=setup.consumer,
        baseline=str(baseline),
    )
    report = ran.report
    assert report.moving == "consumer" and report.steps == _history.CONSUMER_STEPS
    (flip,) = report.flips
    assert flip.subject.key.anchor == "vllm.v1.request.Request"
    assert (flip.subject.key.kind, flip.subject.key.detail) == (
        "unexpected-argument",
        "eos_token_id",
    )
    assert flip.change == "disappears" and flip.position == _history.CONSUMER_FIX
    assert flip.commit.subject == "Stop passing eos_token_id (#205)"
    assert flip.old.startswith("src/speculators/generator.py:7: return Request(")
    assert flip.new.startswith("(no unexpected-argument use of vllm.v1.request.Request")
    assert flip.audit_runs <= 4
