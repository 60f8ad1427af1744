"""The lock: every pin of a target resolved to an exact artifact (sha256) or commit.

``patches/<target>/target.lock`` is written by ``patchwheel lock`` (the resolution is
:mod:`patchwheel.upstream.resolve`) and read by every build. A build never resolves anything:
a pin missing from the lock, or changed since, is an error that says to re-lock.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import tomli_w

from patchwheel import atomic
from patchwheel.config.targets import PinSpec, Target
from patchwheel.errors import LockError, PinError

Kind = Literal["sdist", "wheel", "git", "directory"]
SCHEMA = 1
HEADER = "# Resolved pins of this target. Written by `patchwheel lock`; do not edit by hand.\n"


@dataclass(frozen=True)
class LockedPin:
    """One resolved pin: an artifact with its sha256, or a git commit."""

    key: str
    pin: str
    kind: Kind
    sha256: str | None = None
    filename: str | None = None
    size: int | None = None
    url: str | None = None
    rev: str | None = None
    commit: str | None = None
    # The version the revision carries where the pin does not say it (a channel's git commit:
    # ``0.33.1rc1.dev123+g1a2b3c4d5``); read by Drop-When predicates.
    version: str | None = None

    @property
    def identity(self) -> str:
        """What identifies the revision: the sha256 or the commit."""
        return self.sha256 or self.commit or self.pin


def read_lock(path: Path) -> dict[str, LockedPin]:
    """Read a lock file (empty when it does not exist)."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise LockError(f"{path}: {exc}; delete it and run `nox -s lock`") from exc
    if data.get("schema") != SCHEMA:
        raise LockError(f"{path}: unknown lock schema {data.get('schema')!r}; run `nox -s lock`")
    pins: dict[str, Any] = data.get("pins", {})
    return {key: LockedPin(key=key, **entry) for key, entry in pins.items()}


def write_lock(path: Path, locked: Iterable[LockedPin]) -> None:
    """Write a lock file atomically, entries in target order."""
    pins = {}
    for entry in locked:
        fields = {k: v for k, v in asdict(entry).items() if v is not None and k != "key"}
        pins[entry.key] = fields
    atomic.write_text(path, HEADER + tomli_w.dumps({"schema": SCHEMA, "pins": pins}))


def locked_pins(target: Target) -> dict[str, LockedPin]:
    """The target's lock, checked against ``target.toml``: every pin present and unchanged."""
    lock = read_lock(target.lock_path)
    for spec in target.pin_specs:
        entry = lock.get(spec.key)
        if entry is None:
            raise LockError(
                f"target {target.name}: pin {spec.pin.text!r} ({spec.key}) is not locked; "
                f"run `nox -s lock -- --target {target.name}`"
            )
        if entry.pin != spec.pin.text:
            raise LockError(
                f"target {target.name}: pin {spec.key} changed: target.toml says "
                f"{spec.pin.text!r}, the lock says {entry.pin!r}; run "
                f"`nox -s lock -- --target {target.name}` to record the new pin"
            )
        check_declared_sha(spec, entry)
    return lock


def check_declared_sha(spec: PinSpec, entry: LockedPin) -> None:
    """Refuse a lock entry whose sha256 differs from the one target.toml declares."""
    if spec.sha256 and entry.sha256 and spec.sha256 != entry.sha256:
        raise LockError(
            f"pin {spec.pin.text!r}: target.toml declares sha256 {spec.sha256}, "
            f"the lock records {entry.sha256}; fix the one that is wrong"
        )


def artifact_kind(filename: str, *, what: str) -> Literal["sdist", "wheel"]:
    """Whether a file name is a wheel or an sdist."""
    if filename.endswith(".whl"):
        return "wheel"
    if filename.endswith((".tar.gz", ".zip", ".tgz")):
        return "sdist"
    raise PinError(f"pin {what!r}: {filename} is neither a wheel nor an sdist")
