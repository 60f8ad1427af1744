"""The install check: a target's CPU set installed from its own index, proven and imported.

Where CPU extraction cannot run (a target whose stack is not speculators on vLLM, such as the
test suite's tiny targets), this is what verifies a build the way users take it: a fresh venv,
``pip install`` of every project's wheel (an overlay project's ``cpu`` variant) by exact
version from ``build/<target>/simple``, pip's report proving each archive's sha256, every
installed file re-hashed against the wheel's RECORD, and every top-level package imported.
It writes ``build/<target>/verify-install.json``.
"""

from __future__ import annotations

import subprocess
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console

from patchwheel import atomic, manifest
from patchwheel.errors import VerifyError
from patchwheel.verify.env.install import (
    BuiltWheel,
    Venv,
    check_installed,
    read_manifest,
    select_units,
)

REPORT_NAME = "verify-install.json"


@dataclass
class InstallReport:
    """What the install check found."""

    target: str
    variant: str
    status: str = "failed"
    packages: list[dict[str, object]] = field(default_factory=list)
    imported: list[str] = field(default_factory=list)
    error: str | None = None
    wall_s: float = 0.0


def verify_install(
    target_build_dir: Path,
    *,
    index_dir: Path,
    work_dir: Path,
    variant: str = "cpu",
    console: Console | None = None,
) -> InstallReport:
    """Install the target's ``variant`` set into a fresh venv and check it (VerifyError if not)."""
    started = time.monotonic()
    out = console or Console(stderr=True)
    report = InstallReport(target_build_dir.name, variant)
    try:
        wheels = _choose(read_manifest(target_build_dir), target_build_dir, variant)
        venv = Venv(work_dir / "venv")
        venv.create()
        pip_report = work_dir / "pip-install-report.json"
        venv.pip(
            [
                "install",
                "--extra-index-url",
                index_dir.absolute().as_uri(),
                "--report",
                str(pip_report),
                *[w.requirement for w in wheels],
            ],
            "install " + ", ".join(w.requirement for w in wheels),
            work_dir / "pip.log",
        )
        for found in check_installed(venv, wheels, pip_report):
            report.packages.append(
                {
                    "distribution": found.wheel.distribution,
                    "version": found.wheel.version,
                    "sha256": found.archive_sha256,
                    "files-checked": found.files_checked,
                }
            )
        report.imported = sorted({name for w in wheels for name in top_level(w.path)})
        _import(venv, report.imported)
        report.status = "passed"
        out.print(
            f"install check passed: {', '.join(w.requirement for w in wheels)} installed from "
            f"{index_dir}, every file hash-checked, imported {', '.join(report.imported)}"
        )
    except VerifyError as exc:
        report.error = str(exc)
        raise
    finally:
        report.wall_s = round(time.monotonic() - started, 2)
        atomic.write_json(target_build_dir / REPORT_NAME, asdict(report))
    return report


def _choose(wheels: list[BuiltWheel], target_build_dir: Path, variant: str) -> list[BuiltWheel]:
    """Per project: its one wheel, or its ``variant`` wheel when it has variants."""
    units: list[tuple[str, str | None]] = []
    for project in dict.fromkeys(w.project for w in wheels):
        variants = {w.variant for w in wheels if w.project == project}
        if variants == {None}:
            units.append((project, None))
        elif variant in variants:
            units.append((project, variant))
        else:
            raise VerifyError(f"project {project} has no {variant} variant to install")
    return select_units(wheels, units, manifest.path_in(target_build_dir))


def top_level(wheel: Path) -> list[str]:
    """The importable top-level packages and modules of a wheel."""
    names = set()
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            head, _, rest = member.partition("/")
            if head.endswith((".dist-info", ".data")):
                continue
            if rest == "__init__.py" and head.isidentifier():
                names.add(head)
            elif not rest and member.endswith(".py") and member[:-3].isidentifier():
                names.add(member[:-3])
    return sorted(names)


def _import(venv: Venv, names: list[str]) -> None:
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module(n)\n"
    proc = subprocess.run(
        [str(venv.python), "-c", code, *names], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
        raise VerifyError(f"importing {', '.join(names)} from the installed wheels failed:\n{tail}")
