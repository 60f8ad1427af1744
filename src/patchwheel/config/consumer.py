"""``[consumer.<variant>]`` in target.toml: how a user installs one variant of the built set.

::

    [consumer.cpu]
    install = ["speculators[datagen-cpu]"]          # what the user asks pip/uv for
    exclude = ["torchvision", "torchaudio", "torchcodec"]   # dropped from the install
    extra-index-urls = ["https://download.pytorch.org/whl/cpu"]   # besides the public index

One table per *flavour*: a variant name of the target's overlay projects (``cpu``, ``cuda``),
or ``default`` for a target without variants. A flavour left out installs every source-built
distribution plus the variant's own. The versions never appear here: ``constraints.txt`` pins
every built distribution at its exact version (``index/consumer.py`` writes it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from patchwheel.errors import ConfigError

DEFAULT_FLAVOUR = "default"
_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
KEYS = {"install", "exclude", "extra-index-urls"}


@dataclass(frozen=True)
class ConsumerSpec:
    """One flavour's install: requirements, excluded dependencies, extra indexes."""

    flavour: str
    install: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    extra_index_urls: tuple[str, ...] = ()
    declared: bool = False

    @property
    def requirements(self) -> list[Requirement]:
        """``install`` parsed (validated when the target was read)."""
        return [Requirement(text) for text in self.install]


def parse_consumers(
    data: Any,
    *,
    flavours: dict[str, list[str]],
    source_distributions: list[str],
    where: str,
) -> dict[str, ConsumerSpec]:
    """Every flavour's spec: the declared ``[consumer.<flavour>]`` tables, defaults elsewhere.

    ``flavours`` maps each flavour to the distributions its variant builds; a target's other
    distributions are ``source_distributions``.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: [consumer] must be a table of [consumer.<variant>] tables")
    unknown = sorted(set(data) - set(flavours))
    if unknown:
        raise ConfigError(
            f"{where}: [consumer.{unknown[0]}] names no variant of this target "
            f"(its variants: {', '.join(flavours)})"
        )
    built: set[str] = {
        canonicalize_name(n)
        for n in [*source_distributions, *(d for ds in flavours.values() for d in ds)]
    }
    specs: dict[str, ConsumerSpec] = {}
    for flavour, own in flavours.items():
        table = data.get(flavour)
        if table is None:
            specs[flavour] = ConsumerSpec(flavour, (*source_distributions, *own))
            continue
        specs[flavour] = _parse(flavour, table, built, f"{where} [consumer.{flavour}]")
    return specs


def _parse(flavour: str, table: Any, built: set[str], where: str) -> ConsumerSpec:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(KEYS)}")
    install = _strings(table.get("install"), f"{where} install", required=True)
    for text in install:
        _install_requirement(text, built, f"{where} install")
    exclude = _strings(table.get("exclude", []), f"{where} exclude")
    for name in exclude:
        if not _NAME_RE.match(name):
            raise ConfigError(f"{where} exclude: {name!r} is not a project name")
        if canonicalize_name(name) in built:
            raise ConfigError(
                f"{where} exclude: {name!r} is built by this target; excluding it would drop "
                "the built wheel"
            )
    urls = _strings(table.get("extra-index-urls", []), f"{where} extra-index-urls")
    for url in urls:
        _index_url(url, f"{where} extra-index-urls")
    return ConsumerSpec(flavour, tuple(install), tuple(exclude), tuple(urls), declared=True)


def _strings(value: Any, where: str, *, required: bool = False) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: must be a list of strings")
    if required and not value:
        raise ConfigError(f"{where}: must name at least one requirement")
    if len(set(value)) != len(value):
        raise ConfigError(f"{where}: lists an entry twice")
    return list(value)


def _install_requirement(text: str, built: set[str], where: str) -> None:
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise ConfigError(f"{where}: {text!r} is not a requirement: {exc}") from exc
    if canonicalize_name(req.name) not in built:
        raise ConfigError(
            f"{where}: {text!r} is not a distribution this target builds "
            f"({', '.join(sorted(built))}); its dependencies come with it"
        )
    if req.url or req.specifier or req.marker:
        raise ConfigError(
            f"{where}: {text!r}: give the name and extras only; constraints.txt pins the "
            "built version"
        )


def _index_url(url: str, where: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: {url!r} is not an http(s) index URL")
    if parts.username or parts.password:
        raise ConfigError(
            f"{where}: {url!r} carries credentials; they belong in the user's pip/uv "
            "configuration or keyring, not in target.toml"
        )
    if any(c.isspace() or c in "'\"\\$`" for c in url):
        raise ConfigError(f"{where}: {url!r} contains characters a shell would interpret")
