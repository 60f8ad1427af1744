"""The summary beside each committed served GPU report is the code's, judged again from the JSON."""

from __future__ import annotations

import json

import pytest

from patchwheel.verify.gpu import served_summary
from tests import support

ROOT = support.REPO_ROOT
SERVED_REPORTS = sorted(
    p.relative_to(ROOT).as_posix()
    for p in (ROOT / "reports/gpu").glob("*.json")
    if json.loads(p.read_text("utf-8")).get("generation") == "served"
)


@pytest.mark.parametrize("name", SERVED_REPORTS)
def test_every_served_summary_beside_its_report_is_the_codes(name: str) -> None:
    report = json.loads((ROOT / name).read_text("utf-8"))
    assert (ROOT / name).with_suffix(".md").read_text("utf-8") == served_summary.summary(report)


def test_the_served_summary_rejudges_an_old_report() -> None:
    name = "reports/gpu/2026-12-03-h200-spec-0.9-vllm-0.26.json"
    report = json.loads((ROOT / name).read_text("utf-8"))
    md = (ROOT / name).with_suffix(".md").read_text("utf-8")
    assert report["status"] == "passed"  # as that session wrote it
    assert "(served generation, failed)" in md
