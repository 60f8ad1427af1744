"""Where a target stands against its channel: is the revision found newer than the pin, the
pin itself, or older; and are the target's build, audit and verification at its pins.

A roll never moves a pin backwards unless asked (``--allow-downgrade``): a channel's newest
build can be older than the pin (a stale cache, a rollback upstream), and so can the newest
release on the package index (a release yanked, final releases only while the pin is a
pre-release taken with ``--pre``). Versions are compared on their public part
(``0.33.1rc1.dev123``, the ``+g<commit>`` label aside); where they tie, or the pin names no
version, a nightly channel's repository says whether the new commit is an ancestor of the
pinned one.

"Up to date" is more than pins: the current ``build/<target>`` must be the build of the
target's inputs now (pins, series, settings), and the roll report in it (``roll.json``) must be
a green one of that build — so a build left at other inputs, or a roll that never finished its
checks, is not up to date.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import git
from packaging.version import InvalidVersion, Version

from patchwheel.building.plan import inputs_key, plan
from patchwheel.config.lock import LockedPin, locked_pins
from patchwheel.config.pins import IndexPin, parse_pin
from patchwheel.config.targets import load_target
from patchwheel.errors import PatchwheelError, PinError
from patchwheel.index import outputs
from patchwheel.roll.discover import RollPlan
from patchwheel.upstream import gitsrc
from patchwheel.upstream.cache import Cache
from patchwheel.workspace import Workspace

Position = Literal["newer", "same", "older"]
REPORT_JSON = "roll.json"
VERIFIED = ("green", "up-to-date")


def pinned_version(entry: LockedPin) -> Version | None:
    """The version a lock entry pins: recorded (a channel's commit), or the pin's own."""
    text = entry.version
    if text is None:
        try:
            pin = parse_pin(entry.pin)
        except PinError:
            return None
        text = pin.version if isinstance(pin, IndexPin) else None
    if text is None:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def position(plan: RollPlan, lock: dict[str, LockedPin], cache: Cache) -> Position:
    """Whether the plan's revision is newer than the pin, the pin, or older."""
    if plan.up_to_date(lock):
        return "same"
    entry = lock[plan.project.source.key]
    if entry.commit is not None and entry.commit == plan.commit:
        return "newer"  # the same revision, other files (a variant's wheel): a move
    pinned = pinned_version(entry)
    try:
        found = Version(plan.version)
    except InvalidVersion:
        found = None
    if pinned is not None and found is not None:
        old, new = Version(pinned.public), Version(found.public)
        if new != old:
            return "newer" if new > old else "older"
    if entry.commit and plan.commit and plan.repository:
        try:
            repo = gitsrc.mirror_repo(plan.repository, cache)
            if gitsrc.is_ancestor(repo, plan.commit, entry.commit):
                return "older"
        except (PatchwheelError, git.GitCommandError, ValueError):
            pass  # the repository cannot say: not known to be older
    return "newer"


def describe_pins(entry: LockedPin, lock: dict[str, LockedPin], project: str) -> dict[str, Any]:
    """The target's own revision, in the shape of :meth:`RollPlan.describe`."""
    version = pinned_version(entry)
    return {
        "version": str(version) if version is not None else None,
        "commit": entry.commit,
        "probed": 0,
        "pins": {k: e.pin for k, e in lock.items() if k.split(":", 1)[0] == project},
        "wheels": {},
    }


def verified_report(workspace: Workspace, name: str) -> dict[str, Any] | None:
    """The green roll report of ``build/<name>`` when it is the report of the build of the
    target's inputs now (None: not built at them, or not rolled green at them)."""
    target = load_target(workspace.patches, name)
    key = inputs_key(plan(target, locked_pins(target)))
    if outputs.up_to_date(workspace.build, name, key) is None:
        return None
    store = outputs.current(workspace.build, name)
    path = store / REPORT_JSON if store is not None else None
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text("utf-8"))
    except (ValueError, RecursionError, OSError):
        return None
    build = data.get("build") if isinstance(data, dict) else None
    if not isinstance(build, dict) or data.get("status") not in VERIFIED:
        return None
    return data if build.get("inputs") == key else None
