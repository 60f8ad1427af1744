"""The built wheels on the GPU machine: installed offline from a wheelhouse (or from
``build/<target>/simple``), beside the machine's own torch or into a venv, and proven to be
what got installed (sha256 against the manifest, every file against the wheel's RECORD).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel import manifest
from patchwheel.errors import VerifyError
from patchwheel.verify.env.install import (
    BuiltWheel,
    check_installed_files,
    read_manifest,
    select_wheels,
)
from patchwheel.verify.gpu import environment
from patchwheel.verify.gpu.options import GpuOptions

GPU_DISTRIBUTIONS = ("speculators", "vllm")
# The harness's own runs (never the user's job): no network lookups, no telemetry, logs as
# they come. Each is measurement hygiene (environment.HYGIENE says why it changes nothing).
HARNESS_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "PYTHONUNBUFFERED": "1",
}


@dataclass
class Runtime:
    """Where the installed wheels live and how to run a python that sees them.

    ``env`` is the harness runs' environment (the user's, the import trace into
    ``trace_dir``, HARNESS_ENV); ``user_env`` makes the user job's: the user's and the
    trace only. ``base`` is the session's own environment, ``allowed`` the rules.
    """

    python: str
    env: dict[str, str]
    site: Path
    base: dict[str, str] = field(default_factory=dict)
    allowed: environment.Allowed | None = None
    trace_dir: Path | None = None

    def env_with(self, hygiene: dict[str, str]) -> dict[str, str]:
        """The harness environment plus more hygiene variables (checked)."""
        if self.allowed is None:
            return {**self.env, **hygiene}
        return environment.child_env(
            self.base,
            self.allowed,
            trace_dir=self.trace_dir,
            hygiene={**HARNESS_ENV, **hygiene},
        )

    def user_env(self) -> dict[str, str]:
        """What a user's shell has after INSTALL.txt, plus the import trace (checked)."""
        if self.allowed is None:
            raise VerifyError("no user environment: the runtime was made without its rules")
        strict = dataclasses.replace(self.allowed, hygiene=False)
        return environment.child_env(self.base, strict, trace_dir=self.trace_dir)


# --------------------------------------------------------------------------- installing


def gpu_wheels(manifest_dir: Path, wheelhouse: Path | None) -> list[BuiltWheel]:
    """The built speculators and vllm (CUDA) wheels, found and sha256-checked."""
    return select_wheels(
        read_manifest(manifest_dir),
        GPU_DISTRIBUTIONS,
        manifest.path_in(manifest_dir),
        variant="cuda",
        directory=wheelhouse,
    )


def prepare_runtime(options: GpuOptions, wheels: list[BuiltWheel], console: Console) -> Runtime:
    """Install the wheels (offline from a wheelhouse when given) and check what got installed."""
    work = options.work_dir
    work.mkdir(parents=True, exist_ok=True)
    log = work / "install.log"
    if options.use_system_torch:
        site = work / "site"
        python = sys.executable
        target_args = ["--target", str(site), "--upgrade"]
    else:
        venv = work / "venv"
        if not (venv / "bin" / "python").is_file():
            _run([sys.executable, "-m", "venv", str(venv)], log, "create the venv")
        python = str(venv / "bin" / "python")
        site = Path(
            subprocess.run(
                [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        target_args = []
    runtime = _runtime(options, python, site)
    marker = work / "installed.json"
    wanted = _install_key(options, wheels)
    if _read_json(marker) == wanted and site.is_dir():
        console.print(f"reusing the install in {site} (same wheels, same sources)")
        return runtime
    marker.unlink(missing_ok=True)
    if options.wheelhouse is not None:
        sources = [
            "--no-index",
            "--no-deps",
            "--find-links",
            str(options.wheelhouse),
            "-r",
            str(options.wheelhouse / "requirements.txt"),
        ]
    else:
        index = options.manifest_dir / "simple"
        sources = ["--extra-index-url", index.as_uri(), *(w.requirement for w in wheels)]
    with console.status("installing the built wheels"):
        _run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--no-compile",
                "--disable-pip-version-check",
                *target_args,
                *sources,
            ],
            log,
            "install the wheels",
        )
    marker.write_text(json.dumps(wanted, indent=2), encoding="utf-8")
    return runtime


def _runtime(options: GpuOptions, python: str, site: Path) -> Runtime:
    """The runtime's environments: the user's (the wheelhouse's INSTALL.txt, or none), the
    install site on PYTHONPATH where the user's install put it, the import trace."""
    if options.wheelhouse is not None:
        user = environment.from_install_txt(options.wheelhouse / "INSTALL.txt")
        if options.use_system_torch and not user.pythonpath_site:
            raise VerifyError(
                f"{user.source} gives no `export PYTHONPATH=…` step for installing beside the "
                "machine's packages; --use-system-torch would run with a setting users are "
                "not told about (rebuild the wheelhouse, or leave out --use-system-torch)"
            )
    else:
        user = environment.no_wheelhouse(options.use_system_torch)
    allowed = environment.Allowed(
        user=user, site=site if options.use_system_torch else None, hygiene=True
    )
    base = dict(os.environ)
    trace_dir = options.work_dir / "imports" / datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    env = environment.child_env(base, allowed, trace_dir=trace_dir, hygiene=HARNESS_ENV)
    return Runtime(
        python=python, env=env, site=site, base=base, allowed=allowed, trace_dir=trace_dir
    )


def install_baseline(options: GpuOptions, runtime: Runtime, console: Console) -> Runtime:
    """The runtime with ``--baseline-speculators`` in front of the built speculators (its own
    folder first on PYTHONPATH; vllm and everything else as installed)."""
    wheel = options.baseline_speculators
    if wheel is None:
        raise VerifyError("no --baseline-speculators wheel given")
    site = options.work_dir / "baseline-site"
    marker = options.work_dir / "baseline-installed.json"
    wanted = {"wheel": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
    if not (_read_json(marker) == wanted and site.is_dir()):
        marker.unlink(missing_ok=True)
        with console.status(f"installing the baseline {wheel.name}"):
            _run(
                [
                    runtime.python,
                    "-m",
                    "pip",
                    "install",
                    "--no-compile",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "--upgrade",
                    "--target",
                    str(site),
                    str(wheel),
                ],
                options.work_dir / "install.log",
                f"install the baseline speculators {wheel}",
            )
        marker.write_text(json.dumps(wanted), encoding="utf-8")
    if runtime.allowed is None:
        raise VerifyError("the runtime was made without its environment rules")
    # A comparison only (the series without its newest patches), never the user's path.
    allowed = dataclasses.replace(runtime.allowed, extra_paths=(str(site),))
    env = environment.child_env(
        runtime.base,
        allowed,
        trace_dir=runtime.trace_dir,
        hygiene=HARNESS_ENV,
    )
    return Runtime(
        python=runtime.python,
        env=env,
        site=site,
        base=runtime.base,
        allowed=allowed,
        trace_dir=runtime.trace_dir,
    )


def _install_key(options: GpuOptions, wheels: list[BuiltWheel]) -> dict[str, Any]:
    """What an install is made of: reused only when all of it is the same."""
    requirements = (
        options.wheelhouse / "requirements.txt" if options.wheelhouse is not None else None
    )
    return {
        "wheels": sorted(f"{w.filename} {w.sha256}" for w in wheels),
        "wheelhouse": str(options.wheelhouse) if options.wheelhouse else None,
        "requirements": requirements.read_text("utf-8")
        if requirements is not None and requirements.is_file()
        else None,
        "system_torch": options.use_system_torch,
    }


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None


def installed_packages(runtime: Runtime, wheels: list[BuiltWheel]) -> list[dict[str, Any]]:
    """Each built wheel's record: sha256, and every installed file re-hashed against RECORD."""
    return [
        {
            "distribution": w.distribution,
            "version": w.version,
            "filename": w.filename,
            "sha256": w.sha256,
            "files_checked": check_installed_files(runtime.site, w),
        }
        for w in wheels
    ]


def _run(cmd: list[str], log: Path, what: str, env: dict[str, str] | None = None) -> None:
    with log.open("a", encoding="utf-8") as handle:
        handle.write(f"$ {' '.join(cmd)}\n")
        handle.flush()
        proc = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env, check=False)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text("utf-8", "replace").splitlines()[-15:])
        raise VerifyError(f"could not {what} (exit {proc.returncode}; log {log}):\n{tail}")
