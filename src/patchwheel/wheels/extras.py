"""Pin a wheel's extras to the target's own builds: a METADATA rewrite (config/extras.py).

For each pinned extra, every ``Requires-Dist`` of that extra naming a distribution of the
target is removed (upstream's ``vllm==0.11.0; extra == "datagen"``), the target's requirements
are added (``vllm==0.32.0; extra == "datagen"``) after the last ``Requires-Dist``, and
``Provides-Extra`` is added where upstream's wheel lacks the extra. Every other byte is kept.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from patchwheel.errors import BuildError

_EXTRA_CLAUSE = re.compile(
    r"""(?:\bextra\s*==\s*(?P<q1>['"])(?P<a>[^'"]*)(?P=q1))"""
    r"""|(?:(?P<q2>['"])(?P<b>[^'"]*)(?P=q2)\s*==\s*extra\b)"""
)


@dataclass(frozen=True)
class PinnedExtra:
    """One extra (normalized name) and the requirements it gets (``vllm==0.32.0``)."""

    name: str
    requires: tuple[str, ...]


@dataclass(frozen=True)
class ExtrasRewrite:
    """What :func:`pin_extras` did: the lines it removed and added."""

    removed: tuple[str, ...]
    added: tuple[str, ...]

    def record(self) -> dict[str, list[str]]:
        """The manifest's ``details.extras``: the lines removed and added."""
        return {"removed": list(self.removed), "added": list(self.added)}


def pin_extras(
    metadata: bytes, extras: Collection[PinnedExtra], replaces: Collection[str]
) -> tuple[bytes, ExtrasRewrite]:
    """The METADATA with ``extras`` pinned; ``replaces``: the target's distribution names."""
    if not extras:
        return metadata, ExtrasRewrite((), ())
    text = metadata.decode("utf-8")
    newline = "\r\n" if "\r\n" in text else "\n"
    head, sep, body = text.partition(newline + newline)
    lines = head.split(newline)
    pinned = {e.name for e in extras}
    targets: set[str] = {canonicalize_name(n) for n in replaces}
    kept: list[str] = []
    removed: list[str] = []
    provided: set[str] = set()
    for line in lines:
        field, _, value = line.partition(":")
        field = field.strip().lower()
        if field == "provides-extra":
            provided.add(canonicalize_name(value.strip()))
        elif field == "requires-dist" and _names_pinned(value.strip(), pinned, targets):
            removed.append(value.strip())
            continue
        kept.append(line)
    added = [f'{req}; extra == "{extra.name}"' for extra in extras for req in extra.requires]
    new_extras = [f"Provides-Extra: {e.name}" for e in extras if e.name not in provided]
    at = _after_last(kept, ("requires-dist", "provides-extra"))
    kept[at:at] = new_extras + [f"Requires-Dist: {line}" for line in added]
    out = newline.join(kept) + sep + body
    return out.encode("utf-8"), ExtrasRewrite(tuple(removed), tuple(added))


def _names_pinned(value: str, pinned: set[str], targets: set[str]) -> bool:
    """Whether a ``Requires-Dist`` value belongs to a pinned extra and names the target."""
    try:
        requirement = Requirement(value)
    except InvalidRequirement as exc:
        raise BuildError(f"METADATA: Requires-Dist {value!r} is not a requirement: {exc}") from exc
    if canonicalize_name(requirement.name) not in targets:
        return False
    return bool(set(marker_extras(requirement)) & pinned)


def marker_extras(requirement: Requirement) -> list[str]:
    """The extras a requirement's marker names (``extra == "x"`` either way round), normalized,
    in order."""
    if requirement.marker is None:
        return []
    return [
        canonicalize_name(m.group("a") if m.group("a") is not None else m.group("b"))
        for m in _EXTRA_CLAUSE.finditer(str(requirement.marker))
    ]


def _after_last(lines: list[str], fields: tuple[str, ...]) -> int:
    """The index after the last header line of one of ``fields`` (else after all headers)."""
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].partition(":")[0].strip().lower() in fields:
            return index + 1
    return len(lines)
