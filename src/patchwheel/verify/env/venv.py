"""The verify venv made and proven: a fresh venv holding exactly the target's built wheels.

Shared by both generations' CPU verification (``verify.generator.cpu``, ``verify.served.cpu``):
:func:`prepare_venv` makes it with the consumer's own install commands (README's, see
``verify.env.consumer``), or repairs a kept one, and re-hashes every file of every built wheel;
:func:`installable` turns a target's sdist artifacts into wheels first.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from patchwheel.errors import VerifyError
from patchwheel.index.consumer import Command
from patchwheel.verify.env.consumer import InstallRecord, install_as_consumer
from patchwheel.verify.env.install import (
    BuiltWheel,
    Venv,
    check_installed,
    check_installed_files,
    install_no_deps,
    install_stack,
    wheel_from_sdist,
)
from patchwheel.verify.report import PackageRecord


def prepare_venv(
    venv: Venv,
    wheels: Sequence[BuiltWheel],
    index_dir: Path,
    log_dir: Path,
    *,
    reuse: bool,
    commands: Sequence[Command] | None = None,
) -> tuple[list[PackageRecord], InstallRecord | None]:
    """A venv holding exactly `wheels`: made by the consumer's `commands` (README's install
    section, see verify.env.consumer), or (reuse) repaired and re-hashed in place; with neither,
    the built wheels by exact version from index_dir, then torch (no consumer command)."""
    log = log_dir / "pip.log"
    if reuse and venv.exists():
        site = venv.site_packages()
        records = []
        for wheel in wheels:
            try:
                checked = check_installed_files(site, wheel)
            except VerifyError:
                install_no_deps(
                    venv,
                    wheel.install_spec,
                    log,
                    "--extra-index-url",
                    index_dir.absolute().as_uri(),
                )
                checked = check_installed_files(site, wheel)
            records.append(_package(wheel, checked))
        return records, None
    if commands is not None:
        record, checked_files = install_as_consumer(venv, commands, wheels, log_dir / "install.log")
        return [_package(w, checked_files[w.distribution]) for w in wheels], record
    venv.create()
    report = install_stack(venv, wheels, index_dir, log)
    installed = check_installed(venv, wheels, report)
    return [_package(i.wheel, i.files_checked) for i in installed], None


def _package(wheel: BuiltWheel, files_checked: int) -> PackageRecord:
    return PackageRecord(
        wheel.distribution,
        wheel.version,
        wheel.filename,
        wheel.sha256,
        files_checked,
        wheel.built_from,
    )


def installable(wheels: Sequence[BuiltWheel], work_dir: Path) -> list[BuiltWheel]:
    """The wheels to install: a target's sdist artifacts are built into wheels first."""
    log = work_dir / "logs" / "pip.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    return [
        wheel_from_sdist(w, work_dir / "sdist-wheels" / w.distribution, log) if w.is_sdist else w
        for w in wheels
    ]
