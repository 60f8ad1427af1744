"""``[projects.P.channel]`` in target.toml: where a project's newer revisions come from (a
roll's channel, when the project does not follow its releases on the package index)::

    [projects.vllm.channel]
    index = "https://wheels.vllm.ai/"       # nightly / per-commit wheels
    repository = "https://github.com/vllm-project/vllm.git"   # their sources
    layout = "per-commit"                   # /<40-hex commit>/… trees; or "simple"
    latest = "nightly"                      # per-commit: the tree holding only the newest build
    distribution = "vllm"                   # optional: the wheels' project name on the index
    [projects.vllm.channel.variants]        # per variant: its sub-tree and local-label suffix
    cuda = { path = "", local = "" }
    cpu = { path = "cpu", local = "cpu" }   # the default for a variant left out: its own name
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from patchwheel.config.pins import GitPin, parse_pin
from patchwheel.errors import ConfigError, PinError

Layout = Literal["per-commit", "simple"]
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_LOCAL = re.compile(r"^(?:[a-z0-9]+(?:\.[a-z0-9]+)*)?$")


@dataclass(frozen=True)
class ChannelVariant:
    """Where a channel publishes one variant: a sub-tree, and the local-label suffix its
    versions carry (vLLM's CPU wheels: ``cpu/``, ``…+g1a2b3c4d5.cpu``)."""

    name: str
    path: str = ""
    local: str = ""


@dataclass(frozen=True)
class Channel:
    """Where a project's newer revisions come from: an index of nightly or per-commit wheels
    (versions carrying ``+g<commit>``) and the git repository holding their sources."""

    index: str  # the channel's root URL, ending in "/"
    repository: str  # a git URL
    distribution: str  # the wheels' project name on the index
    layout: Layout = "per-commit"
    latest: str = "nightly"
    variants: tuple[ChannelVariant, ...] = ()

    def variant(self, name: str) -> ChannelVariant:
        """Where the channel publishes the variant ``name``."""
        for variant in self.variants:
            if variant.name == name:
                return variant
        return ChannelVariant(name, name, name)


def parse_channel(project: str, data: Any, variants: Collection[str], where: str) -> Channel:
    """``[projects.P.channel]`` of project ``project`` whose variants are ``variants``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a table")
    only_keys(data, {"index", "repository", "layout", "latest", "distribution", "variants"}, where)
    index = data.get("index")
    if not isinstance(index, str):
        raise ConfigError(f'{where}: needs `index = "https://…/"` (the channel\'s wheel index)')
    parts = urlsplit(index)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ConfigError(
            f"{where}: index {index!r} must be an http(s) URL without query or fragment"
        )
    if not index.endswith("/"):
        index += "/"
    repository = data.get("repository")
    if not isinstance(repository, str):
        raise ConfigError(f'{where}: needs `repository = "https://…/repo.git"` (the sources)')
    try:
        git_pin = parse_pin(f"{project} @ git+{repository}@HEAD")
    except PinError as exc:
        raise ConfigError(f"{where}: repository {repository!r}: {exc}") from exc
    if not isinstance(git_pin, GitPin):  # pragma: no cover - the prefix makes it one
        raise ConfigError(f"{where}: repository {repository!r} is not a git URL")
    layout = data.get("layout", "per-commit")
    if layout not in ("per-commit", "simple"):
        raise ConfigError(f'{where}: layout must be "per-commit" or "simple" (got {layout!r})')
    latest = data.get("latest", "nightly")
    if not isinstance(latest, str) or not _SEGMENT.match(latest):
        raise ConfigError(f"{where}: latest {latest!r} must be one path segment (e.g. nightly)")
    distribution = data.get("distribution", project)
    if not isinstance(distribution, str) or not _SEGMENT.match(distribution):
        raise ConfigError(f"{where}: distribution {distribution!r} is not a project name")
    known = set(variants)
    table = data.get("variants", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: variants must be a table of {{ path, local }} per variant")
    channel_variants = []
    for vname, vdata in table.items():
        vwhere = f"{where} variant {vname}"
        if vname not in known:
            raise ConfigError(
                f"{vwhere}: the project has no variant {vname!r} (it has: "
                f"{', '.join(sorted(known)) or 'none'})"
            )
        if not isinstance(vdata, dict):
            raise ConfigError(f"{vwhere}: must be a table {{ path = …, local = … }}")
        only_keys(vdata, {"path", "local"}, vwhere)
        path = vdata.get("path", vname)
        local = vdata.get("local", vname)
        if not isinstance(path, str) or not all(_SEGMENT.match(p) for p in _parts(path)):
            raise ConfigError(f"{vwhere}: path {path!r} must be a relative path of plain names")
        if not isinstance(local, str) or not _LOCAL.match(local):
            raise ConfigError(
                f"{vwhere}: local {local!r} must be a PEP 440 local-label suffix (e.g. cpu)"
            )
        channel_variants.append(ChannelVariant(vname, "/".join(_parts(path)), local))
    return Channel(
        index=index,
        repository=git_pin.url,
        distribution=canonicalize_name(distribution),
        layout=layout,
        latest=latest,
        variants=tuple(channel_variants),
    )


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p]


def only_keys(data: dict[str, Any], allowed: set[str], where: str) -> None:
    """Refuse a table's keys other than ``allowed``, naming them."""
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
