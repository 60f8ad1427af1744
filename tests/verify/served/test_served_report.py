"""The served generation's report: written by the code, read back only as written (the results
page made from it: tests/results/test_pages.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.oracles.compare import TensorCheck
from patchwheel.verify.report import PackageRecord
from patchwheel.verify.served.report import ServedReport, read_served_report, write_report
from patchwheel.verify.served.results import ConnectorResult, ServedResult


def report() -> ServedReport:
    run = ConnectorResult(
        "example",
        "file",
        {"kv_connector": "ExampleHiddenStatesConnector"},
        [],
        "serve.log",
        ready_s=61.0,
        generate_s=20.0,
        files=15,
        stored="float32",
    )
    run.checks = [TensorCheck(0, 0, 47, 3, 2e-5, 9.0, 9e-4, None)]
    served = ServedResult(
        status="passed",
        stage_seconds={"serve": 61.0},
        layer_ids=[3, 8],
        decoder_layers=[2, 7],
        dtype="float32",
        connectors=[run],
        rows=15,
        preprocessing_matches_template=True,
    )
    return ServedReport(
        "spec-0.9",
        "passed",
        inputs="abc",
        served=served,
        packages=[PackageRecord("speculators", "0.9.0+pw1", "s.whl", "f" * 64, 3)],
        cross_generation="not run: no generator-generation files given",
    )


def test_written_read_and_rendered(tmp_path: Path) -> None:
    path = tmp_path / "verify-cpu.json"
    write_report(report(), path)
    data = read_served_report(path)
    assert data["generation"] == "served" and data["packages"][0]["sha256"] == "f" * 64


def test_an_edited_report_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "verify-cpu.json"
    write_report(report(), path)
    data = json.loads(path.read_text())
    data["verified_by_hand"] = True
    path.write_text(json.dumps(data))
    with pytest.raises(VerifyError, match="not a report as verify writes it"):
        read_served_report(path)
    data.pop("verified_by_hand")
    data["generation"] = "generator"
    path.write_text(json.dumps(data))
    with pytest.raises(VerifyError, match="not a report of the served generation"):
        read_served_report(path)
