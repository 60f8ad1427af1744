"""The built wheels on the GPU machine: installed offline from a wheelhouse (or from
``build/<target>/simple``), beside the machine's own torch or into a venv, and proven to be
what got installed (sha256 against the manifest, every file against the wheel's RECORD).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel import manifest
from patchwheel.errors import VerifyError
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.install import (
    BuiltWheel,
    check_installed_files,
    read_manifest,
    select_wheels,
)

GPU_DISTRIBUTIONS = ("speculators", "vllm")
# Engine processes must not reach out, and vLLM's FlashInfer sampler is optional here.
ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_USE_FLASHINFER_SAMPLER": "0",
    "PYTHONUNBUFFERED": "1",
}


@dataclass
class Runtime:
    """Where the installed wheels live and how to run a python that sees them."""

    python: str
    env: dict[str, str]
    site: Path


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
    env = {**os.environ, **ENV}
    if options.use_system_torch:
        site = work / "site"
        python = sys.executable
        target_args = ["--target", str(site), "--upgrade"]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
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
    return Runtime(python=python, env=env, site=site)


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
