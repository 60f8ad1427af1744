"""Materialize locked pins: the artifact file, or an extracted source tree, from the cache.

Everything here works offline once the cache holds the pin: network happens only in fetch.
"""

from __future__ import annotations

import calendar
import json
import os
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import git

from patchwheel import atomic, console
from patchwheel.config.lock import LockedPin
from patchwheel.config.pins import GitPin, IndexPin, PathPin, UrlPin, parse_pin
from patchwheel.config.targets import PinSpec
from patchwheel.errors import FetchError, PinError
from patchwheel.upstream import gitsrc
from patchwheel.upstream.cache import Cache, sha256_file
from patchwheel.upstream.fetch import fetch_index_file, fetch_path, fetch_url
from patchwheel.upstream.resolve import resolve

TREE_READY = ".patchwheel-tree"
# Code points HFS+ ignores in file names (git's is_hfs_dotgit list): ".g\u200cit" is ".git" there.
_HFS_IGNORED = frozenset(
    "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff"
)


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
    """The extracted, read-only source tree of a locked source pin (cached by identity).

    A cached tree is used only if every file still has the bytes (and mode) recorded when it
    was extracted; one that was edited, or lacks its record, is extracted again from the
    verified artifact (or the mirror's commit).
    """
    pin = spec.pin
    if isinstance(pin, GitPin):
        if not entry.commit:
            raise PinError(f"pin {pin.text!r}: the lock records no commit")
        commit = entry.commit
        repo = gitsrc.mirror(pin, commit, cache)
        dest = cache.tree_path(f"git-{commit}")
        if not _intact(dest, what=pin.text):
            _install_tree(cache, dest, lambda tmp: _export_git(str(repo.git_dir), commit, tmp))
        return SourceTree(dest, gitsrc.commit_time(repo, commit))
    if entry.kind == "directory" and isinstance(pin, PathPin):
        return SourceTree(pin.path, _newest_mtime(pin.path))
    archive = artifact_path(spec, entry, cache)
    dest = cache.tree_path(f"sha256-{entry.sha256}")
    if not _intact(dest, what=pin.text):
        _install_tree(cache, dest, lambda tmp: extract_archive(archive, tmp, what=pin.text))
    return SourceTree(dest, archive_epoch(archive))


def source_epoch(spec: PinSpec, entry: LockedPin, cache: Cache) -> int:
    """The pin's own timestamp (commit time, newest archive member), without its tree."""
    pin = spec.pin
    if isinstance(pin, GitPin):
        commit = entry.commit or ""
        return gitsrc.commit_time(gitsrc.mirror(pin, commit, cache), commit)
    if entry.kind == "directory" and isinstance(pin, PathPin):
        return _newest_mtime(pin.path)
    return archive_epoch(artifact_path(spec, entry, cache))


def source_tree(pin_text: str, cache: Cache | None = None) -> Path:
    """Resolve a pin ad hoc (no lock) and return its extracted source tree (for the audit)."""
    cache = cache or Cache()
    pin = parse_pin(pin_text, base_dir=Path.cwd())
    if isinstance(pin, PathPin) and pin.path.is_dir():
        return pin.path
    spec = PinSpec(key=pin.project, pin=pin, artifact="sdist")
    return source_tree_of(spec, resolve(spec, cache), cache).path


def _install_tree(cache: Cache, dest: Path, fill: Callable[[Path], None]) -> None:
    """Extract into a staging dir, record every file's hash, then swap it into place."""
    with cache.staging_dir("tree") as tmp:
        fill(tmp)
        (tmp / TREE_READY).write_text("complete\n")  # what older patchwheels look for
        record = _manifest_path(dest)
        record.parent.mkdir(parents=True, exist_ok=True)
        # The record goes first: a tree without one (or with another's) is never trusted.
        atomic.write_json(record, {"format": 1, "entries": tree_entries(tmp)}, indent=0)
        if dest.exists():
            aside = tmp.with_name(tmp.name + ".old")
            os.replace(dest, aside)
            os.replace(tmp, dest)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(tmp, dest)


def _manifest_path(dest: Path) -> Path:
    """Where the record of a tree's files lies: beside the tree, never inside it."""
    return dest.with_name(dest.name + ".json")


def tree_entries(root: Path) -> dict[str, str]:
    """Every file and link under ``root``: ``file:<x|->:<sha256>`` or ``link:<target>``."""
    entries: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in sorted([*dirnames, *filenames]):
            path = base / name
            rel = path.relative_to(root).as_posix()
            if rel == TREE_READY:
                continue
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                entries[rel] = "link:" + str(path.readlink())
            elif stat.S_ISREG(info.st_mode):
                executable = "x" if info.st_mode & 0o111 else "-"
                entries[rel] = f"file:{executable}:{sha256_file(path)}"
    return entries


def _intact(dest: Path, *, what: str) -> bool:
    """Whether a cached tree holds exactly what was recorded when it was extracted."""
    if not dest.is_dir():
        return False
    try:
        record = json.loads(_manifest_path(dest).read_text("utf-8"))
        recorded = record["entries"]
    except (OSError, ValueError, KeyError, TypeError):
        console.status(f"source tree of {what}: no record of its files; extracting it again")
        return False
    found = tree_entries(dest)
    if found == recorded:
        return True
    changed = sorted(k for k in found.keys() | recorded.keys() if found.get(k) != recorded.get(k))
    console.status(
        f"[yellow]source tree of {what} in the cache was modified[/] ({', '.join(changed[:3])}"
        f"{' …' if len(changed) > 3 else ''}); extracting it again"
    )
    return False


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
                _refuse_git_path(archive, stripped, what)
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
            _refuse_git_path(archive, stripped, what)
            target = dest / stripped
            if not target.resolve().is_relative_to(dest.resolve()):
                raise FetchError(f"{what}: {archive.name} member {info.filename} escapes the tree")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))


def is_git_name(part: str) -> bool:
    """Whether a path component names git's own directory on some filesystem.

    ``.git`` in any case (case-insensitive filesystems), with trailing dots or spaces (Windows
    drops them), with characters HFS+ ignores, or as its 8.3 short name ``git~1``: what git's
    own ``core.protectNTFS`` / ``core.protectHFS`` guard against.
    """
    folded = "".join(ch for ch in part if ch not in _HFS_IGNORED).casefold().rstrip(". ")
    return folded in (".git", "git~1")


def _refuse_git_path(archive: Path, member: str, what: str) -> None:
    if any(is_git_name(part) for part in PurePosixPath(member).parts):
        raise FetchError(
            f"{what}: {archive.name} holds {member}, a path into a git repository (.git); "
            "such a tree cannot become a vendor tree. Refused"
        )


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
