"""The machine a wheelhouse is for: its interpreter, its platform and what it already has.

The destination is foreign (another Python, another glibc, no network), so nothing here looks
at the running interpreter: wheel tags and environment markers are computed from
``--python-version`` and ``--platform``, and the installed packages come from a
``pip list --format=freeze`` (or ``pip freeze``, or ``pip list --format=json``) of that machine.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from patchwheel.errors import ConfigError
from patchwheel.upstream.cache import sha256_file

DEFAULT_PYTHON = "3.12"
# glibc 2.34: RHEL 9, Ubuntu 22.04 and newer (NGC images). vLLM's own wheels need 2.28, but
# some of its dependencies (llguidance 1.7: manylinux_2_31) need more.
DEFAULT_PLATFORM = "manylinux_2_34_x86_64"
_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_(\w+)")
_LEGACY = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
_MUSLLINUX = re.compile(r"musllinux_(\d+)_(\d+)_(\w+)")
# A PEP 508 project name: what may become a stub wheel's file name.
_PROJECT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?")
_ARCHES = ("x86_64", "aarch64", "ppc64le", "s390x", "i686", "armv7l", "riscv64")


@dataclass(frozen=True)
class Destination:
    """A foreign interpreter and platform: CPython ``python_version`` on ``platform``."""

    python_version: str = DEFAULT_PYTHON
    platform: str = DEFAULT_PLATFORM

    def __post_init__(self) -> None:
        if not re.fullmatch(r"3\.\d+(\.\d+)?", self.python_version):
            raise ConfigError(
                f"--python-version {self.python_version!r}: give a CPython version like 3.12"
            )
        _platform_parts(self.platform)

    @property
    def python_tuple(self) -> tuple[int, int]:
        """``(3, 12)``."""
        major, minor = self.python_version.split(".")[:2]
        return int(major), int(minor)

    @property
    def arch(self) -> str:
        """The machine architecture (``x86_64``)."""
        return _platform_parts(self.platform)[2]

    def platform_tags(self) -> list[str]:
        """Every platform tag a wheel may carry to install here, most specific first."""
        family, (major, minor), arch = _platform_parts(self.platform)
        if family == "musllinux":
            return [f"musllinux_{major}_{m}_{arch}" for m in range(minor, -1, -1)]
        tags = [f"manylinux_{major}_{m}_{arch}" for m in range(minor, 4, -1)]
        for legacy, (_, glibc_minor) in _LEGACY.items():
            if glibc_minor <= minor:
                tags.insert(tags.index(f"manylinux_2_{glibc_minor}_{arch}") + 1, f"{legacy}_{arch}")
        return tags

    def supported_tags(self) -> list[Tag]:
        """The wheel tags CPython ``python_version`` accepts on ``platform``, best first."""
        version = self.python_tuple
        abi = f"cp{version[0]}{version[1]}"
        platforms = self.platform_tags()
        return [
            *cpython_tags(version, abis=[abi], platforms=platforms),
            *compatible_tags(version, abi, platforms),
        ]

    def uv_platform(self) -> str:
        """The platform as uv's ``--python-platform`` names it (``x86_64-manylinux_2_28``)."""
        family, (major, minor), arch = _platform_parts(self.platform)
        if family == "musllinux":
            return f"{arch}-unknown-linux-musl"
        return f"{arch}-manylinux_{major}_{minor}"

    def marker_environment(self) -> dict[str, str]:
        """PEP 508 marker values for this destination (CPython on Linux)."""
        full = self.python_version if self.python_version.count(".") == 2 else ""
        full = full or f"{self.python_version}.0"
        return {
            "implementation_name": "cpython",
            "implementation_version": full,
            "os_name": "posix",
            "platform_machine": self.arch,
            "platform_python_implementation": "CPython",
            "platform_release": "",
            "platform_system": "Linux",
            "platform_version": "",
            "python_full_version": full,
            "python_version": ".".join(self.python_version.split(".")[:2]),
            "sys_platform": "linux",
        }

    def describe(self) -> str:
        """``CPython 3.12 on manylinux_2_28_x86_64``."""
        return f"CPython {self.python_version} on {self.platform}"


def _platform_parts(platform: str) -> tuple[str, tuple[int, int], str]:
    legacy = next((n for n in _LEGACY if platform.startswith(n + "_")), None)
    if legacy is not None:
        arch = platform.removeprefix(legacy + "_")
        if arch in _ARCHES:
            return "manylinux", _LEGACY[legacy], arch
    for family, pattern in (("manylinux", _MANYLINUX), ("musllinux", _MUSLLINUX)):
        match = pattern.fullmatch(platform)
        if match and match.group(3) in _ARCHES:
            return family, (int(match.group(1)), int(match.group(2))), match.group(3)
    raise ConfigError(
        f"--platform {platform!r}: give a Linux wheel platform tag such as "
        f"{DEFAULT_PLATFORM} (the destination's glibc: `ldd --version`; its tags: "
        "`python3 -m pip debug --verbose`)"
    )


@dataclass(frozen=True)
class Installed:
    """The packages the destination already has (name → version; None when unknown)."""

    source: str = ""
    sha256: str = ""
    packages: dict[NormalizedName, Version | None] = field(default_factory=dict)
    display: dict[NormalizedName, str] = field(default_factory=dict)

    def version(self, name: str) -> Version | None:
        """The installed version of ``name`` (None: absent or unknown)."""
        return self.packages.get(canonicalize_name(name))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and canonicalize_name(name) in self.packages

    def without(self, names: set[NormalizedName]) -> Installed:
        """The same list less ``names`` (carried in the wheelhouse instead)."""
        return Installed(
            self.source,
            self.sha256,
            {n: v for n, v in self.packages.items() if n not in names},
            {n: d for n, d in self.display.items() if n not in names},
        )


def read_installed(path: Path) -> Installed:
    """Read a ``pip list --format=freeze``/``pip freeze``/``pip list --format=json`` file.

    Bare names (``torch``) are accepted for packages whose version is unknown; they are taken
    as present, and requirements on them cannot be checked.
    """
    if not path.is_file():
        raise ConfigError(
            f"--installed {path}: no such file; on the destination run "
            "`python3 -m pip list --format=freeze > installed.txt` and copy it here"
        )
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"--installed {path}: cannot be read ({exc.strerror})") from exc
    pairs = _json_pairs(text, path) if text.lstrip().startswith("[") else _freeze_pairs(text, path)
    packages: dict[NormalizedName, Version | None] = {}
    display: dict[NormalizedName, str] = {}
    for name, version_text, line in pairs:
        key = canonicalize_name(name)
        version = None
        if version_text is not None:
            try:
                version = Version(version_text)
            except InvalidVersion as exc:
                raise ConfigError(
                    f"{path}: line {line}: {name} has version {_shown(repr(version_text))}, "
                    "which is not a "
                    "PEP 440 version; write the line as the bare name to take it as present"
                ) from exc
        packages[key] = version
        display[key] = name
    return Installed(str(path), sha256_file(path), packages, display)


def _json_pairs(text: str, path: Path) -> list[tuple[str, str | None, int]]:
    try:
        rows = json.loads(text)
        pairs = [(r["name"], r["version"], i + 1) for i, r in enumerate(rows)]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ConfigError(
            f"{path}: not a `pip list --format=json` list of {{name, version}}: {_shown(str(exc))}"
        ) from exc
    for name, version, number in pairs:
        if not isinstance(name, str) or not _PROJECT.fullmatch(name):
            raise ConfigError(
                f"{path}: entry {number}: name {_shown(repr(name))} is not a project name "
                "(letters, digits, '.', '_', '-'); produce the file with "
                "`python3 -m pip list --format=json`"
            )
        if not isinstance(version, str):
            raise ConfigError(f"{path}: entry {number}: {name}'s version is not a string")
    return pairs


def _shown(text: str, limit: int = 120) -> str:
    """A line of the user's file as an error shows it: at most ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _freeze_pairs(text: str, path: Path) -> list[tuple[str, str | None, int]]:
    pairs: list[tuple[str, str | None, int]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-e ") or line.startswith("--editable"):
            raise ConfigError(
                f"{path}: line {number}: {_shown(repr(raw.strip()))} is an editable install "
                "without a version; use `pip list --format=freeze`, which names it with its version"
            )
        if line.startswith("-"):
            continue  # pip options such as -i/--index-url in a pip freeze
        if " @ " in line:
            name, _, url = line.partition(" @ ")
            if not _PROJECT.fullmatch(name.strip()):
                raise ConfigError(
                    f"{path}: line {number}: {_shown(repr(name.strip()))} is not a project name"
                )
            pairs.append((name.strip(), _version_from_url(url.strip()), number))
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:===?\s*(\S+))?", line)
        if not match or not _PROJECT.fullmatch(match.group(1)):
            raise ConfigError(
                f"{path}: line {number}: {_shown(repr(raw.strip()))} is not `name==version`; "
                "produce the file with `python3 -m pip list --format=freeze`"
            )
        pairs.append((match.group(1), match.group(2), number))
    return pairs


def _version_from_url(url: str) -> str | None:
    """The version of a ``name @ file:///…/name-1.0-py3-none-any.whl`` line, if it says."""
    filename = unquote(url.rsplit("/", 1)[-1])
    try:
        return str(parse_wheel_filename(filename)[1])
    except InvalidWheelFilename:
        return None
