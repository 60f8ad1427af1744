"""Reading a channel's index pages: PEP 503 HTML or PEP 691 JSON, every entry checked.

A channel's pages are hostile input. A page is read through :mod:`patchwheel.http` and
:mod:`patchwheel.upstream.pages` (at most :data:`MAX_PAGE` bytes, JSON nested at most
``pages.MAX_DEPTH`` levels; a redirect that would leave the channel is refused before it is
followed, and so is one of a wheel download, :func:`stays_in`); each entry of the channel's
distribution must be a wheel file name, its link must stay on the channel's host and under its
root path (relative links such as vLLM's ``../../<commit>/vllm-…%2Bg….whl`` resolve there),
a sha256 must be 64 hex digits and a size a plausible byte count. Entries of other projects, and
links that are not wheels (``metadata.json``, sub-trees), are not ours and are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import Version

from patchwheel.errors import FetchError, HttpStatusError, RedirectRefusedError, UnreachableError
from patchwheel.http import RedirectRule, open_url
from patchwheel.upstream import pages

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
MAX_PAGE = pages.MAX_PAGE
MAX_WHEEL = 8 * 1024**3
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_UNSAFE = re.compile(r"[\x00-\x20\x7f\\]")


@dataclass(frozen=True)
class Listed:
    """One wheel of the channel's distribution on one page."""

    filename: str
    url: str
    version: Version
    platforms: tuple[str, ...]
    sha256: str | None = None
    size: int | None = None


def read_page(page_url: str, root: str, distribution: str, *, what: str) -> list[Listed] | None:
    """The wheels of ``distribution`` a page lists; None when the page does not exist (404)."""
    try:
        with open_url(page_url, headers={"Accept": ACCEPT}, redirects=stays_in(root)) as response:
            body = pages.read_body(response, page_url, what, MAX_PAGE)
            content_type = str(response.headers.get("Content-Type", ""))
            final_url = response.geturl()
    except HttpStatusError as exc:
        if exc.code in (403, 404):  # S3 answers 403 for a missing key
            return None
        raise FetchError(f"{what}: {exc}") from exc
    except UnreachableError as exc:
        raise FetchError(f"{what}: {page_url} is unreachable ({exc.cause})") from exc
    except RedirectRefusedError as exc:
        raise FetchError(f"{what}: {exc}") from exc
    if not within(final_url, root):  # pragma: no cover - stays_in refused it before
        raise FetchError(f"{what}: {page_url} redirected to {final_url}, outside {root}; refused")
    name = canonicalize_name(distribution)
    if JSON_TYPE in content_type:
        raw = _json_entries(body, final_url, what)
    else:
        raw = _html_entries(body.decode("utf-8", "replace"), final_url, what)
    return [item for item in (_check(entry, root, name, what) for entry in raw) if item]


def stays_in(root: str) -> RedirectRule:
    """The redirect rule of a channel's pages and wheels: the Location must lie :func:`within`
    ``root`` (checked before the redirect is followed)."""

    def rule(_source: str, location: str) -> str | None:
        return None if within(location, root) else f"outside the channel {root}"

    return rule


def within(url: str, root: str) -> bool:
    """Whether ``url`` lies on ``root``'s scheme, host and port, under its path."""
    target, base = urlsplit(url), urlsplit(root)
    if (target.scheme, target.netloc.lower()) != (base.scheme, base.netloc.lower()):
        return False
    path = unquote(target.path)
    if _UNSAFE.search(path) or any(part in ("..", ".") for part in path.split("/")):
        return False
    return path.startswith(unquote(base.path))


@dataclass(frozen=True)
class _Entry:
    filename: str
    url: str
    sha256: str | None
    size: object


def _check(entry: _Entry, root: str, name: NormalizedName, what: str) -> Listed | None:
    if "/" in entry.filename or not entry.filename.endswith(".whl"):
        return None
    try:
        wname, version, _build, tags = parse_wheel_filename(entry.filename)
    except InvalidWheelFilename:
        return None
    if wname != name:
        return None
    if not within(entry.url, root):
        raise FetchError(
            f"{what}: {entry.filename} links to {entry.url}, outside the channel {root}; refused"
        )
    linked = unquote(urlsplit(entry.url).path).rsplit("/", 1)[-1]
    if linked != entry.filename:
        raise FetchError(
            f"{what}: the entry {entry.filename} links to a file named {linked!r}; refused"
        )
    if entry.sha256 is not None and not _SHA256.match(entry.sha256):
        raise FetchError(f"{what}: {entry.filename} has a malformed sha256 {entry.sha256!r}")
    size = entry.size
    if size is not None and (
        not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= MAX_WHEEL
    ):
        raise FetchError(f"{what}: {entry.filename} declares an implausible size {size!r}")
    return Listed(
        filename=entry.filename,
        url=entry.url,
        version=version,
        platforms=tuple(sorted({tag.platform for tag in tags})),
        sha256=entry.sha256,
        size=size,
    )


def _json_entries(body: bytes, base_url: str, what: str) -> list[_Entry]:
    data: Any = pages.json_document(body, base_url, what)
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise FetchError(f"{what}: {base_url} is not a PEP 691 project page (no files list)")
    out = []
    for item in files:
        if not isinstance(item, dict):
            raise FetchError(f"{what}: {base_url} lists a file entry that is not an object")
        filename, url, hashes = item.get("filename"), item.get("url"), item.get("hashes", {})
        if not isinstance(filename, str) or not isinstance(url, str):
            raise FetchError(f"{what}: {base_url} lists a file without filename or url")
        if not isinstance(hashes, dict):
            raise FetchError(f"{what}: {base_url}: {filename} has malformed hashes")
        sha = hashes.get("sha256")
        if sha is not None and not isinstance(sha, str):
            raise FetchError(f"{what}: {base_url}: {filename} has a malformed sha256")
        out.append(_Entry(filename, urldefrag(urljoin(base_url, url))[0], sha, item.get("size")))
    return out


def _html_entries(text: str, base_url: str, what: str) -> list[_Entry]:
    out = []
    for attrs in pages.anchors(text, base_url, what):
        href = attrs.get("href")
        if not href:
            continue
        url, fragment = urldefrag(urljoin(base_url, href))
        algo, _, digest = fragment.partition("=")
        filename = unquote(urlsplit(url).path).rsplit("/", 1)[-1]
        out.append(_Entry(filename, url, digest if algo == "sha256" else None, None))
    return out
