"""Dependency resolution for a foreign interpreter and platform, delegated to uv.

``uv pip compile`` resolves for ``--python-version``/``--python-platform`` without that Python
being present, binary-only, as of a date (``--exclude-newer``, against PEP 700 upload times),
and writes a PEP 751 ``pylock.toml`` naming, for every package, the wheel that fits with its
URL, sha256, size and upload time. Nothing here downloads a wheel.

uv reads no configuration of its own here (``--no-config``, ``UV_*`` cleared): the indexes are
pip's (see :func:`patchwheel.http.configured_index_urls`) and pip's semantics are kept:
every index is searched and the best version wins (``unsafe-best-match``).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from packaging.utils import NormalizedName, canonicalize_name

from patchwheel.errors import ConfigError, PatchwheelError
from patchwheel.wheelhouse.destination import Destination

TIMEOUT_S = 900
_MISSING_DATE = re.compile(r"warning: `(?P<file>[^`]+)` is missing an upload date")


class ResolutionError(PatchwheelError):
    """The requirements have no solution for the destination (uv's explanation attached)."""

    def __init__(self, message: str, explanation: str = "") -> None:
        super().__init__(message + (f"\n{explanation}" if explanation else ""))
        self.explanation = explanation


@dataclass(frozen=True)
class WheelRef:
    """One wheel file of a resolved package, as the lock names it."""

    filename: str
    url: str
    sha256: str | None
    size: int | None = None
    upload_time: str | None = None


@dataclass(frozen=True)
class Pinned:
    """One package of a resolution and the wheels of that version that fit the destination."""

    name: NormalizedName
    version: str
    wheels: tuple[WheelRef, ...]


@dataclass(frozen=True)
class Request:
    """What to resolve, for which destination, from where, as of when."""

    requirements: list[str]
    destination: Destination
    indexes: list[str]
    cache_dir: Path
    exclude_newer: str | None = None
    constraints: list[str] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    find_links: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class Resolution:
    """uv's answer: the pinned packages, and what uv warned about."""

    packages: list[Pinned]
    undated_files: int
    command: list[str]


@cache
def uv_binary() -> str:
    """The uv executable: ``$PATCHWHEEL_UV``, the ``uv`` package's binary, or ``uv`` on PATH."""
    override = os.environ.get("PATCHWHEEL_UV")
    if override:
        return override
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise ConfigError(
        "uv is not installed: the wheelhouse resolves with `uv pip compile`; "
        "`pip install uv` (it is a dependency of patchwheel) or set PATCHWHEEL_UV"
    )


@cache
def uv_version() -> str:
    """``uv 0.13.9`` (what the lock records as the resolver)."""
    out = subprocess.run(
        [uv_binary(), "--version"], capture_output=True, text=True, check=False, env=_env()
    )
    return out.stdout.strip().split(" (")[0] or "uv (unknown version)"


def resolve(request: Request, workdir: Path) -> Resolution:
    """Run ``uv pip compile`` for ``request`` in ``workdir``; return the pinned packages."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = _command(request, workdir)
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            env=_env(),
            cwd=workdir,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise ResolutionError(
            f"uv pip compile did not finish in {TIMEOUT_S} s; check the index "
            f"({', '.join(request.indexes)}) is reachable"
        ) from exc
    undated = len(_MISSING_DATE.findall(proc.stderr))
    if proc.returncode != 0:
        explanation = _explanation(proc.stderr)
        hint = ""
        if "no usable wheels" in explanation or "no matching distribution" in explanation.lower():
            hint = (
                f"\nA package without a wheel for {request.destination.platform} may have one for "
                "a newer glibc: pass the destination's own --platform (its tags: "
                "`python3 -m pip debug --verbose`), or --drop it if the target never imports it."
            )
        if undated:
            hint += (
                f"\n{undated} file(s) were left out because their index publishes no upload "
                "times (PEP 700), which --exclude-newer needs; with such an index, pass "
                "--exclude-newer none (the lock still records every file and sha256)."
            )
        raise ResolutionError(
            f"no set of wheels satisfies the requirements for {request.destination.describe()}"
            + (f" as of {request.exclude_newer}" if request.exclude_newer else ""),
            explanation + hint,
        )
    return Resolution(read_pylock(workdir / "pylock.toml"), undated, command)


def _command(request: Request, workdir: Path) -> list[str]:
    files = {
        "requirements.in": request.requirements,
        "constraints.txt": request.constraints,
        "overrides.txt": request.overrides,
    }
    for name, lines in files.items():
        (workdir / name).write_text("".join(f"{line}\n" for line in lines), "utf-8")
    dest = request.destination
    command = [uv_binary(), "pip", "compile", "requirements.in"]
    if request.constraints:
        command += ["--constraints", "constraints.txt"]
    if request.overrides:
        command += ["--overrides", "overrides.txt"]
    command += [
        "--format",
        "pylock.toml",
        "--output-file",
        "pylock.toml",
        "--python-version",
        dest.python_version,
        "--python-platform",
        dest.uv_platform(),
        "--only-binary",
        ":all:",
        "--no-config",
        "--no-progress",
        "--no-header",
        "--python",
        sys.executable,
        "--cache-dir",
        str(request.cache_dir),
        "--index-strategy",
        "unsafe-best-match",
    ]
    if request.exclude_newer:
        command += ["--exclude-newer", request.exclude_newer]
    primary, *extra = request.indexes or ["https://pypi.org/simple/"]
    command += ["--default-index", primary]
    for url in extra:
        command += ["--index", url]
    for path in request.find_links:
        command += ["--find-links", str(path)]
    return command


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env["NO_COLOR"] = "1"
    return env


def _explanation(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if not _MISSING_DATE.match(line)]
    noise = ("warning: The requested Python", "warning: Requirements file")
    lines = [line for line in lines if not line.startswith(noise)]
    return "\n".join(lines).strip()


def read_pylock(path: Path) -> list[Pinned]:
    """The packages of a PEP 751 lock file (only what a wheelhouse needs)."""
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ResolutionError(f"{path}: uv wrote no readable pylock.toml ({exc})") from exc
    packages = []
    for entry in data.get("packages", []):
        wheels = tuple(_wheel_ref(w) for w in entry.get("wheels", []))
        packages.append(Pinned(canonicalize_name(entry["name"]), str(entry["version"]), wheels))
    return packages


def _wheel_ref(data: dict[str, Any]) -> WheelRef:
    url = str(data.get("url") or data.get("path") or "")
    upload = data.get("upload-time")
    if isinstance(upload, dt.datetime):
        upload = upload.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return WheelRef(
        filename=unquote(str(data.get("name") or url.rsplit("/", 1)[-1])),
        url=url,
        sha256=data.get("hashes", {}).get("sha256"),
        size=data.get("size"),
        upload_time=str(upload) if upload else None,
    )
