"""A GPU report names the wheelhouse, the work folder and the checkout by name, never by this
machine's path (both generations' writers)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.gpu.report import GpuReport, write_report
from patchwheel.verify.served.gpu import session as served
from tests import support


def _options(tmp_path: Path) -> GpuOptions:
    return GpuOptions(
        manifest_dir=tmp_path / "manifest",
        work_dir=tmp_path / "work",
        report_path=tmp_path / "out" / "verify-gpu.json",
        wheelhouse=tmp_path / "wh",
        speculators_scripts=support.REPO_ROOT / "build" / "gpu-carry" / "scripts",
    )


def test_the_generator_report_names_folders_by_name(tmp_path: Path) -> None:
    options = _options(tmp_path)
    report = GpuReport(target="t", inputs="i", rtol=0.125)
    report.environment = {
        "environment_source": f"{tmp_path}/wh/INSTALL.txt",
        "scripts": str(options.speculators_scripts),
        "imports": [f"{tmp_path}/work/imports/1"],
    }
    report.runs = [{"started": "2026-12-05T00:00:00+00:00", "stages": []}]
    write_report(report, options.report_path, time.monotonic(), options.report_roots())
    text = options.report_path.read_text("utf-8")
    data = json.loads(text)
    assert str(tmp_path) not in text and str(support.REPO_ROOT) not in text
    assert data["environment"] == {
        "environment_source": "$WHEELHOUSE/INSTALL.txt",
        "scripts": "$SPECULATORS_SCRIPTS",
        "imports": ["$WORK_DIR/imports/1"],
    }
    assert str(tmp_path) not in options.report_path.with_name("verify-gpu.md").read_text("utf-8")


def test_the_served_report_names_folders_by_name(tmp_path: Path) -> None:
    options = _options(tmp_path)
    report = {
        "target": "s",
        "generation": "served",
        "families": {"llama": {"status": "failed", "error": f"log: {tmp_path}/work/served/x.log"}},
        "training": None,
        "throughput": None,
        "runs": [{"started": "2026-12-05T00:00:00+00:00", "stages": ["correctness"]}],
    }
    options.report_path.parent.mkdir()  # as the session makes it
    served._write(report, options, [], time.monotonic(), final=True)
    text = options.report_path.read_text("utf-8")
    assert str(tmp_path) not in text
    assert json.loads(text)["families"]["llama"]["error"] == "log: $WORK_DIR/served/x.log"
    assert "$WORK_DIR/served/x.log" in options.report_path.with_suffix(".md").read_text("utf-8")
