"""Fixtures for CPU verification: one verify venv per session, variant builds of the target."""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from patchwheel.config.targets import load_target
from patchwheel.errors import VerifyError
from patchwheel.index.consumer import Command
from patchwheel.rebase.prepare import unpool
from patchwheel.verify.env.consumer import cpu_commands, extra_indexes_for
from patchwheel.verify.generator.cpu import verify_cpu
from patchwheel.verify.generator.family_check import CPU_FAMILIES
from patchwheel.verify.generator.userpath import UserPathPlan
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


def run_verify(
    build_dir: Path,
    index: Path,
    work: Path,
    *,
    reuse: bool,
    commands: Sequence[Command] | None = None,
    user_path: UserPathPlan | None = None,
    families: tuple[str, ...] = (),
) -> Verified:
    """verify_cpu with its console captured; a VerifyError is returned, not raised."""
    out = io.StringIO()
    console = Console(file=out, width=160)
    try:
        report = verify_cpu(
            build_dir,
            index_dir=index,
            work_dir=work,
            reuse_venv=reuse,
            console=console,
            commands=commands,
            user_path=user_path,
            families=families,
        )
        return Verified(report, None, out.getvalue(), build_dir / "verify-cpu.json")
    except VerifyError as exc:
        return Verified(None, exc, out.getvalue(), build_dir / "verify-cpu.json")


@pytest.fixture(scope="session")
def cpu_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The verify work dir shared by the session (its venv is made once, then reused)."""
    return tmp_path_factory.mktemp("verify-cpu")


def consumer_commands(default_build: DefaultBuild, venv: Path) -> list[Command]:
    """README's CPU commands (uv) for the default build. Where the machine's pip find-links
    hold torch (PIP_FIND_LINKS; PyTorch's index unreachable) no extra index is given."""
    target = load_target(default_build.root / "patches", default_build.target)
    return cpu_commands(
        target,
        default_build.target_dir,
        venv,
        installer="uv",
        extra_index_urls=extra_indexes_for(os.environ),
    )


@pytest.fixture(scope="session")
def cpu_verified(default_build: DefaultBuild, cpu_work: Path) -> Verified:
    """The full verification of the default target's built wheels: a fresh venv made by
    README's consumer commands, extraction, the CPU model families against both oracles, and
    the user's library pipeline."""
    assert default_build.target == TARGET
    return run_verify(
        default_build.target_dir,
        default_build.index,
        cpu_work,
        reuse=False,
        commands=consumer_commands(default_build, cpu_work / "venv"),
        user_path=UserPathPlan(),
        families=CPU_FAMILIES,
    )


def build_variant(root: Path, cache: Path, patch_names: list[str]) -> Path:
    """`patchwheel build` of the default target with only `patch_names` in its speculators
    series (in the series' order); return the checkout root (build/ and build/simple inside)."""
    source = support.REPO_ROOT / "patches" / TARGET
    pool = support.committed_series_dir(TARGET)
    dest = root / "patches" / TARGET
    (dest / "speculators").mkdir(parents=True)
    shutil.copyfile(source / "target.lock", dest / "target.lock")
    # the subset is the target's own series here: target.toml without its pool
    (dest / "target.toml").write_text(unpool((source / "target.toml").read_text(), "speculators"))
    for name in patch_names:
        shutil.copyfile(pool / name, dest / "speculators" / name)
    (dest / "speculators" / "series").write_text("\n".join(patch_names) + "\n")
    result = support.patchwheel(root, "build", "--no-audit", cache=cache)
    assert result.returncode == 0, result.stderr
    return root


def series_names() -> list[str]:
    """The default target's speculators series, in order."""
    return [patch.name for patch in support.committed_series(TARGET)]
