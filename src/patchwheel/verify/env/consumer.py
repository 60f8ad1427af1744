"""The verify venv made with the consumer's own commands, then proven to hold the built wheels.

The commands come from :func:`patchwheel.index.consumer.install_commands`, the one function
that also renders README's and INSTALL.md's install section, so verification installs exactly
what a user is told to run (pip or uv; the variant's requirement, e.g.
``speculators[datagen-cpu]``; ``-c`` the target's constraints; the variant's exclusions). After
they ran, every file each built wheel's RECORD lists is re-hashed in the venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchwheel.config.targets import Target
from patchwheel.errors import VerifyError
from patchwheel.index.consumer import Command, Installer, install_commands
from patchwheel.verify.env.install import BuiltWheel, Venv, check_installed_files


@dataclass(frozen=True)
class InstallRecord:
    """The consumer commands as run, and how long they took."""

    commands: list[str]
    seconds: float


CPU_VARIANT = "cpu"


def cpu_commands(
    target: Target,
    target_dir: Path,
    venv: Path,
    *,
    installer: Installer = "uv",
    extra_index_urls: Sequence[str] | None = None,
) -> list[Command]:
    """README's CPU install commands for the built target in target_dir, making `venv`.

    The target's own index is ``target_dir/simple`` and its consumer set is target_dir's
    (constraints, excludes); ``extra_index_urls`` replaces the variant's declared extra
    indexes (PyPI's CPU torch index), e.g. with none where the machine's find-links hold torch.
    """
    return install_commands(
        target,
        (target_dir / "simple").absolute().as_uri(),
        variant=CPU_VARIANT,
        installer=installer,
        consumer_dir=str(target_dir.absolute()),
        venv=str(venv),
        python=sys.executable,
        extra_index_urls=extra_index_urls,
    )


def extra_indexes_for(env: Mapping[str, str]) -> list[str] | None:
    """The extra indexes the consumer commands keep: the variant's declared ones (None), or
    none where the machine's pip find-links (PIP_FIND_LINKS) hold torch because PyTorch's
    index cannot be reached (the commands as run are recorded in the report)."""
    return [] if env.get("PIP_FIND_LINKS") else None


def install_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The commands' environment: `uv` (patchwheel's own) on PATH; the machine's pip
    find-links (PIP_FIND_LINKS, a local folder of torch builds where PyTorch's index cannot
    be reached) given to uv too; never PYTHONPATH. uv copies what it installs (UV_LINK_MODE,
    unless set): by default it hard-links the files to its cache, so anything written into
    the verify venv's files would also change every later install from that cache, the
    user's own venvs included."""
    from uv import find_uv_bin

    env = {k: v for k, v in (base if base is not None else os.environ).items()}
    env.pop("PYTHONPATH", None)
    env["PATH"] = f"{Path(find_uv_bin()).parent}{os.pathsep}{env.get('PATH', '')}"
    if "PIP_FIND_LINKS" in env and "UV_FIND_LINKS" not in env:
        env["UV_FIND_LINKS"] = env["PIP_FIND_LINKS"]
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")
    env.setdefault("UV_LINK_MODE", "copy")
    return env


def run_commands(
    commands: Sequence[Command], log: Path, *, env: Mapping[str, str], timeout_s: float
) -> InstallRecord:
    """Run each command in order (output appended to log); VerifyError naming a failing one."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    for command in commands:
        with log.open("a", encoding="utf-8") as handle:
            handle.write(f"$ {command.shell()}\n")
            handle.flush()
            try:
                proc = subprocess.run(
                    command.argv,
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    env=dict(env),
                    timeout=timeout_s,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise VerifyError(
                    f"the consumer's {command.step} command did not finish in {timeout_s:.0f} s "
                    f"(log: {log}): {command.shell()}"
                ) from exc
            except OSError as exc:
                raise VerifyError(
                    f"the consumer's {command.step} command could not start ({exc}): "
                    f"{command.shell()}"
                ) from exc
        if proc.returncode != 0:
            text = log.read_text(encoding="utf-8", errors="replace")
            tail = "\n".join(text.strip().splitlines()[-15:])
            raise VerifyError(
                f"the consumer's {command.step} command exited {proc.returncode} "
                f"(log: {log}):\n{command.shell()}\n{tail}"
            )
    return InstallRecord([c.shell() for c in commands], time.monotonic() - started)


def install_as_consumer(
    venv: Venv,
    commands: Sequence[Command],
    wheels: Sequence[BuiltWheel],
    log: Path,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 3600.0,
) -> tuple[InstallRecord, dict[str, int]]:
    """Run the consumer's commands (which make `venv`), then re-hash each built wheel's files
    there; return the record and, per distribution, how many files were checked."""
    if not commands or commands[0].step != "venv":
        raise VerifyError("the consumer's commands must start by making the venv")
    if str(venv.root) not in commands[0].argv:
        raise VerifyError(
            f"the consumer's commands make {commands[0].shell()!r}, not the verify venv {venv.root}"
        )
    if venv.root.exists():
        shutil.rmtree(venv.root)  # a fresh venv, whichever installer makes it
    record = run_commands(commands, log, env=install_env(env), timeout_s=timeout_s)
    if not venv.exists():
        raise VerifyError(f"the consumer's commands ran but {venv.python} does not exist")
    site = venv.site_packages()
    return record, {w.distribution: check_installed_files(site, w) for w in wheels}
