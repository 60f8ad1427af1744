"""The served-paths page (benchmarks/served_gpu.py's report) from its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchwheel.errors import ResultsError
from patchwheel.results import served_paths
from tests import support

REPORT = support.REPO_ROOT / "reports" / "bench" / "2026-12-04-h200-served-paths.json"


def _report() -> dict:
    return json.loads(REPORT.read_text())


def test_the_committed_report_gives_every_path_and_its_ratios() -> None:
    data = _report()
    assert served_paths.is_served_paths(data)
    text = "\n".join(served_paths.body(data, str(REPORT)))
    for shape, rep in data["shapes"].items():
        assert f"## {shape}" in text
        prefill = rep["prefill"]["tokens_per_s"]
        for client, fig in rep["served"]["clients"].items():
            row = next(
                line
                for line in text.splitlines()
                if f", {client} speculators" in line and f"{fig['tokens_per_s']:,.0f}" in line
            )
            assert f"| {fig['tokens_per_s'] / prefill:.3f} |" in row
    assert served_paths.status(data, "r").startswith("bench: served ")


def test_where_the_time_goes_comes_from_the_engine_profile() -> None:
    data = _report()
    rep = data["shapes"]["bench"]
    main = rep["profile"]["bench-target-engine"]["main_thread"]
    elapsed = rep["served"]["clients"]["target"]["elapsed_s"]
    busy = main["step_s"] / elapsed
    text = "\n".join(served_paths.body(data, "r"))
    assert f"| target | {elapsed} | {main['step_s']} | {busy:.0%} |" in text


def test_a_failed_side_is_shown_and_a_malformed_report_named(tmp_path: Path) -> None:
    data = _report()
    data["shapes"]["bench"]["offline"] = {"error": "vllm serve exited 1"}
    text = "\n".join(served_paths.body(data, "r"))
    assert "offline failed: `vllm serve exited 1`" in text
    with pytest.raises(ResultsError, match=r"bad\.json"):
        served_paths.body({"benchmark": "served_gpu", "shapes": []}, "bad.json")
