"""Resolution of pins: each pin of a target to an exact artifact (sha256) or commit, written
into its lock (network: the package index, downloads, git).

``patchwheel lock`` keeps what is already locked; a moved tag or a changed file is an error
naming both values unless that pin is named in ``--update``. A build never resolves anything
(see :func:`patchwheel.config.lock.locked_pins`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from patchwheel import console
from patchwheel.config.lock import (
    LockedPin,
    artifact_kind,
    check_declared_sha,
    read_lock,
    write_lock,
)
from patchwheel.config.pins import GitPin, IndexPin, PathPin, Pin, UrlPin
from patchwheel.config.targets import PinSpec, Target
from patchwheel.errors import LockError, NotOnIndexError, PinError
from patchwheel.upstream import gitsrc
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.fetch import fetch_path, fetch_url
from patchwheel.upstream.simple_api import IndexFile, project_files


def lock_target(
    target: Target, cache: Cache, *, update: Iterable[str] = ()
) -> dict[str, LockedPin]:
    """Resolve new or changed pins, keep the rest, and write the lock.

    A git tag that moved since it was locked is an error unless its key (or project name) is
    in ``update``, which re-resolves those pins on purpose.
    """
    update_set = set(update)
    old = read_lock(target.lock_path)
    new: list[LockedPin] = []
    for spec in target.pin_specs:
        forced = spec.key in update_set or spec.key.split(":")[0] in update_set
        entry = old.get(spec.key)
        if entry is not None and entry.pin == spec.pin.text and not forced:
            _check_still_valid(spec, entry)
            new.append(entry)
            continue
        console.status(f"resolve {spec.key}: {spec.pin.text}")
        resolved = resolve(spec, cache)
        check_declared_sha(spec, resolved)
        new.append(resolved)
    write_lock(target.lock_path, new)
    return {entry.key: entry for entry in new}


def _check_still_valid(spec: PinSpec, entry: LockedPin) -> None:
    check_declared_sha(spec, entry)
    if isinstance(spec.pin, GitPin) and not spec.pin.is_commit:
        current = gitsrc.ls_remote(spec.pin)
        if current != entry.commit:
            raise LockError(
                f"pin {spec.pin.text!r}: {spec.pin.rev!r} moved from {entry.commit} to {current}; "
                f"re-lock on purpose with `nox -s lock -- --update {spec.key}`"
            )


def resolve(spec: PinSpec, cache: Cache) -> LockedPin:
    """Resolve one pin to an exact artifact or commit (network)."""
    pin = spec.pin
    if isinstance(pin, GitPin):
        commit = gitsrc.ls_remote(pin)
        return LockedPin(spec.key, pin.text, "git", url=pin.url, rev=pin.rev, commit=commit)
    if isinstance(pin, IndexPin):
        return _resolve_index(spec, pin, cache)
    if isinstance(pin, UrlPin):
        path = fetch_url(pin.url, spec.sha256, cache, what=f"pin {pin.text!r}")
        return _artifact(spec, pin, pin.filename, path, url=pin.url)
    if isinstance(pin, PathPin):
        if pin.path.is_dir():
            return LockedPin(spec.key, pin.text, "directory")
        path = fetch_path(pin.path, spec.sha256, cache, what=f"pin {pin.text!r}")
        return _artifact(spec, pin, pin.filename, path, url=None)
    raise PinError(f"pin {pin.text!r}: unsupported pin type")  # pragma: no cover


def _artifact(spec: PinSpec, pin: Pin, filename: str, path: Path, url: str | None) -> LockedPin:
    kind = artifact_kind(filename, what=pin.text)
    if kind != spec.artifact:
        raise PinError(
            f"pin {pin.text!r}: expected a {spec.artifact} for {spec.key}, got {filename}"
        )
    return LockedPin(
        spec.key,
        pin.text,
        kind,
        sha256=path.name,
        filename=filename,
        size=path.stat().st_size,
        url=url,
    )


def _resolve_index(spec: PinSpec, pin: IndexPin, cache: Cache) -> LockedPin:
    files = [f for f in project_files(pin.name) if not f.yanked]
    want = Version(pin.version)
    if spec.artifact == "sdist":
        candidates = [f for f in files if _sdist_matches(f.filename, pin.name, want)]
    else:
        candidates = [f for f in files if _wheel_matches(f.filename, pin.name, want, spec.platform)]
    if not candidates:
        raise NotOnIndexError(
            f"pin {pin.text!r}: the package index has no {spec.artifact} of {pin.name} {want}"
            + (f" for platform {spec.platform!r}" if spec.artifact == "wheel" else "")
        )
    if len(candidates) > 1:
        names = ", ".join(f.filename for f in candidates)
        raise PinError(
            f"pin {pin.text!r}: several {spec.artifact}s match ({names}); "
            "set `platform` to the wheel's platform tag"
        )
    chosen: IndexFile = candidates[0]
    sha256 = chosen.sha256 or fetch_url(chosen.url, None, cache, what=pin.text).name
    return LockedPin(
        spec.key,
        pin.text,
        spec.artifact,
        sha256=sha256,
        filename=chosen.filename,
        size=chosen.size,
    )


def _sdist_matches(filename: str, name: str, version: Version) -> bool:
    try:
        sname, sversion = parse_sdist_filename(filename)
    except InvalidSdistFilename:
        return False
    return sname == canonicalize_name(name) and sversion == version


def _wheel_matches(filename: str, name: str, version: Version, platform: str) -> bool:
    try:
        wname, wversion, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    if wname != canonicalize_name(name) or wversion != version:
        return False
    return any(platform in tag.platform or tag.platform == "any" for tag in tags)
