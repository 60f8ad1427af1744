"""docs/results/ and README's results lines are what the committed JSON gives (``--check``), a
new report under reports/ is picked up by itself, and a report that is no report is refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchwheel.errors import ResultsError
from patchwheel.results import README_END, README_START, check, expected, find_reports, write
from patchwheel.verify.report import VerifyReport, write_report
from patchwheel.verify.served.report import write_report as write_served_report
from tests import support
from tests.verify.generator.test_family_report import _checks, _family
from tests.verify.served.test_served_report import report as served_report

ROOT = support.REPO_ROOT
SERVED = "reports/gpu/2026-12-04-h200-spec-0.9-vllm-0.26.json"


def test_the_committed_pages_are_what_the_json_gives() -> None:
    assert check(ROOT) == []
    done = subprocess.run(
        [sys.executable, "-m", "patchwheel.results", "--check", "--root", str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "every page is what its JSON gives" in done.stdout


def test_every_committed_report_has_a_page_and_readme_links_the_current_ones() -> None:
    reports = find_reports(ROOT)
    sources = {r.source for r in reports}
    committed = {p.relative_to(ROOT).as_posix() for p in (ROOT / "reports").rglob("*.json")}
    assert sources == committed
    readme = (ROOT / "README.md").read_text("utf-8")
    block = readme.split(README_START, 1)[1].split(README_END, 1)[0]
    for report in reports:
        assert (ROOT / "docs/results" / report.page).is_file()
        assert (f"(docs/results/{report.page})" in block) is not report.superseded


def _checkout(tmp_path: Path, *reports: str) -> Path:
    """A checkout holding README (with its results block) and only the named reports."""
    root = tmp_path / "checkout"
    (root / "reports").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", root / "README.md")
    for name in reports:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    return root


def test_a_new_served_gpu_report_is_picked_up_and_supersedes_the_older(tmp_path: Path) -> None:
    root = _checkout(tmp_path, SERVED)
    write(root)
    assert check(root) == []
    data = json.loads((ROOT / SERVED).read_text("utf-8"))
    for run in data["runs"]:  # the same stages, run a day later
        run["started"] = run["started"].replace("2026-12-04", "2026-12-05")
    new = root / "reports/gpu/2026-12-05-h200-spec-0.9-vllm-0.26.json"
    new.write_text(json.dumps(data), "utf-8")
    assert check(root) == [
        "README.md",
        "docs/results/gpu/2026-12-04-h200-spec-0.9-vllm-0.26.md",  # now superseded
        "docs/results/gpu/2026-12-05-h200-spec-0.9-vllm-0.26.md",
        "docs/results/index.md",
    ]
    write(root)
    assert check(root) == []
    readme = (root / "README.md").read_text("utf-8")
    assert "gpu/2026-12-05-h200-spec-0.9-vllm-0.26.md" in readme
    assert "gpu/2026-12-04-h200-spec-0.9-vllm-0.26.md" not in readme  # superseded: its page only
    index = (root / "docs/results/index.md").read_text("utf-8")
    superseded = index.split("## Superseded runs", 1)[1]
    assert "gpu/2026-12-04-h200-spec-0.9-vllm-0.26.md" in superseded
    page = (root / "docs/results/gpu/2026-12-04-h200-spec-0.9-vllm-0.26.md").read_text("utf-8")
    assert "superseded: each stage it ran (correctness, training) ran again later" in page

    new.unlink()  # a report removed: its page is stale, and writing removes it
    assert "docs/results/gpu/2026-12-05-h200-spec-0.9-vllm-0.26.md" in check(root)
    write(root)
    assert check(root) == []
    assert not (root / "docs/results/gpu/2026-12-05-h200-spec-0.9-vllm-0.26.md").exists()


def test_a_page_edited_by_hand_is_found(tmp_path: Path) -> None:
    root = _checkout(tmp_path, SERVED)
    write(root)
    page = root / "docs/results/gpu/2026-12-04-h200-spec-0.9-vllm-0.26.md"
    page.write_text(page.read_text("utf-8").replace("failed", "passed"), "utf-8")
    assert check(root) == ["docs/results/gpu/2026-12-04-h200-spec-0.9-vllm-0.26.md"]
    done = subprocess.run(
        [sys.executable, "-m", "patchwheel.results", "--check", "--root", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "differs from its JSON: docs/results/gpu/2026-12-04" in done.stderr


def test_a_cpu_report_gets_its_page_and_a_hand_edited_one_is_refused(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    report = VerifyReport("vllm-0.32", "passed", "float32", 1e-4, [0, 1], 256)
    report.checks = _checks([1e-6, 2e-6])
    report.families = [_family("qwen3", oracle_bad=False)]
    path = root / "reports/cpu/vllm-0.32.json"
    path.parent.mkdir()
    write_report(report, path)
    write(root)
    page = (root / "docs/results/cpu/vllm-0.32.md").read_text("utf-8")
    assert "| qwen3 (`Qwen3ForCausalLM`) | 4/4, ≤ 2.0e-06 | 4/4, ≤ 5.0e-01 | 70 + 75 |" in page
    assert "Status **passed**" in page

    edited = json.loads(path.read_text("utf-8"))
    edited["note"] = "added by hand"
    path.write_text(json.dumps(edited), "utf-8")
    with pytest.raises(ResultsError, match=r"reports/cpu/vllm-0.32.json: .*keys verify never"):
        expected(root)


def test_a_served_cpu_report_gets_its_page(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    path = root / "reports/cpu/spec-0.9.json"
    path.parent.mkdir()
    write_served_report(served_report(), path)
    write(root)
    page = (root / "docs/results/cpu/spec-0.9.md").read_text("utf-8")
    assert "# CPU, spec-0.9 (served generation)" in page
    assert (
        "| example (`ExampleHiddenStatesConnector`) | 61 | 20 | 15 (float32) | 3: 2.0e-05" in page
    )
    assert "Against the generator generation: not run" in page


def test_unreadable_json_and_a_readme_without_the_block_are_refused(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    bad = root / "reports/bench/broken.json"
    bad.parent.mkdir()
    bad.write_text("{not json", "utf-8")
    with pytest.raises(ResultsError, match=r"reports/bench/broken\.json: not a readable JSON"):
        expected(root)
    done = subprocess.run(
        [sys.executable, "-m", "patchwheel.results", "--root", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "reports/bench/broken.json" in done.stderr
    bad.unlink()
    (root / "README.md").write_text("# no block\n", "utf-8")
    with pytest.raises(ResultsError, match=r"README\.md has no"):
        expected(root)
