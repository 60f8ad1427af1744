"""A channel's builds: which revision is the newest (or the asked-for one), its full commit in
the sources' repository, and each variant's wheel (network: index pages and git).

Layouts (``[projects.P.channel] layout``):

* ``per-commit`` — shaped like https://wheels.vllm.ai: ``<index>/<40-hex commit>/`` holds the
  wheels of one commit (one sub-tree per variant, e.g. ``cpu/``), ``<index>/nightly/`` only the
  newest build; static PEP 503 pages (no hashes, ``%2B`` for ``+``). The newest build is read
  from the ``nightly`` tree; when a variant the target needs was not built for that commit
  (vLLM builds some variants on demand), earlier first-parent commits are probed, newest first,
  down to the current pin.
* ``simple`` — one PEP 503 / PEP 691 index listing every build of the distribution (a variant's
  ``path`` is a sub-index).

A build's commit comes from its version's local label: ``0.33.1rc1.dev123+g1a2b3c4d5`` (a
variant appends ``.cpu``) names commit ``1a2b3c4d5…``, expanded to all 40 hex digits in the
repository (fetched when the prefix is unknown); a prefix naming several commits is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import git
from packaging.version import InvalidVersion, Version

from patchwheel import console
from patchwheel.config.channel import Channel, ChannelVariant
from patchwheel.config.targets import Project
from patchwheel.errors import ConfigError, FetchError
from patchwheel.upstream import gitsrc
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.channel_index import Listed, read_page

LATEST = "latest"
MAX_PROBES = 24
_LABEL = re.compile(r"^g([0-9a-f]{7,40})$")
_COMMITISH = re.compile(r"^[0-9a-f]{7,40}$")


@dataclass(frozen=True)
class ChannelWheel:
    """One variant's wheel of a build."""

    variant: str
    filename: str
    url: str
    sha256: str | None
    size: int | None


@dataclass(frozen=True)
class Build:
    """One revision of a channel: its version (without a variant suffix), commit and wheels."""

    project: str
    version: str
    commit: str
    wheels: dict[str, ChannelWheel] = field(default_factory=dict)
    probed: int = 1  # how many commits were looked at to find it


def find_build(
    project: Project, cache: Cache, *, to: str | None = None, floor: str | None = None
) -> Build:
    """The channel's newest build (``to`` None or ``latest``), or the build of a version
    (``0.33.1rc1.dev123+g1a2b3c4d5``) or commit (7-40 hex) that has a wheel for every variant
    of ``project``. ``floor``: the commit pinned now (the walk back never goes past it)."""
    channel = _channel(project)
    what = f"channel of {project.name} ({channel.index})"
    repo = gitsrc.mirror_repo(channel.repository, cache)
    if channel.layout == "simple":
        return _simple(project, channel, repo, cache, to, what)
    if to is None or to == LATEST:
        return _newest(project, channel, repo, cache, floor, what)
    commit = _commit_of(to, channel, repo, cache, what)
    build = _at_commit(project, channel, commit, what)
    missing = _missing(project, build)
    if missing:
        raise FetchError(
            f"{what}: commit {commit[:12]} has no wheel for variant(s) {', '.join(missing)} "
            f"at {_tree_url(channel, commit, channel.variant(missing[0]))}; pick another "
            "revision (or drop the variant from the target)"
        )
    return build


def label_of(version: Version, variant: ChannelVariant) -> str | None:
    """The commit prefix a channel version carries for ``variant`` (None: not a build of it)."""
    parts = (version.local or "").split(".")
    match = _LABEL.match(parts[0])
    if match is None:
        return None
    if ".".join(parts[1:]) != variant.local:
        return None
    return match.group(1)


def public_version(version: Version, variant: ChannelVariant) -> str:
    """The build's version without the variant's suffix: ``0.33.1rc1.dev1+g1a2b3c4d5``."""
    label = label_of(version, variant)
    return f"{version.public}+g{label}" if label else str(version)


# --------------------------------------------------------------------------- per-commit


def _newest(
    project: Project, channel: Channel, repo: git.Repo, cache: Cache, floor: str | None, what: str
) -> Build:
    first = channel.variant(project.variants[0].name) if project.variants else _no_variant()
    nightly = _tree_url(channel, channel.latest, first)
    listed = _wheels(channel, first, nightly, what)
    if not listed:
        raise FetchError(f"{what}: {nightly} lists no {channel.distribution} wheel")
    newest = max(listed, key=lambda item: item.version)
    label = label_of(newest.version, first)
    assert label is not None
    commit = _expand(repo, label, channel, cache, what)
    candidates = gitsrc.first_parents(repo, commit, stop=floor, limit=MAX_PROBES)
    if not candidates:  # the newest build is the pinned commit (or older)
        build = _at_commit(project, channel, commit, what)
        missing = _missing(project, build)
        if missing:
            raise FetchError(
                f"{what}: the newest build ({commit[:12]}, at or before the current pin) has no "
                f"wheel for variant(s) {', '.join(missing)}"
            )
        return build
    for probed, candidate in enumerate(candidates, start=1):
        build = _at_commit(project, channel, candidate, what)
        missing = _missing(project, build)
        if not missing:
            return Build(build.project, build.version, build.commit, build.wheels, probed)
        console.status(
            f"{project.name}: {candidate[:12]} has no {', '.join(missing)} wheel; "
            "trying its first parent"
        )
    raise FetchError(
        f"{what}: none of the {len(candidates)} newest commits from {commit[:12]} has a wheel "
        "for every variant of the target; pass --to a revision that has them"
    )


def _at_commit(project: Project, channel: Channel, commit: str, what: str) -> Build:
    version = ""
    wheels: dict[str, ChannelWheel] = {}
    for variant in project.variants or ():
        cv = channel.variant(variant.name)
        page = _tree_url(channel, commit, cv)
        found = [
            item
            for item in _wheels(channel, cv, page, what)
            if commit.startswith(label_of(item.version, cv) or "-")
        ]
        chosen = _one(found, variant.spec.platform, page, what)
        if chosen is None:
            continue
        wheels[variant.name] = ChannelWheel(
            variant.name, chosen.filename, chosen.url, chosen.sha256, chosen.size
        )
        version = version or public_version(chosen.version, cv)
    return Build(project.name, version, commit, wheels)


def _tree_url(channel: Channel, tree: str, variant: ChannelVariant) -> str:
    parts = [tree, variant.path, channel.distribution]
    return channel.index + "/".join(p for p in parts if p) + "/"


# --------------------------------------------------------------------------- simple


def _simple(
    project: Project, channel: Channel, repo: git.Repo, cache: Cache, to: str | None, what: str
) -> Build:
    by_label: dict[str, dict[str, tuple[Listed, ChannelVariant]]] = {}
    for variant in project.variants or ():
        cv = channel.variant(variant.name)
        page = channel.index + "/".join(p for p in (cv.path, channel.distribution) if p) + "/"
        for item in _wheels(channel, cv, page, what):
            label = label_of(item.version, cv)
            if label is None or not _platform_ok(item, variant.spec.platform):
                continue
            by_label.setdefault(f"{item.version.public}+g{label}", {})[variant.name] = (item, cv)
    needed = {v.name for v in project.variants}
    complete = {k: v for k, v in by_label.items() if set(v) == needed}
    if to is None or to == LATEST:
        if not complete:
            raise FetchError(f"{what}: no build has a wheel for every variant ({sorted(needed)})")
        chosen = max(complete, key=Version)
    elif _COMMITISH.match(to.lower()):
        commit = _expand(repo, to.lower(), channel, cache, what)
        matches = [k for k in complete if commit.startswith(k.rsplit("+g", 1)[1])]
        if len(matches) != 1:
            raise FetchError(f"{what}: {len(matches)} complete builds of commit {commit[:12]}")
        chosen = matches[0]
    else:
        wanted = _version(to, what)
        matches = [k for k in complete if Version(k) == wanted]
        if not matches:
            raise FetchError(f"{what}: no build {to} with a wheel for every variant")
        chosen = matches[0]
    label = chosen.rsplit("+g", 1)[1]
    commit = _expand(repo, label, channel, cache, what)
    wheels = {
        name: ChannelWheel(name, item.filename, item.url, item.sha256, item.size)
        for name, (item, _cv) in complete[chosen].items()
    }
    return Build(project.name, chosen, commit, wheels)


# --------------------------------------------------------------------------- helpers


def _channel(project: Project) -> Channel:
    if project.channel is None:
        raise ConfigError(
            f"project {project.name} follows no channel: add [projects.{project.name}.channel] "
            "to target.toml (index and repository)"
        )
    return project.channel


def _no_variant() -> ChannelVariant:
    return ChannelVariant("", "", "")


def _wheels(channel: Channel, variant: ChannelVariant, page: str, what: str) -> list[Listed]:
    """The variant's builds a page lists (versions carrying ``+g<commit>[.<local>]``)."""
    listed = read_page(page, channel.index, channel.distribution, what=what)
    return [item for item in listed or [] if label_of(item.version, variant) is not None]


def _platform_ok(item: Listed, platform: str) -> bool:
    return any(platform in p or p == "any" for p in item.platforms)


def _one(found: list[Listed], platform: str, page: str, what: str) -> Listed | None:
    matching = [item for item in found if _platform_ok(item, platform)]
    if len(matching) > 1:
        names = ", ".join(item.filename for item in matching)
        raise FetchError(
            f"{what}: {page} lists several wheels for platform {platform!r} ({names}); set "
            "the variant's `platform` in target.toml to the one wanted"
        )
    return matching[0] if matching else None


def _missing(project: Project, build: Build) -> list[str]:
    return [v.name for v in project.variants if v.name not in build.wheels]


def _version(text: str, what: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion as exc:
        raise FetchError(
            f"{what}: --to {text!r} is neither a version, a commit id nor 'latest'"
        ) from exc


def _commit_of(to: str, channel: Channel, repo: git.Repo, cache: Cache, what: str) -> str:
    """The commit a ``--to`` names: a commit id, or a version carrying ``+g<commit>``."""
    if _COMMITISH.match(to.lower()):
        return _expand(repo, to.lower(), channel, cache, what)
    version = _version(to, what)
    local = (version.local or "").split(".")[0]
    match = _LABEL.match(local)
    if match is None:
        raise FetchError(
            f"{what}: version {to} carries no commit label (`+g<commit>`); give a nightly "
            "version such as 0.33.1rc1.dev123+g1a2b3c4d5, a commit, or 'latest'"
        )
    return _expand(repo, match.group(1), channel, cache, what)


def _expand(repo: git.Repo, prefix: str, channel: Channel, cache: Cache, what: str) -> str:
    """The full commit of a prefix, fetching the repository once when it is not known yet."""
    found = gitsrc.expand_commit(repo, prefix, what=what)
    if found is None:
        repo = gitsrc.refresh(channel.repository, cache)
        found = gitsrc.expand_commit(repo, prefix, what=what)
    if found is None:
        raise FetchError(
            f"{what}: commit {prefix} is not in {channel.repository}; is `repository` the "
            "repository the channel's wheels are built from?"
        )
    return found
