"""Downloads into the sha256-keyed cache: verified, with progress, never a partial file.

A cached artifact whose bytes still hash to its key is used without any network request; one that
does not (disk corruption, a hand edit) is reported, deleted and fetched again.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from patchwheel import console
from patchwheel.errors import (
    FetchError,
    HashMismatchError,
    HttpStatusError,
    RedirectRefusedError,
    UnreachableError,
)
from patchwheel.http import RedirectRule, open_url
from patchwheel.upstream.cache import CHUNK, Cache, sha256_file
from patchwheel.upstream.simple_api import IndexFile, project_files

RETRIES = 3


def fetch_url(
    url: str,
    sha256: str | None,
    cache: Cache,
    *,
    what: str,
    redirects: RedirectRule | None = None,
) -> Path:
    """Return the cached artifact at ``url``; download it if absent or corrupt.

    ``sha256`` None means "not locked yet": the bytes are hashed and stored under their hash.
    ``what`` names the input in errors (the pin). ``redirects``: the rule a redirect of the
    download must meet before it is followed (besides http(s) only, never down to http): a
    channel's wheel stays on the channel.
    """
    if sha256:
        cached = _cached(cache, sha256, what)
        if cached is not None:
            return cached
    filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    last_error: Exception | None = None
    for attempt in range(RETRIES):
        try:
            return _download(url, sha256, cache, what=what, filename=filename, redirects=redirects)
        except (HashMismatchError, RedirectRefusedError):
            raise
        except FetchError as exc:
            last_error = exc
            time.sleep(min(2**attempt, 5))
    raise FetchError(f"{what}: download of {url} failed after {RETRIES} tries: {last_error}")


def fetch_index_file(project: str, filename: str, sha256: str, cache: Cache, *, what: str) -> Path:
    """Fetch a locked artifact by file name through the configured index (pip's index-url)."""
    cached = _cached(cache, sha256, what)
    if cached is not None:
        return cached
    match = find_index_file(project, filename, what=what)
    if match.sha256 and match.sha256 != sha256:
        raise HashMismatchError(
            f"{what}: the index lists {filename} with sha256 {match.sha256}, "
            f"but the lock records {sha256}; the file changed upstream — re-lock on purpose "
            "(`nox -s lock`) only if you trust the new file"
        )
    return fetch_url(match.url, sha256, cache, what=what)


def find_index_file(project: str, filename: str, *, what: str) -> IndexFile:
    """Look one file up by name on the configured indexes."""
    for item in project_files(project):
        if item.filename == filename:
            return item
    raise FetchError(
        f"{what}: {filename} is not on the configured package index; "
        "check pip's index-url (or PATCHWHEEL_INDEX_URL)"
    )


def _cached(cache: Cache, sha256: str, what: str) -> Path | None:
    path = cache.blob_path(sha256)
    existed = path.is_file()
    verified = cache.verified_blob(sha256)
    if existed and verified is None:
        console.status(
            f"[yellow]cache entry for {what} was corrupt (not sha256 {sha256[:12]}…); re-fetching"
        )
    return verified


def _download(
    url: str,
    sha256: str | None,
    cache: Cache,
    *,
    what: str,
    filename: str,
    redirects: RedirectRule | None,
) -> Path:
    digest = hashlib.sha256()
    with cache.writing_blob(sha256) as (out, tmp):
        if urlsplit(url).scheme == "file":
            _copy_local(Path(unquote(urlsplit(url).path)), out, digest, filename)
        else:
            _copy_http(url, out, digest, filename, what, redirects)
        out.flush()
        actual = digest.hexdigest()
        if sha256 and actual != sha256:
            raise HashMismatchError(
                f"{what}: {filename} has sha256 {actual}, but {sha256} was expected; "
                "the download was discarded. If the new file is trusted, re-lock on purpose."
            )
        return cache.store_blob(tmp, actual)


def _copy_http(
    url: str,
    out: object,
    digest: hashlib._Hash,
    filename: str,
    what: str,
    redirects: RedirectRule | None,
) -> None:
    try:
        with open_url(url, redirects=redirects) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            with console.transfer(f"download {filename}", total) as advance:
                while chunk := response.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)  # type: ignore[attr-defined]
                    advance(len(chunk))
    except RedirectRefusedError as exc:
        raise RedirectRefusedError(exc.url, exc.location, f"{exc.why} ({what})") from exc
    except (HttpStatusError, UnreachableError) as exc:
        raise FetchError(f"{what}: {exc}") from exc


def _copy_local(source: Path, out: object, digest: hashlib._Hash, filename: str) -> None:
    if not source.is_file():
        raise FetchError(f"{source} does not exist (pin file {filename})")
    with source.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)  # type: ignore[attr-defined]


def fetch_path(path: Path, sha256: str | None, cache: Cache, *, what: str) -> Path:
    """Copy a local artifact into the cache, verifying its sha256 when one is locked."""
    if not path.is_file():
        raise FetchError(f"{what}: {path} is not a file")
    if sha256:
        cached = _cached(cache, sha256, what)
        if cached is not None:
            return cached
    actual = sha256_file(path)
    if sha256 and actual != sha256:
        raise HashMismatchError(
            f"{what}: {path} has sha256 {actual}, but the lock records {sha256}; "
            "re-lock on purpose if the new file is trusted"
        )
    dest = cache.blob_path(actual)
    if not dest.is_file():
        with cache.writing_blob(actual) as (out, tmp):
            out.close()
            shutil.copyfile(path, tmp)
            cache.store_blob(tmp, actual)
    return dest
