"""Every script in benchmarks/ runs as README gives it (``python benchmarks/NAME.py``) from a fresh
clone of the repository: ``--help`` answers at once, and no script shadows a standard-library
module for its neighbours (Python puts the script's folder first on ``sys.path``; a
``benchmarks/bisect.py`` once broke every other script's ``import random``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import support


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh clone of this repository's committed HEAD."""
    if not (support.REPO_ROOT / ".git").exists():
        pytest.fail(f"{support.REPO_ROOT} is not a git checkout: nothing to clone")
    dest = tmp_path_factory.mktemp("clone") / "patchwheel"
    subprocess.run(
        ["git", "clone", "-q", "--no-hardlinks", str(support.REPO_ROOT), str(dest)],
        check=True,
        env=support.git_env(),
    )
    return dest


def scripts(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "benchmarks").glob("*.py"))


def test_the_clone_has_the_benchmarks(clone: Path) -> None:
    # the clone holds exactly the committed scripts, and there are some
    names = scripts(clone)
    assert names, "benchmarks/ holds no script"
    committed = subprocess.run(
        ["git", "ls-files", "benchmarks/*.py"],
        cwd=clone,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(Path(p).name for p in committed) == names


def test_no_script_shadows_the_standard_library(clone: Path) -> None:
    shadowing = [n for n in scripts(clone) if n.removesuffix(".py") in sys.stdlib_module_names]
    assert not shadowing, f"benchmarks/ shadows the standard library: {shadowing}"


def test_every_script_answers_help_from_a_fresh_clone(clone: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}  # the clone's patchwheel
    failed = {}
    for name in scripts(clone):
        result = subprocess.run(
            [sys.executable, f"benchmarks/{name}", "--help"],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode != 0 or "usage:" not in result.stdout:
            failed[name] = (result.returncode, result.stderr[-2000:])
    assert not failed, failed


def test_the_ci_benchmark_reads_pytest_and_nox_as_they_print() -> None:
    spec = importlib.util.spec_from_file_location(
        "ci_run", support.REPO_ROOT / "benchmarks" / "ci_run.py"
    )
    assert spec and spec.loader
    ci_run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ci_run)
    output = "\n".join([
        "nox > Session lint was successful in 40 seconds.",
        "SKIPPED [2] tests/verify/test_kill.py:88: opt-in: PATCHWHEEL_KILL_ALL=1",
        "===== 651 passed, 2 skipped, 1 warning in 1700.50s (0:28:20) =====",
    ])  # fmt: skip
    found = ci_run.figures(output)
    assert found["counts"] == {"passed": 651, "skipped": 2}
    assert found["tests"] == 653 and found["pytest_s"] == 1700.5 and found["lint_passed"]
    assert found["skipped_reasons"] == ["2 x opt-in: PATCHWHEEL_KILL_ALL=1"]
    failing = ci_run.figures("===== 3 failed, 650 passed in 10.00s =====")
    assert failing["counts"] == {"failed": 3, "passed": 650} and not failing["lint_passed"]
