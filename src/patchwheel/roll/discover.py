"""Step 1 of a roll: the channel's newest (or asked-for) revision, turned into pins.

The project that follows a channel gets its source pinned to the revision's full commit in the
channel's repository (``vllm @ git+URL@<40 hex>``) and each variant to that revision's wheel
(``vllm @ https://…/<commit>/vllm-…%2Bg….cpu-….whl``), downloaded, hashed and cached like
every fetch; the sha256 goes into target.toml beside the pin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from patchwheel import console
from patchwheel.config.lock import LockedPin
from patchwheel.config.targets import Channel, Project, Target
from patchwheel.errors import ConfigError, FetchError
from patchwheel.rebase.onto import KeyPin
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.channel import Build, find_build
from patchwheel.upstream.channel_index import stays_in
from patchwheel.upstream.fetch import fetch_url


@dataclass
class RollPlan:
    """The revision a roll moves to and the pins that say so."""

    project: Project
    channel: Channel
    build: Build
    pins: dict[str, KeyPin] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    wheels: dict[str, dict[str, Any]] = field(default_factory=dict)

    def up_to_date(self, lock: dict[str, LockedPin]) -> bool:
        """Whether the target is pinned to this revision already."""
        return all(lock[key].pin == wanted.pin for key, wanted in self.pins.items())

    def describe(self) -> dict[str, Any]:
        """The new revision, as the roll report records it."""
        return {
            "version": self.build.version,
            "commit": self.build.commit,
            "probed": self.build.probed,
            "pins": {key: p.pin for key, p in self.pins.items()},
            "wheels": self.wheels,
        }


def channel_project(target: Target) -> Project:
    """The one project of the target that follows a channel."""
    following = [p for p in target.projects if p.channel is not None]
    if len(following) != 1:
        names = ", ".join(p.name for p in following) or "none"
        raise ConfigError(
            f"target {target.name}: a roll needs exactly one project with a [projects.NAME."
            f"channel] table in target.toml (found: {names}); see the README's Nightly channels"
        )
    return following[0]


def plan_roll(
    target: Target, lock: dict[str, LockedPin], cache: Cache, *, to: str | None
) -> RollPlan:
    """Find the revision and download its wheels (network)."""
    project = channel_project(target)
    channel = project.channel
    assert channel is not None
    current = lock[project.source.key]
    floor = current.commit if current.kind == "git" else None
    console.status(f"{project.name}: look for {to or 'the newest build'} on {channel.index}")
    build = find_build(project, cache, to=to, floor=floor)
    console.status(f"{project.name}: {build.version} (commit {build.commit[:12]})")
    plan = RollPlan(project, channel, build)
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
