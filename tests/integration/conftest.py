"""Fixtures for CPU verification: one verify venv per session, variant builds of the target."""

from __future__ import annotations

import io
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from patchwheel.errors import VerifyError
from patchwheel.verify.cpu import verify_cpu
from patchwheel.verify.report import VerifyReport
from tests import support
from tests.conftest import DefaultBuild

TARGET = "vllm-0.32"


@dataclass
class Verified:
    """The outcome of one verify_cpu run."""

    report: VerifyReport | None
    error: VerifyError | None
    output: str
    report_path: Path


def run_verify(build_dir: Path, index: Path, work: Path, *, reuse: bool) -> Verified:
    """verify_cpu with its console captured; a VerifyError is returned, not raised."""
    out = io.StringIO()
    console = Console(file=out, width=160)
    try:
        report = verify_cpu(
            build_dir, index_dir=index, work_dir=work, reuse_venv=reuse, console=console
        )
        return Verified(report, None, out.getvalue(), build_dir / "verify-cpu.json")
    except VerifyError as exc:
        return Verified(None, exc, out.getvalue(), build_dir / "verify-cpu.json")


@pytest.fixture(scope="session")
def cpu_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The verify work dir shared by the session (its venv is made once, then reused)."""
    return tmp_path_factory.mktemp("verify-cpu")


@pytest.fixture(scope="session")
def cpu_verified(default_build: DefaultBuild, cpu_work: Path) -> Verified:
    """The full verification of the default target's built wheels, in a fresh venv."""
    assert default_build.target == TARGET
    return run_verify(default_build.target_dir, default_build.index, cpu_work, reuse=False)


def build_variant(root: Path, cache: Path, patch_names: list[str]) -> Path:
    """`patchwheel build` of the default target with only `patch_names` in its speculators
    series (in the series' order); return the checkout root (build/ and build/simple inside)."""
    source = support.REPO_ROOT / "patches" / TARGET
    dest = root / "patches" / TARGET
    (dest / "speculators").mkdir(parents=True)
    for name in ("target.toml", "target.lock"):
        shutil.copyfile(source / name, dest / name)
    for name in patch_names:
        shutil.copyfile(source / "speculators" / name, dest / "speculators" / name)
    if patch_names:
        (dest / "speculators" / "series").write_text("\n".join(patch_names) + "\n")
    result = support.patchwheel(root, "build", "--no-audit", cache=cache)
    assert result.returncode == 0, result.stderr
    return root


def series_names() -> list[str]:
    """The default target's speculators series, in order."""
    lines = (support.REPO_ROOT / "patches" / TARGET / "speculators" / "series").read_text()
    return [ln.strip() for ln in lines.splitlines() if ln.strip() and not ln.startswith("#")]
