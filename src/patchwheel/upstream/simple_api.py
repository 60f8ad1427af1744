"""A client for the package index's Simple API (PEP 503 HTML, PEP 691 JSON), honouring pip's config.

Only index pages are read here (through :mod:`patchwheel.http`, from the indexes pip is configured
with); artifacts are downloaded by :mod:`patchwheel.upstream.fetch`. pip is never asked to build
metadata, so an sdist that needs torch to build is just a file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging.utils import canonicalize_name

from patchwheel.errors import FetchError, HttpStatusError, UnreachableError
from patchwheel.http import configured_index_urls, open_url

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
    if urlsplit(page_url).scheme == "file":
        return _file_page(page_url)
    try:
        with open_url(page_url, headers={"Accept": f"{JSON_TYPE}, text/html;q=0.1"}) as response:
            body = response.read()
            content_type = response.headers.get("Content-Type", "")
            final_url = response.geturl()
    except HttpStatusError as exc:
        if exc.code == 404:
            return []
        raise FetchError(f"index {index}: {exc}") from exc
    except UnreachableError as exc:
        raise FetchError(
            f"index {index} is unreachable ({exc.cause}); check the network or pip's index-url"
        ) from exc
    if JSON_TYPE in content_type:
        return parse_json_page(body, final_url)
    return parse_html_page(body.decode("utf-8", "replace"), final_url)


def _file_page(page_url: str) -> list[IndexFile]:
    directory = Path(unquote(urlsplit(page_url).path))
    if (directory / "index.json").is_file():
        return parse_json_page((directory / "index.json").read_bytes(), page_url)
    if (directory / "index.html").is_file():
        return parse_html_page((directory / "index.html").read_text("utf-8"), page_url)
    return []


def parse_json_page(body: bytes, base_url: str) -> list[IndexFile]:
    """The files of a PEP 691 JSON project page."""
    data = json.loads(body)
    return [
        IndexFile(
            filename=f["filename"],
            url=urljoin(base_url, f["url"]),
            sha256=f.get("hashes", {}).get("sha256"),
            size=f.get("size"),
            upload_time=f.get("upload-time"),
            yanked=bool(f.get("yanked")),
        )
        for f in data.get("files", [])
    ]


class _AnchorParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))


def parse_html_page(text: str, base_url: str) -> list[IndexFile]:
    """The files of a PEP 503 HTML project page (sha256 from the URL fragment)."""
    parser = _AnchorParser()
    parser.feed(text)
    files = []
    for attrs in parser.anchors:
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
