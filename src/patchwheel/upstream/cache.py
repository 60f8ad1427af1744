"""The on-disk cache: downloads keyed by sha256, git mirrors, extracted trees, built wheels.

Layout under ``$PATCHWHEEL_CACHE`` (default ``$XDG_CACHE_HOME/patchwheel``)::

    blobs/sha256/ab/abcdef…    downloaded artifacts, named by their sha256
    git/<key>.git              bare mirrors of git sources
    trees/<key>/               extracted source trees (read-only use)
    wheels/<key>/<file>.whl    built wheels, keyed by build key (the local label's hash)
    tmp/                       partial files; renamed into place only when complete
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from patchwheel.errors import ConfigError

CHUNK = 1 << 20
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
TREE_KEY_RE = re.compile(r"^(sha256-[0-9a-f]{64}|git-[0-9a-f]{40})$")


def default_root() -> Path:
    """The cache root from the environment."""
    env = os.environ.get("PATCHWHEEL_CACHE")
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return (base / "patchwheel").resolve()


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


class Cache:
    """A content-addressed cache directory; every write is temp + rename."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or default_root()).resolve()

    def sweep_tmp(self, max_age_s: float = 3600) -> None:
        """Remove temp files and dirs of runs that died more than ``max_age_s`` ago."""
        tmp_dir = self.root / "tmp"
        if not tmp_dir.is_dir():
            return
        cutoff = time.time() - max_age_s
        for entry in tmp_dir.iterdir():
            try:
                if entry.lstat().st_mtime < cutoff:
                    if entry.is_dir():
                        shutil.rmtree(entry, ignore_errors=True)
                    else:
                        entry.unlink()
            except FileNotFoundError:
                continue

    def blob_path(self, sha256: str) -> Path:
        """Where the artifact with this sha256 lives (whether or not it exists).

        Only a hex digest names a blob: any other value (a hostile lock's ``../../x``) is
        refused here too, so no caller can turn it into a path outside the cache.
        """
        if not SHA256_RE.match(sha256):
            raise ConfigError(f"{sha256!r} is not a sha256 (64 lowercase hex digits); refused")
        return self.root / "blobs" / "sha256" / sha256[:2] / sha256

    def git_path(self, key: str) -> Path:
        """Where the bare mirror with this key lives."""
        return self.root / "git" / f"{key}.git"

    def tree_path(self, key: str) -> Path:
        """Where the extracted tree with this key (``sha256-<hex>``, ``git-<commit>``) lives."""
        if not TREE_KEY_RE.match(key):
            raise ConfigError(f"{key!r} is not a source tree key; refused")
        return self.root / "trees" / key

    def wheel_dir(self, key: str) -> Path:
        """Where the built wheels with this build key live."""
        return self.root / "wheels" / key

    def verified_blob(self, sha256: str) -> Path | None:
        """The cached artifact if present and intact; a corrupt entry is deleted (None)."""
        path = self.blob_path(sha256)
        if not path.is_file():
            return None
        if sha256_file(path) != sha256:
            path.unlink()
            return None
        return path

    @contextmanager
    def writing_blob(self, sha256_hint: str | None = None) -> Iterator[tuple[BinaryIO, Path]]:
        """Yield a temp file to write an artifact into; the caller commits with ``store_blob``.

        The temp file is removed if the block raises, so no partial file ever stays behind.
        """
        tmp_dir = self.root / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=tmp_dir, prefix=(sha256_hint or "blob")[:16] + ".")
        tmp = Path(name)
        try:
            with os.fdopen(fd, "wb") as fh:
                yield fh, tmp
        finally:
            tmp.unlink(missing_ok=True)

    def store_blob(self, tmp: Path, sha256: str) -> Path:
        """Move a complete, verified temp file into place under its sha256."""
        dest = self.blob_path(sha256)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp.chmod(0o644)
        os.replace(tmp, dest)
        return dest

    @contextmanager
    def staging_dir(self, prefix: str) -> Iterator[Path]:
        """A temp directory inside the cache (same filesystem, so renames are atomic)."""
        tmp_dir = self.root / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        path = Path(tempfile.mkdtemp(dir=tmp_dir, prefix=prefix + "."))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
