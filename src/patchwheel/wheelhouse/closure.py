"""The dependency graph of a wheelhouse, walked from wheel metadata for a foreign destination.

uv decides *which* versions; this module re-reads the ``Requires-Dist`` of every carried wheel
(markers evaluated for the destination, extras followed) to say *why* each package is there and
to check every requirement on a package the destination already has against the version it
has: a requirement the installed version does not satisfy is reported, never dropped silently.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import Marker
from packaging.metadata import parse_email
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from patchwheel.errors import BuildError
from patchwheel.wheelhouse.destination import Installed

REQUESTED = "(requested)"

MetadataSource = Callable[[NormalizedName], bytes]


@dataclass(frozen=True)
class Mismatch:
    """A requirement the destination's installed version does not satisfy."""

    name: NormalizedName
    installed: str
    requirement: str
    required_by: str

    def describe(self) -> str:
        """``vllm 0.26.0 requires numba==0.65.0; the destination has 0.68.0``."""
        return (
            f"{self.required_by} requires {self.requirement}; "
            f"the destination has {self.name} {self.installed}"
        )


@dataclass
class Graph:
    """Who requires whom (by canonical name), for the destination's markers."""

    required_by: dict[NormalizedName, set[str]] = field(default_factory=dict)
    requirements: dict[NormalizedName, list[tuple[str, Requirement]]] = field(default_factory=dict)

    def parents(self, name: NormalizedName) -> list[str]:
        """The packages that require ``name`` (``(requested)`` for the roots), sorted."""
        return sorted(self.required_by.get(name, set()))


def requires_dist(metadata: bytes, what: str) -> list[Requirement]:
    """The ``Requires-Dist`` entries of a METADATA file."""
    out = []
    for text in parse_email(metadata)[0].get("requires_dist", []):
        try:
            out.append(Requirement(str(text)))
        except InvalidRequirement as exc:
            raise BuildError(f"{what}: unreadable Requires-Dist {text!r}: {exc}") from exc
    return out


def wheel_metadata(path: Path) -> bytes:
    """The METADATA of a wheel file."""
    with zipfile.ZipFile(path) as zf:
        names = [
            n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        ]
        if len(names) != 1:
            raise BuildError(f"{path}: expected one *.dist-info/METADATA, found {len(names)}")
        return zf.read(names[0])


def walk(
    roots: Iterable[Requirement],
    carried: set[NormalizedName],
    metadata: MetadataSource,
    environment: dict[str, str],
) -> Graph:
    """Follow requirements from ``roots`` through every carried package.

    Packages outside ``carried`` (installed, dropped) are recorded as required but not entered.
    """
    graph = Graph()
    seen: set[tuple[NormalizedName, str]] = set()
    cache: dict[NormalizedName, list[Requirement]] = {}
    queue: list[tuple[str, str, Requirement]] = [(REQUESTED, "", r) for r in roots]
    while queue:
        parent, parent_extra, req = queue.pop(0)
        if req.marker is not None and not _applies(req.marker, environment, parent_extra):
            continue
        name = canonicalize_name(req.name)
        graph.required_by.setdefault(name, set()).add(parent)
        graph.requirements.setdefault(name, []).append((parent, req))
        if name not in carried:
            continue
        for extra in ("", *sorted(canonicalize_name(e) for e in req.extras)):
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            if name not in cache:
                cache[name] = requires_dist(metadata(name), what=name)
            queue.extend((name, extra, child) for child in cache[name])
    return graph


def _applies(marker: Marker, environment: dict[str, str], extra: str) -> bool:
    return marker.evaluate({**environment, "extra": extra})


def installed_mismatches(graph: Graph, installed: Installed) -> list[Mismatch]:
    """Every requirement on an installed package that its installed version does not meet."""
    out: list[Mismatch] = []
    for name, edges in sorted(graph.requirements.items()):
        version = installed.version(name)
        if version is None:
            continue
        for parent, req in edges:
            if not _satisfies(version, req):
                shown = str(req.specifier) or "(any)"
                out.append(Mismatch(name, str(version), f"{name}{shown}", parent))
    return sorted(set(out), key=lambda m: (m.name, m.required_by))


def _satisfies(version: Version, req: Requirement) -> bool:
    return req.specifier.contains(version, prereleases=True)
