"""A target's resolved series: which patches of its project's series (or pool) it applies,
to which variants, and why the others are left out (:mod:`patchwheel.patching.gates`).

A project's patches live either beside the target (``patches/<target>/<project>/series``) or
in a pool shared by every target that builds the same upstream release
(``patches/pools/<project>-<version>/series``, named by ``pool = …`` in the project's table).
Either way the series file lists every patch in order; the gates pick, per target, the ones
that apply (Applies-When, Drop-When) and, per variant, the ones it builds with (Variants).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from patchwheel.config.lock import LockedPin
from patchwheel.config.targets import Project
from patchwheel.errors import PatchError
from patchwheel.patching.gates import Gates, gates_of, pin_versions, variants_left, verdict
from patchwheel.patching.patches import SERIES_FILE, Patch, read_series


@dataclass(frozen=True)
class Entry:
    """One patch of the series and what the target does with it."""

    patch: Patch
    gates: Gates
    applied: bool
    variants: tuple[str, ...]  # the variants it is applied to (empty: a source project)
    why: str = ""  # why it is left out

    def to_json(self) -> dict[str, Any]:
        """Its manifest/report object."""
        out: dict[str, Any] = {"name": self.patch.name, "applied": self.applied}
        if self.variants:
            out["variants"] = list(self.variants)
        if self.why:
            out["why"] = self.why
        return out


@dataclass(frozen=True)
class Resolved:
    """A project's series as one target builds it."""

    project: str
    pool: str | None
    entries: tuple[Entry, ...]

    @property
    def patches(self) -> tuple[Patch, ...]:
        """The patches the target applies (to at least one variant), in order."""
        return tuple(e.patch for e in self.entries if e.applied)

    def for_variant(self, variant: str | None) -> tuple[Patch, ...]:
        """The patches one unit applies: a variant's, or a source project's (``None``)."""
        if variant is None:
            return self.patches
        return tuple(e.patch for e in self.entries if e.applied and variant in e.variants)

    def lines(self) -> list[str]:
        """The series in words, one line per patch (what a build prints)."""
        where = f"pool {self.pool}" if self.pool else "the target's own series"
        applied = sum(e.applied for e in self.entries)
        out = [f"{self.project}: {applied} of {len(self.entries)} patch(es) of {where}"]
        for entry in self.entries:
            if entry.applied:
                scope = f" [{', '.join(entry.variants)}]" if entry.gates.variants else ""
                out.append(f"  + {entry.patch.name}{scope}")
            else:
                out.append(f"  - {entry.patch.name}: {entry.why}")
        return out

    def to_json(self) -> dict[str, Any]:
        """The manifest's ``series`` object of the project."""
        return {"pool": self.pool, "patches": [e.to_json() for e in self.entries]}


def resolve_patches(
    project: Project,
    patches: Sequence[Patch],
    versions: Mapping[str, Version | None],
    variants: Sequence[str] | None = None,
) -> Resolved:
    """Resolve given patches (of the project's series) for pins' ``versions`` and the variants
    built (default: the project's own)."""
    built = [v.name for v in project.variants] if variants is None else list(variants)
    entries = []
    for patch in patches:
        where = project.series_dir / patch.name
        gates = gates_of(patch.name, patch.fields, patch.data, where)
        if gates.variants is not None and project.build != "overlay":
            raise PatchError(
                f"{gates.where['Variants']}: patch {patch.name}: `Variants:` is for the "
                f"patches of an overlay project (one with variants); {project.name} is built "
                "from source: remove the line"
            )
        applied, why = verdict(gates, versions, built)
        scope = tuple(v for v in built if v in variants_left(gates, built)) if applied else ()
        entries.append(Entry(patch, gates, applied, scope, why))
    return Resolved(project.name, project.pool, tuple(entries))


def resolve(project: Project, lock: Mapping[str, LockedPin]) -> Resolved:
    """The project's series resolved for the target's locked pins and its variants."""
    series = read_series(project.series_dir)
    if project.pool and not (project.series_dir / SERIES_FILE).is_file():
        raise PatchError(f"pool {project.pool}: {project.series_dir / SERIES_FILE} is missing")
    return resolve_patches(project, series, pin_versions(lock.values()))
