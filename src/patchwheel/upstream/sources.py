"""Materialize locked pins: the artifact file, or an extracted source tree, from the cache.

Everything here works offline once the cache holds the pin: network happens only in fetch.
"""

from __future__ import annotations

import calendar
import os
import shutil
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import git

from patchwheel.config.lock import LockedPin
from patchwheel.config.pins import GitPin, IndexPin, PathPin, UrlPin, parse_pin
from patchwheel.config.targets import PinSpec
from patchwheel.errors import FetchError, PinError
from patchwheel.upstream import gitsrc
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.fetch import fetch_index_file, fetch_path, fetch_url
from patchwheel.upstream.resolve import resolve

TREE_READY = ".patchwheel-tree"


@dataclass(frozen=True)
class SourceTree:
    """An extracted source tree and the timestamp of the revision it holds."""

    path: Path
    epoch: int


def artifact_path(spec: PinSpec, entry: LockedPin, cache: Cache) -> Path:
    """The verified artifact (sdist or wheel) of a locked pin, fetched if not cached."""
    what = f"pin {spec.pin.text!r}"
    if entry.kind not in ("sdist", "wheel") or not entry.sha256 or not entry.filename:
        raise PinError(f"{what}: locked as {entry.kind}, not an sdist or wheel artifact")
    pin = spec.pin
    if isinstance(pin, IndexPin):
        return fetch_index_file(pin.name, entry.filename, entry.sha256, cache, what=what)
    if isinstance(pin, UrlPin):
        return fetch_url(pin.url, entry.sha256, cache, what=what)
    if isinstance(pin, PathPin):
        return fetch_path(pin.path, entry.sha256, cache, what=what)
    raise PinError(f"{what}: a git pin has no artifact file")


def source_tree_of(spec: PinSpec, entry: LockedPin, cache: Cache) -> SourceTree:
    """The extracted, read-only source tree of a locked source pin (cached by identity)."""
    pin = spec.pin
    if isinstance(pin, GitPin):
        if not entry.commit:
            raise PinError(f"pin {pin.text!r}: the lock records no commit")
        commit = entry.commit
        repo = gitsrc.mirror(pin, commit, cache)
        dest = cache.tree_path(f"git-{commit}")
        if not (dest / TREE_READY).is_file():
            _install_tree(cache, dest, lambda tmp: _export_git(str(repo.git_dir), commit, tmp))
        return SourceTree(dest, gitsrc.commit_time(repo, commit))
    if entry.kind == "directory" and isinstance(pin, PathPin):
        return SourceTree(pin.path, _newest_mtime(pin.path))
    archive = artifact_path(spec, entry, cache)
    dest = cache.tree_path(f"sha256-{entry.sha256}")
    if not (dest / TREE_READY).is_file():
        _install_tree(cache, dest, lambda tmp: extract_archive(archive, tmp, what=pin.text))
    return SourceTree(dest, archive_epoch(archive))


def source_tree(pin_text: str, cache: Cache | None = None) -> Path:
    """Resolve a pin ad hoc (no lock) and return its extracted source tree (for the audit)."""
    cache = cache or Cache()
    pin = parse_pin(pin_text, base_dir=Path.cwd())
    if isinstance(pin, PathPin) and pin.path.is_dir():
        return pin.path
    spec = PinSpec(key=pin.project, pin=pin, artifact="sdist")
    return source_tree_of(spec, resolve(spec, cache), cache).path


def _install_tree(cache: Cache, dest: Path, fill: Callable[[Path], None]) -> None:
    with cache.staging_dir("tree") as tmp:
        fill(tmp)
        (tmp / TREE_READY).write_text("complete\n")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)


def extract_archive(archive: Path, dest: Path, *, what: str) -> None:
    """Extract an sdist into ``dest``, dropping its top directory, owners and unsafe members."""
    if archive.name.endswith(".zip") or zipfile.is_zipfile(archive):
        _extract_zip(archive, dest, what)
        return
    try:
        with tarfile.open(archive) as tar:
            members = []
            for member in tar.getmembers():
                stripped = _strip_top(member.name)
                if stripped is None:
                    continue
                member.name = stripped
                members.append(member)
            # The `data` filter drops owners and refuses absolute, `..` and device members.
            tar.extractall(dest, members=members, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise FetchError(f"{what}: cannot extract {archive.name}: {exc}") from exc


def _extract_zip(archive: Path, dest: Path, what: str) -> None:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            stripped = _strip_top(info.filename)
            if stripped is None or info.is_dir():
                continue
            target = dest / stripped
            if not target.resolve().is_relative_to(dest.resolve()):
                raise FetchError(f"{what}: {archive.name} member {info.filename} escapes the tree")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))


def _strip_top(name: str) -> str | None:
    parts = PurePosixPath(name).parts
    if len(parts) < 2:
        return None
    return str(PurePosixPath(*parts[1:]))


def archive_epoch(archive: Path) -> int:
    """The newest member timestamp of an archive: the pin's own date, not the clock."""
    if archive.name.endswith(".whl") or zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            stamps = [_zip_epoch(info.date_time) for info in zf.infolist()]
        return max(stamps, default=315532800)
    with tarfile.open(archive) as tar:
        return int(max((m.mtime for m in tar.getmembers()), default=315532800))


def _zip_epoch(date_time: tuple[int, int, int, int, int, int]) -> int:
    return calendar.timegm((*date_time, 0, 0, 0))


def _export_git(git_dir: str, commit: str, dest: Path) -> None:
    repo = git.Repo(git_dir)
    tar_path = dest.parent / (dest.name + ".tar")
    with tar_path.open("wb") as fh:
        repo.archive(fh, treeish=commit, format="tar")
    try:
        with tarfile.open(tar_path) as tar:
            tar.extractall(dest, filter="data")
    finally:
        tar_path.unlink(missing_ok=True)


def _newest_mtime(path: Path) -> int:
    return int(max((p.stat().st_mtime for p in path.rglob("*") if p.is_file()), default=0))
