"""A wheel's core metadata (``*.dist-info/METADATA``): its bytes, requirements and extras."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.metadata import parse_email
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from patchwheel.errors import BuildError
from patchwheel.wheels.names import find_dist_info, parse_wheel_name


@dataclass(frozen=True)
class WheelMetadata:
    """What a wheel's METADATA says about its requirements."""

    filename: str
    raw: bytes
    requires_dist: tuple[str, ...]
    provides_extra: tuple[str, ...]
    requires_python: str | None

    def requirements(self) -> list[tuple[str, Requirement]]:
        """Each ``Requires-Dist`` line with its parsed requirement (BuildError if malformed)."""
        parsed = []
        for line in self.requires_dist:
            try:
                parsed.append((line, Requirement(line)))
            except InvalidRequirement as exc:
                raise BuildError(
                    f"{self.filename}: Requires-Dist {line!r} is not a requirement: {exc}"
                ) from exc
        return parsed

    def has_extra(self, extra: str) -> bool:
        """Whether the wheel declares ``Provides-Extra: extra`` (names compared normalized)."""
        want = canonicalize_name(extra)
        return any(canonicalize_name(e) == want for e in self.provides_extra)


def read_bytes(wheel: Path, filename: str | None = None) -> bytes:
    """The raw ``*.dist-info/METADATA`` of a wheel file (``filename``: the wheel's name, where
    the file lies under another, e.g. a cache blob)."""
    name = parse_wheel_name(filename or wheel.name)
    try:
        with zipfile.ZipFile(wheel) as zf:
            dist_info = find_dist_info(zf.namelist(), name.distribution)
            return zf.read(f"{dist_info}/METADATA")
    except (OSError, zipfile.BadZipFile, KeyError) as exc:
        raise BuildError(f"{wheel}: cannot read its METADATA ({exc})") from exc


def read(wheel: Path, filename: str | None = None) -> WheelMetadata:
    """The metadata of a wheel file (``filename`` as for :func:`read_bytes`)."""
    raw = read_bytes(wheel, filename)
    fields = parse_email(raw)[0]
    return WheelMetadata(
        filename=filename or wheel.name,
        raw=raw,
        requires_dist=tuple(fields.get("requires_dist", [])),
        provides_extra=tuple(fields.get("provides_extra", [])),
        requires_python=fields.get("requires_python"),
    )
