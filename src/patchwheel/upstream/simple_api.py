"""A client for the package index's Simple API (PEP 503 HTML, PEP 691 JSON), honouring pip's config.

Only index pages are read here (through :mod:`patchwheel.http`, from the indexes pip is configured
with; bounded in size and depth by :mod:`patchwheel.upstream.pages`, every failure a FetchError
naming the page); artifacts are downloaded by :mod:`patchwheel.upstream.fetch`. pip is never
asked to build metadata, so an sdist that needs torch to build is just a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging.utils import canonicalize_name

from patchwheel.errors import FetchError, HttpStatusError, RedirectRefusedError, UnreachableError
from patchwheel.http import configured_index_urls, open_url
from patchwheel.upstream import pages

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class IndexFile:
    """One file listed on a project page."""

    filename: str
    url: str
    sha256: str | None
    size: int | None = None
    upload_time: str | None = None
    yanked: bool = False


def project_files(name: str, index_urls: list[str] | None = None) -> list[IndexFile]:
    """Every file of a project on the configured indexes, primary index first."""
    files: list[IndexFile] = []
    seen: set[str] = set()
    for index in index_urls or configured_index_urls():
        for item in _project_page(index, canonicalize_name(name)):
            if item.filename not in seen:
                seen.add(item.filename)
                files.append(item)
    return files


def _project_page(index: str, project: str) -> list[IndexFile]:
    page_url = urljoin(index, project + "/")
    what = f"index {index}"
    if urlsplit(page_url).scheme == "file":
        return _file_page(page_url, what)
    try:
        with open_url(page_url, headers={"Accept": f"{JSON_TYPE}, text/html;q=0.1"}) as response:
            body = pages.read_body(response, page_url, what)
            content_type = response.headers.get("Content-Type", "")
            final_url = response.geturl()
    except HttpStatusError as exc:
        if exc.code == 404:
            return []
        raise FetchError(f"{what}: {exc}") from exc
    except UnreachableError as exc:
        raise FetchError(
            f"{what} is unreachable ({exc.cause}); check the network or pip's index-url"
        ) from exc
    except RedirectRefusedError as exc:
        raise FetchError(f"{what}: {exc}") from exc
    if JSON_TYPE in content_type:
        return parse_json_page(body, final_url, what=what)
    return parse_html_page(body.decode("utf-8", "replace"), final_url, what=what)


def _file_page(page_url: str, what: str) -> list[IndexFile]:
    directory = Path(unquote(urlsplit(page_url).path))
    try:
        if (directory / "index.json").is_file():
            with (directory / "index.json").open("rb") as fh:
                body = pages.check_size(fh.read(pages.MAX_PAGE + 1), page_url, what)
            return parse_json_page(body, page_url, what=what)
        if (directory / "index.html").is_file():
            with (directory / "index.html").open("rb") as fh:
                body = pages.check_size(fh.read(pages.MAX_PAGE + 1), page_url, what)
            return parse_html_page(body.decode("utf-8", "replace"), page_url, what=what)
    except OSError as exc:
        raise FetchError(f"{what}: {page_url} cannot be read ({exc})") from exc
    return []


def parse_json_page(body: bytes, base_url: str, *, what: str = "index page") -> list[IndexFile]:
    """The files of a PEP 691 JSON project page; FetchError naming the page when it is not one."""
    data = pages.json_document(body, base_url, what)
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise FetchError(f"{what}: {base_url} is not a PEP 691 project page (no files list)")
    return [_json_file(item, base_url, what) for item in files]


def _json_file(item: Any, base_url: str, what: str) -> IndexFile:
    where = f"{what}: {base_url}"
    if not isinstance(item, dict):
        raise FetchError(f"{where} lists a file entry that is not an object")
    filename, url = item.get("filename"), item.get("url")
    if not isinstance(filename, str) or not isinstance(url, str):
        raise FetchError(f"{where} lists a file without a filename or url")
    hashes = item.get("hashes", {})
    sha = hashes.get("sha256") if isinstance(hashes, dict) else None
    size, uploaded = item.get("size"), item.get("upload-time")
    if (
        not isinstance(hashes, dict)
        or not isinstance(sha, str | None)
        or not (size is None or (isinstance(size, int) and not isinstance(size, bool)))
        or not isinstance(uploaded, str | None)
    ):
        raise FetchError(f"{where}: {filename} has a malformed hashes, size or upload-time")
    return IndexFile(
        filename=filename,
        url=urljoin(base_url, url),
        sha256=sha,
        size=size,
        upload_time=uploaded,
        yanked=bool(item.get("yanked")),
    )


def parse_html_page(text: str, base_url: str, *, what: str = "index page") -> list[IndexFile]:
    """The files of a PEP 503 HTML project page (sha256 from the URL fragment)."""
    files = []
    for attrs in pages.anchors(text, base_url, what):
        href = attrs.get("href")
        if not href:
            continue
        url, fragment = urldefrag(urljoin(base_url, href))
        algo, _, digest = fragment.partition("=")
        files.append(
            IndexFile(
                filename=unquote(urlsplit(url).path.rsplit("/", 1)[-1]),
                url=url,
                sha256=digest if algo == "sha256" else None,
                yanked="data-yanked" in attrs,
            )
        )
    return files
