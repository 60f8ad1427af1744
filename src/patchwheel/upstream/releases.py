"""A project's releases on the package index it is pinned from: the newest (or a given) release,
its sdist and each variant's wheel (network: index pages only).

This is the channel every target follows without a ``[projects.P.channel]`` table: the index
pip is configured with (PyPI by default; ``PATCHWHEEL_INDEX_URL`` overrides it), read through its
Simple API. The newest release is the highest final version with an sdist (pre-releases only
when asked); a variant whose distribution has no wheel of that version for its platform is
*missing* (upstream did not build it), which the caller answers with the variant's policy.

Index pages are hostile input, as a channel's are, read through :mod:`.pages` (at most
:data:`~patchwheel.upstream.pages.MAX_PAGE` bytes, JSON nested at most
:data:`~patchwheel.upstream.pages.MAX_DEPTH` deep, checked before parsing): a redirect to another
host (refused before it is followed), an entry of this project whose link names another file, a
link that is not http(s) (or ``file:`` for a ``file:`` index), downgrades https to http or
carries credentials, a malformed sha256 or size, or one file listed twice with different hashes
is refused, naming the page. Links may point to another host (PyPI serves its files from
files.pythonhosted.org): every file is pinned by the sha256 its index lists, and a download
(:mod:`.fetch`, through :func:`patchwheel.http.open_url`) is verified against it; its redirects
are held to http(s), never from https down to http, and checked before they are followed. A
release file the index lists without a sha256 is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from patchwheel.config.pins import IndexPin
from patchwheel.config.targets import Project
from patchwheel.errors import (
    ConfigError,
    FetchError,
    HttpStatusError,
    RedirectRefusedError,
    UnreachableError,
)
from patchwheel.http import RedirectRule, configured_index_urls, open_url
from patchwheel.upstream import pages

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
MAX_FILE = 8 * 1024**3
LATEST = "latest"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_UNSAFE = re.compile(r"[\x00-\x20\x7f\\]")


@dataclass(frozen=True)
class ReleaseFile:
    """One file of a release, as its index lists it (checked)."""

    filename: str
    url: str
    version: Version
    kind: str  # "sdist" or "wheel"
    sha256: str | None
    size: int | None
    yanked: bool
    platforms: tuple[str, ...] = ()
    page: str = ""  # the index page that lists it


@dataclass(frozen=True)
class Release:
    """The release a roll moves to: its version, its sdist and each variant's wheel."""

    project: str
    version: str
    sdist: ReleaseFile
    wheels: dict[str, ReleaseFile] = field(default_factory=dict)  # variant -> wheel
    missing: dict[str, str] = field(default_factory=dict)  # variant -> what was looked at
    indexes: tuple[str, ...] = ()
    newer_pre: tuple[str, ...] = ()  # pre-releases newer than it, left out (no --pre)


def follows_releases(project: Project) -> bool:
    """Whether a project can follow its releases: its source is pinned to one (``name==X``)."""
    return isinstance(project.source.pin, IndexPin)


def find_release(
    project: Project,
    *,
    to: str | None = None,
    pre: bool = False,
    index_urls: list[str] | None = None,
) -> Release:
    """The newest release of ``project`` (``to`` None or ``latest``; pre-releases only with
    ``pre``) or the release ``to``, with each variant's wheel of it (or why it has none)."""
    if not follows_releases(project):
        raise ConfigError(
            f"project {project.name} is pinned to {project.source.pin.text!r}, not to a release "
            f"on the package index (`{project.name}==X.Y.Z`): a roll follows a project's "
            f"releases only from a release pin; add [projects.{project.name}.channel] to "
            "follow another channel"
        )
    indexes = index_urls or configured_index_urls()
    source = project.source.pin.name
    pages = _Pages(indexes)
    sdists = {f.version: f for f in pages.files(source) if f.kind == "sdist" and not f.yanked}
    what = f"releases of {source} on {', '.join(indexes)}"
    if not sdists:
        raise FetchError(f"{what}: no sdist of {source} is listed")
    newer_pre: tuple[str, ...] = ()
    if to is None or to == LATEST:
        finals = [v for v in sdists if pre or not (v.is_prerelease or v.is_devrelease)]
        if not finals:
            raise FetchError(f"{what}: no final release (pass --pre to take a pre-release)")
        version = max(finals)
        newer_pre = tuple(str(v) for v in sorted(sdists) if v > version)
    else:
        version = _version(to, what)
        if version not in sdists:
            listed = ", ".join(str(v) for v in sorted(sdists)[-5:])
            raise FetchError(
                f"{what}: no sdist of {source} {to} (the newest listed: {listed}); give a "
                "released version"
            )
    wheels: dict[str, ReleaseFile] = {}
    missing: dict[str, str] = {}
    for variant in project.variants:
        distribution = variant.distribution
        candidates = [
            f
            for f in pages.files(distribution)
            if f.kind == "wheel"
            and not f.yanked
            and f.version == version
            and any(variant.spec.platform in p or p == "any" for p in f.platforms)
        ]
        if len(candidates) > 1:
            names = ", ".join(f.filename for f in candidates)
            raise FetchError(
                f"{what}: several {distribution} {version} wheels match platform "
                f"{variant.spec.platform!r} ({names}); set the variant's `platform` in "
                "target.toml to the one wanted"
            )
        if candidates:
            wheels[variant.name] = _hashed(candidates[0], what)
        else:
            missing[variant.name] = (
                f"the package index has no {distribution} {version} wheel for platform "
                f"{variant.spec.platform!r} ({', '.join(pages.urls(distribution))})"
            )
    return Release(
        project.name,
        str(version),
        _hashed(sdists[version], what),
        wheels,
        missing,
        tuple(indexes),
        newer_pre,
    )


def _version(text: str, what: str) -> Version:
    try:
        version = Version(text)
    except InvalidVersion as exc:
        raise FetchError(f"{what}: --to {text!r} is not a version (e.g. 0.33.0)") from exc
    if version.local:
        raise FetchError(f"{what}: --to {text!r}: a release on an index has no local label")
    return version


def _hashed(item: ReleaseFile, what: str) -> ReleaseFile:
    if item.sha256 is None:
        raise FetchError(
            f"index page {item.page}: {item.filename} is listed without a sha256 ({what}); a "
            "release is pinned by the hash its index gives, refused"
        )
    return item


# --------------------------------------------------------------------------- pages


class _Pages:
    """Each distribution's files on the indexes, first index first (read once each)."""

    def __init__(self, indexes: list[str]) -> None:
        self.indexes = indexes
        self._files: dict[str, list[ReleaseFile]] = {}

    def urls(self, distribution: str) -> list[str]:
        name = canonicalize_name(distribution)
        return [urljoin(index, name + "/") for index in self.indexes]

    def files(self, distribution: str) -> list[ReleaseFile]:
        name = canonicalize_name(distribution)
        if name not in self._files:
            seen: dict[str, ReleaseFile] = {}
            for index, page in zip(self.indexes, self.urls(distribution), strict=True):
                for item in read_page(page, index, name):
                    seen.setdefault(item.filename, item)
            self._files[name] = list(seen.values())
        return self._files[name]


def read_page(page_url: str, index: str, name: NormalizedName) -> list[ReleaseFile]:
    """The files of ``name`` one project page lists, every entry checked ([] when it has none)."""
    what = f"index page {page_url}"
    bounded = f"releases of {name}"  # what pages.* say, before the page's URL
    if urlsplit(page_url).scheme == "file":
        body, content_type, final_url = _file_page(page_url, bounded)
    else:
        try:
            with open_url(
                page_url, headers={"Accept": ACCEPT}, redirects=on_index(index)
            ) as response:
                body = pages.read_body(response, page_url, bounded)
                content_type = str(response.headers.get("Content-Type", ""))
                final_url = response.geturl()
        except HttpStatusError as exc:
            if exc.code == 404:
                return []
            raise FetchError(f"{what}: {exc}") from exc
        except UnreachableError as exc:
            raise FetchError(f"{what} is unreachable ({exc.cause}); check pip's index-url") from exc
        except RedirectRefusedError as exc:
            raise FetchError(f"{what}: {exc}") from exc
    if on_index(index)(page_url, final_url) is not None:  # pragma: no cover - refused before
        raise FetchError(f"{what} redirected to {final_url}, off the index {index}; refused")
    try:
        if JSON_TYPE in content_type:
            raw = _json_entries(body, final_url, what, bounded)
        else:
            text = body.decode("utf-8", "replace")
            raw = _html_entries(text, final_url, bounded)
    except ValueError as exc:  # a link urllib cannot read (e.g. a broken IPv6 host)
        raise FetchError(f"{what} lists a link that is not a URL ({exc}); refused") from exc
    out: dict[str, ReleaseFile] = {}
    for entry in raw:
        item = _check(entry, index, name, what)
        if item is None:
            continue
        earlier = out.get(item.filename)
        if earlier is not None and earlier.sha256 != item.sha256:
            raise FetchError(f"{what} lists {item.filename} twice with different sha256s; refused")
        out[item.filename] = item
    return list(out.values())


def on_index(index: str) -> RedirectRule:
    """The redirect rule of an index's pages: the Location stays on the index's scheme and host
    (checked before the redirect is followed; the files they list may lie elsewhere)."""
    base = urlsplit(index)

    def rule(_source: str, location: str) -> str | None:
        there = urlsplit(location)
        if (there.scheme, there.netloc.lower()) == (base.scheme, base.netloc.lower()):
            return None
        return f"off the index {index}"

    return rule


def _file_page(page_url: str, what: str) -> tuple[bytes, str, str]:
    directory = Path(unquote(urlsplit(page_url).path))
    for name, kind in (("index.json", JSON_TYPE), ("index.html", "text/html")):
        path = directory / name
        try:
            if path.is_file():
                with path.open("rb") as fh:
                    body = pages.check_size(fh.read(pages.MAX_PAGE + 1), page_url, what)
                return body, kind, page_url
        except OSError as exc:
            raise FetchError(f"{what}: {page_url} cannot be read ({exc})") from exc
    return b"", "text/html", page_url


@dataclass(frozen=True)
class _Entry:
    filename: str
    url: str
    sha256: object
    size: object
    yanked: bool


def _check(entry: _Entry, index: str, name: NormalizedName, what: str) -> ReleaseFile | None:
    filename = entry.filename
    if not filename or "/" in filename or "\\" in filename:
        return None
    parsed = _parse_filename(filename)
    if parsed is None or parsed[0] != name:
        return None  # not a file of this project: not ours to judge
    _, version, kind, platforms = parsed
    url = entry.url
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError as exc:
        raise FetchError(f"{what}: {filename} links to {url!r}, not a URL; refused") from exc
    index_scheme = urlsplit(index).scheme
    allowed = {"https"} if index_scheme == "https" else {index_scheme, "https"}
    if parts.scheme not in allowed or not (parts.netloc or parts.scheme == "file"):
        raise FetchError(f"{what}: {filename} links to {url!r}, not an {index_scheme} URL; refused")
    if parts.username or parts.password or _UNSAFE.search(unquote(parts.path)):
        raise FetchError(f"{what}: {filename} links to an unsafe URL {url!r}; refused")
    linked = unquote(parts.path).rsplit("/", 1)[-1]
    if linked != filename:
        raise FetchError(f"{what}: the entry {filename} links to a file named {linked!r}; refused")
    sha = entry.sha256
    if sha is not None and (not isinstance(sha, str) or not _SHA256.match(sha)):
        raise FetchError(f"{what}: {filename} has a malformed sha256 {sha!r}; refused")
    size = entry.size
    if size is not None and (
        not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= MAX_FILE
    ):
        raise FetchError(f"{what}: {filename} declares an implausible size {size!r}; refused")
    page = what.removeprefix("index page ")
    return ReleaseFile(filename, url, version, kind, sha, size, entry.yanked, platforms, page)


def _parse_filename(filename: str) -> tuple[NormalizedName, Version, str, tuple[str, ...]] | None:
    if filename.endswith(".whl"):
        try:
            wname, version, _build, tags = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            return None
        return wname, version, "wheel", tuple(sorted({t.platform for t in tags}))
    if filename.endswith((".tar.gz", ".zip")):
        try:
            sname, sversion = parse_sdist_filename(filename)
        except (InvalidSdistFilename, InvalidVersion):
            return None
        return sname, sversion, "sdist", ()
    return None


def _json_entries(body: bytes, base_url: str, what: str, bounded: str) -> list[_Entry]:
    data: Any = pages.json_document(body, base_url, bounded)
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise FetchError(f"{what} is not a PEP 691 project page (no files list)")
    out = []
    for item in files:
        if not isinstance(item, dict):
            raise FetchError(f"{what} lists a file entry that is not an object")
        filename, url, hashes = item.get("filename"), item.get("url"), item.get("hashes", {})
        if not isinstance(filename, str) or not isinstance(url, str):
            raise FetchError(f"{what} lists a file without filename or url")
        if not isinstance(hashes, dict):
            raise FetchError(f"{what}: {filename} has malformed hashes")
        yanked = item.get("yanked", False)
        out.append(
            _Entry(
                filename,
                urldefrag(urljoin(base_url, url))[0],
                hashes.get("sha256"),
                item.get("size"),
                yanked is not False and yanked is not None,
            )
        )
    return out


def _html_entries(text: str, base_url: str, bounded: str) -> list[_Entry]:
    out = []
    for attrs in pages.anchors(text, base_url, bounded):
        href = attrs.get("href")
        if not href:
            continue
        url, fragment = urldefrag(urljoin(base_url, href))
        algo, _, digest = fragment.partition("=")
        filename = unquote(urlsplit(url).path).rsplit("/", 1)[-1]
        sha = digest if algo == "sha256" else None
        out.append(_Entry(filename, url, sha, None, "data-yanked" in attrs))
    return out
