"""`patchwheel audit` end to end on real trees: human output, JSON report, exit status."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from patchwheel.cli.audit import add_audit_parser, main_audit
from patchwheel.config.audit import AuditSpec
from tests.audit._sample import CONSUMER, PROVIDER, write_tree


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path, Path]:
    consumer = write_tree(tmp_path / "cons", CONSUMER)
    baseline = write_tree(tmp_path / "prov-1.0", PROVIDER)
    mutant = dict(PROVIDER)
    mutant["prov/sched.py"] = mutant["prov/sched.py"].replace(
        "kv_cache_config: int) -> None:", "kv_cache_config: int, block_size: int) -> None:"
    )
    provider = write_tree(tmp_path / "prov-2.0", mutant)
    return consumer, provider, baseline


def test_findings_exit_1_with_both_locations_and_a_json_report(
    trees: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    consumer, provider, baseline = trees
    report_path = tmp_path / "out" / "audit.json"
    status = main_audit(
        [
            "--consumer", str(consumer),
            "--provider", str(provider),
            "--baseline", str(baseline),
            "--json", str(report_path),
            "--cache-dir", str(tmp_path / "cache"),
        ]
    )  # fmt: skip
    assert status == 1
    out = capsys.readouterr().out
    # Grouped by consumer file, with the consumer line and the provider locations.
    assert "src/cons/generator.py\n" in out
    assert "missing-argument src/cons/generator.py:14" in out
    assert "| self.scheduler = Scheduler(self.config, kv)" in out
    assert "prov/sched.py:13" in out
    assert "new required parameter block_size" in out
    assert "nox -s verify" in out

    data = json.loads(report_path.read_text())
    assert data["schema"] == "patchwheel.audit/1"
    assert data["exit_status"] == 1
    (finding,) = data["findings"]
    assert finding["kind"] == "missing-argument"
    assert finding["location"] == "src/cons/generator.py:14"
    assert finding["symbol"] == "prov.sched.Scheduler"
    assert finding["old"]["signature"] == "Scheduler(config: SchedConfig, kv_cache_config: int)"
    assert finding["new"]["signature"] == (
        "Scheduler(config: SchedConfig, kv_cache_config: int, block_size: int)"
    )
    assert finding["new"]["location"] == "prov/sched.py:13"
    assert data["blind_spots"] == []
    assert any("Behaviour drift" in line for line in data["cannot_see"])


def test_no_drift_exits_0(
    trees: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    consumer, _, baseline = trees
    status = main_audit(
        [
            "--consumer", str(consumer),
            "--provider", str(baseline),
            "--baseline", str(baseline),
            "--cache-dir", str(tmp_path / "cache"),
        ]
    )  # fmt: skip
    assert status == 0
    assert "no signature drift" in capsys.readouterr().out


def test_an_unusable_tree_is_an_error_naming_it(
    trees: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    consumer, provider, _ = trees
    empty = tmp_path / "empty"
    empty.mkdir()
    status = main_audit(
        ["--consumer", str(consumer), "--provider", str(provider), "--baseline", str(empty)]
    )
    assert status == 1
    assert f"in {empty}" in capsys.readouterr().err


def test_target_mode_audits_the_trees_the_core_cli_provides(
    trees: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    consumer, provider, baseline = trees
    seen: list[str] = []

    def target_trees(args: argparse.Namespace) -> tuple[dict[str, Path], AuditSpec]:
        seen.append(args.target)
        return {"speculators": consumer, "vllm": provider}, AuditSpec()

    parser = argparse.ArgumentParser(prog="patchwheel")
    add_audit_parser(parser.add_subparsers(), target_trees=target_trees)
    args = parser.parse_args(
        ["audit", "--target", "vllm-x", "--baseline", str(baseline),
         "--cache-dir", str(tmp_path / "cache")]
    )  # fmt: skip
    assert args.handler(args) == 1
    assert seen == ["vllm-x"]
    out = capsys.readouterr().out
    assert "speculators (patched) against vllm (patched)" in out
    assert "missing-argument src/cons/generator.py:14" in out
