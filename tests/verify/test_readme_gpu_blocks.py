"""README's GPU blocks are what the code writes from the committed reports, never typed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.gpu import readme as gpu_readme
from patchwheel.verify.gpu import served_summary

ROOT = Path(__file__).resolve().parents[2]
GPU_REPORTS = [
    "reports/gpu/2026-12-03-h200-vllm-0.26-user-job.json",
    "reports/gpu/2026-12-01-h200-vllm-0.26.json",
]
SERVED_REPORTS = [  # README's served block: the newest first
    "reports/gpu/2026-12-04-h200-spec-0.9-vllm-0.26.json",
    "reports/gpu/2026-12-03-h200-spec-0.9-vllm-0.26.json",
]
SERVED_REPORT = SERVED_REPORTS[-1]
EVERY_SERVED_REPORT = [
    *SERVED_REPORTS,
    "reports/gpu/2026-12-04-h200-spec-0.9-vllm-0.26-unpatched-loss.json",
]


def test_readme_blocks_are_written_from_the_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", copy)
    monkeypatch.chdir(ROOT)  # the blocks name the reports by their repository paths
    gpu_readme.rewrite([Path(p) for p in GPU_REPORTS], copy)
    served_summary.rewrite_readme([Path(p) for p in SERVED_REPORTS], copy)
    assert copy.read_text("utf-8") == (ROOT / "README.md").read_text("utf-8")


@pytest.mark.parametrize("name", EVERY_SERVED_REPORT)
def test_every_served_summary_beside_its_report_is_the_codes(name: str) -> None:
    report = json.loads((ROOT / name).read_text("utf-8"))
    assert (ROOT / name).with_suffix(".md").read_text("utf-8") == served_summary.summary(report)


def test_the_served_summary_rejudges_an_old_report() -> None:
    report = json.loads((ROOT / SERVED_REPORT).read_text("utf-8"))
    md = (ROOT / SERVED_REPORT).with_suffix(".md").read_text("utf-8")
    assert report["status"] == "passed"  # as that session wrote it
    assert "(served generation, failed)" in md


def test_a_readme_without_the_block_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# nothing here\n", "utf-8")
    with pytest.raises(VerifyError, match="verify-gpu-served"):
        served_summary.rewrite_readme([ROOT / SERVED_REPORT], readme)
