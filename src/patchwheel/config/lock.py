"""The lock: every pin of a target resolved to an exact artifact (sha256) or commit.

``patches/<target>/target.lock`` is written by ``patchwheel lock`` (the resolution is
:mod:`patchwheel.upstream.resolve`) and read by every build. A build never resolves anything:
a pin missing from the lock, or changed since, is an error that says to re-lock.

The lock is an input that arrives through review like a patch, so it is treated as hostile:
every entry is checked when it is read — known keys for its kind, the types of their values, a
sha256 of 64 lowercase hex digits, a commit of 40, a file name that is a plain name of an sdist
or wheel of the pinned project — before any value becomes part of a path. A
:class:`LockedPin` that breaks these rules cannot be made (``__post_init__`` checks it too), so
no later layer sees an unchecked value.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import tomli_w
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from patchwheel import atomic
from patchwheel.config.pins import (
    COMMIT_RE,
    SHA256_RE,
    GitPin,
    IndexPin,
    PathPin,
    Pin,
    UrlPin,
    parse_pin,
)
from patchwheel.config.targets import PinSpec, Target
from patchwheel.errors import LockError, PinError

Kind = Literal["sdist", "wheel", "git", "directory"]
SCHEMA = 1
HEADER = "# Resolved pins of this target. Written by `patchwheel lock`; do not edit by hand.\n"

# The keys an entry of each kind has: (required, optional). Anything else is refused.
_ARTIFACT = (("pin", "kind", "sha256", "filename"), ("size", "url", "version"))
KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "sdist": _ARTIFACT,
    "wheel": _ARTIFACT,
    "git": (("pin", "kind", "commit"), ("url", "rev", "version")),
    "directory": (("pin", "kind"), ()),
}
SDIST_SUFFIXES = (".tar.gz", ".zip")


@dataclass(frozen=True)
class LockedPin:
    """One resolved pin: an artifact with its sha256, or a git commit (checked when made)."""

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

    def __post_init__(self) -> None:
        problem = entry_problem(self.key, self.fields())
        if problem is not None:
            field, what = problem
            raise LockError(f"lock entry {self.key!r}, field `{field}`: {what}")

    def fields(self) -> dict[str, Any]:
        """The entry as the lock file writes it (no key, no unset fields)."""
        return {k: v for k, v in asdict(self).items() if v is not None and k != "key"}

    @property
    def identity(self) -> str:
        """What identifies the revision: the sha256 or the commit."""
        return self.sha256 or self.commit or self.pin

    @property
    def file_version(self) -> Version | None:
        """The version of the revision's file: the channel build's ``version`` where recorded,
        else the version its wheel or sdist name carries; None for a git commit (both were
        checked when the entry was made)."""
        if self.version is not None:
            return Version(self.version)
        return _file_version(self.filename) if self.filename is not None else None


def entry_problem(key: object, entry: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first thing wrong with one lock entry, as (field, problem); None if it is sound."""
    if not isinstance(key, str) or not key:
        return "key", f"{key!r} is not a pin key"
    kind = entry.get("kind")
    if "kind" not in entry:
        return "kind", "missing"
    if not isinstance(kind, str) or kind not in KEYS:
        return "kind", f"{kind!r} is not one of {', '.join(KEYS)}"
    required, optional = KEYS[kind]
    unknown = sorted(set(entry) - set(required) - set(optional))
    if unknown:
        return unknown[0], f"not a key of a {kind} entry (it has: {', '.join(required + optional)})"
    for name in required:
        if name not in entry:
            return name, f"missing (a {kind} entry needs {', '.join(required)})"
    for name, value in entry.items():
        wanted = int if name == "size" else str
        if not isinstance(value, wanted) or isinstance(value, bool):
            return name, f"{value!r} is not a{'n integer' if wanted is int else ' string'}"
    return _value_problem(kind, entry)


def _value_problem(kind: str, entry: Mapping[str, Any]) -> tuple[str, str] | None:
    try:
        pin = parse_pin(entry["pin"])
    except PinError as exc:
        return "pin", str(exc)
    problem = _kind_problem(kind, pin, entry)
    if problem is not None:
        return problem
    if kind in ("sdist", "wheel"):
        if not SHA256_RE.match(entry["sha256"]):
            return "sha256", f"{entry['sha256']!r} is not a sha256 (64 lowercase hex digits)"
        bad_name = filename_problem(entry["filename"], kind, pin.project)
        if bad_name is not None:
            return "filename", bad_name
        if isinstance(pin, IndexPin) and _file_version(entry["filename"]) != Version(pin.version):
            return "filename", f"{entry['filename']!r} is not version {pin.version} of the pin"
        # the channel's build version (labels aside: a variant's wheel adds its own, ``.cpu``)
        version = _parsed(entry["version"]) if "version" in entry else None
        if "version" in entry and (
            version is None or version.public != _file_version(entry["filename"]).public
        ):
            return "version", f"{entry['version']!r} is not the version of {entry['filename']!r}"
        if entry.get("size", 0) < 0:
            return "size", f"{entry['size']!r} is negative"
    if kind == "git" and not COMMIT_RE.match(entry["commit"]):
        return "commit", f"{entry['commit']!r} is not a commit id (40 lowercase hex digits)"
    if "version" in entry and _parsed(entry["version"]) is None:
        return "version", f"{entry['version']!r} is not a version (PEP 440)"
    return None


def _parsed(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _kind_problem(kind: str, pin: Pin, entry: Mapping[str, Any]) -> tuple[str, str] | None:
    """Whether the entry's kind (and its url/rev) fit the pin it records."""
    if isinstance(pin, GitPin):
        if kind != "git":
            return "kind", f'{kind!r}, but {pin.text!r} is a git pin (kind = "git")'
        for name, value in (("url", pin.url), ("rev", pin.rev)):
            if name in entry and entry[name] != value:
                return name, f"{entry[name]!r} is not the pin's {name} {value!r}"
        return None
    if kind == "git":
        return "kind", f"'git', but {pin.text!r} is not a git pin"
    if kind == "directory" and not isinstance(pin, PathPin):
        return "kind", f"'directory', but {pin.text!r} is not a local path"
    if isinstance(pin, UrlPin) and entry.get("url", pin.url) != pin.url:
        return "url", f"{entry['url']!r} is not the pin's URL {pin.url!r}"
    return None


def filename_problem(value: str, kind: str, project: str) -> str | None:
    """Why ``value`` is not a plain file name of a ``kind`` (sdist/wheel) of ``project``."""
    if (
        not value
        or value in (".", "..")
        or PurePosixPath(value).name != value
        or "\\" in value
        or value.startswith(".")
        or any(ord(ch) < 32 or ch == "\x7f" for ch in value)
    ):
        return f"{value!r} is not a plain file name"
    try:
        if value.endswith(".whl"):
            name = str(parse_wheel_filename(value)[0])
            found = "wheel"
        elif value.endswith(SDIST_SUFFIXES):
            name = str(parse_sdist_filename(value)[0])
            found = "sdist"
        else:
            return f"{value!r} is neither a wheel (.whl) nor an sdist (.tar.gz, .zip)"
    except (InvalidWheelFilename, InvalidSdistFilename) as exc:
        return f"{value!r} is not a valid {kind} file name ({exc})"
    if found != kind:
        return f"{value!r} is a {found}, but the entry says kind = {kind!r}"
    if canonicalize_name(name) != project:
        return f"{value!r} is a file of {name}, not of the pinned project {project}"
    return None


def _file_version(filename: str) -> Version:
    if filename.endswith(".whl"):
        return parse_wheel_filename(filename)[1]
    return parse_sdist_filename(filename)[1]


def read_lock(path: Path) -> dict[str, LockedPin]:
    """Read and check a lock file (empty when it does not exist)."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LockError(f"{path}: {exc}; {_advice(path)}") from exc
    if data.get("schema") != SCHEMA:
        raise LockError(f"{path}: unknown lock schema {data.get('schema')!r}; {_advice(path)}")
    unknown = sorted(set(data) - {"schema", "pins"})
    if unknown:
        raise LockError(
            f"{path}: unknown key `{unknown[0]}` (a lock has schema, pins); {_advice(path)}"
        )
    pins = data.get("pins", {})
    if not isinstance(pins, dict):
        raise LockError(f"{path}: `pins` must be a table of pin entries; {_advice(path)}")
    out: dict[str, LockedPin] = {}
    for key, entry in pins.items():
        if not isinstance(entry, dict):
            raise LockError(
                f"{path}: pin {key!r}: the entry must be a table ([pins.{key}]), "
                f"not {type(entry).__name__}; {_advice(path)}"
            )
        problem = entry_problem(key, entry)
        if problem is not None:
            field, what = problem
            raise LockError(f"{path}: pin {key!r}, field `{field}`: {what}; {_advice(path)}")
        out[key] = LockedPin(key=key, **entry)
    return out


def _advice(path: Path) -> str:
    return (
        f"{path.name} is written by `patchwheel lock`: restore it from version control, or "
        f"delete the entry (or the file) and run `nox -s lock -- --target {path.parent.name}`"
    )


def write_lock(path: Path, locked: Iterable[LockedPin]) -> None:
    """Write a lock file atomically, entries in target order."""
    pins = {entry.key: entry.fields() for entry in locked}
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
        if entry.kind in ("sdist", "wheel") and entry.kind != spec.artifact:
            raise LockError(
                f"{target.lock_path}: pin {spec.key!r}, field `kind`: {entry.kind!r}, but "
                f"target.toml pins a{'n' if spec.artifact == 'sdist' else ''} {spec.artifact} "
                f"there; {_advice(target.lock_path)}"
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
    if filename.endswith(SDIST_SUFFIXES):
        return "sdist"
    raise PinError(f"pin {what!r}: {filename} is neither a wheel nor an sdist")
