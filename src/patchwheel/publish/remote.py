"""What a package repository already holds, read from its Simple API before anything is uploaded.

The repository's pages are read as PEP 691 JSON when it offers them, else as PEP 503 HTML
(``#sha256=`` fragments). Credentials are sent only after the server asks (HTTP 401) and only
to the repository's own origin: a redirect to another host (pypiserver's fallback to PyPI for a
project it does not hold) means "not on this repository", never "whatever PyPI has".
"""

from __future__ import annotations

import base64
import urllib.request
from dataclasses import dataclass, field
from http.client import HTTPMessage
from typing import IO
from urllib.parse import urljoin, urlsplit

from packaging.utils import canonicalize_name

from patchwheel.errors import HttpStatusError, PublishError, UnreachableError
from patchwheel.http import open_url, redact
from patchwheel.upstream import pages, simple_api

ACCEPT = f"{simple_api.JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
# Where the Simple API lies relative to an upload URL: pypiserver, devpi.
SIMPLE_SUFFIXES = ("simple/", "+simple/")


@dataclass(frozen=True)
class Credentials:
    """A user name and password for the repository (the password never printed)."""

    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class RemoteFile:
    """A file the repository lists, with the sha256 it states (None if it states none)."""

    filename: str
    sha256: str | None
    url: str


class _OffOrigin(Exception):
    """A redirect left the repository's origin."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        if _origin(newurl) != _origin(req.full_url):
            raise _OffOrigin(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower().rsplit("@", 1)[-1]


class RemoteIndex:
    """A repository's Simple API, read with the upload credentials when it asks for them."""

    def __init__(self, index_url: str, credentials: Credentials | None = None) -> None:
        self.index_url = index_url if index_url.endswith("/") else index_url + "/"
        self.credentials = credentials
        self.foreign = False  # on another origin than the repository: never sent credentials
        self._opener = urllib.request.build_opener(_SameOriginRedirects())

    @classmethod
    def for_repository(
        cls, repository_url: str, credentials: Credentials | None, index_url: str | None = None
    ) -> RemoteIndex:
        """The Simple API of an upload URL: ``index_url`` if given, else found beside it.

        The credentials go to the index only when it lies on the repository's own origin.
        """
        if index_url:
            same = _origin(index_url) == _origin(repository_url)
            index = cls(index_url, credentials if same else None)
            index.foreign = not same
            index.root_page()
            return index
        base = repository_url if repository_url.endswith("/") else repository_url + "/"
        tried: list[str] = []
        for suffix in SIMPLE_SUFFIXES:
            index = cls(urljoin(base, suffix), credentials)
            tried.append(index.index_url)
            if index.root_page() is not None:
                return index
        raise PublishError(
            f"cannot find the Simple API of {repository_url}: tried {', '.join(tried)}; "
            "pass --index-url with the repository's simple index"
        )

    def root_page(self) -> bytes | None:
        """The index's root page, or None when the server has none (HTTP 404)."""
        found = self._get(self.index_url)
        return None if found is None else found[0]

    def files(self, project: str) -> dict[str, RemoteFile]:
        """The files the repository holds for ``project``, by file name (empty: none)."""
        url = urljoin(self.index_url, canonicalize_name(project) + "/")
        found = self._get(url)
        if found is None:
            return {}
        body, content_type, final_url = found
        if simple_api.JSON_TYPE in content_type:
            listed = simple_api.parse_json_page(body, final_url)
        else:
            listed = simple_api.parse_html_page(body.decode("utf-8", "replace"), final_url)
        return {f.filename: RemoteFile(f.filename, f.sha256, f.url) for f in listed}

    def _get(self, url: str) -> tuple[bytes, str, str] | None:
        try:
            return self._open(url, authorize=False)
        except HttpStatusError as exc:
            if exc.code != 401:
                raise self._http_error(url, exc) from exc
            if self.foreign:
                raise PublishError(
                    f"{redact(url)} asks for credentials (HTTP 401), but it is not on the "
                    "repository's origin and patchwheel sends them nowhere else: give an "
                    "--index-url on the --repository-url's scheme, host and port"
                ) from exc
            if self.credentials is None:
                raise PublishError(
                    f"{url} asks for credentials (HTTP 401) and none are set: set "
                    "TWINE_USERNAME and TWINE_PASSWORD, or store them with keyring"
                ) from exc
        try:
            return self._open(url, authorize=True)
        except HttpStatusError as exc:
            raise self._http_error(url, exc) from exc

    def _open(self, url: str, *, authorize: bool) -> tuple[bytes, str, str] | None:
        headers = {"Accept": ACCEPT}
        if authorize and self.credentials is not None:
            token = f"{self.credentials.username}:{self.credentials.password}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(token).decode()
        try:
            with open_url(url, headers=headers, opener=self._opener) as response:
                return (
                    pages.read_body(response, url, f"the repository index {self.index_url}"),
                    response.headers.get("Content-Type", ""),
                    response.geturl(),
                )
        except _OffOrigin:
            return None
        except HttpStatusError as exc:
            if exc.code == 404:
                return None
            raise
        except UnreachableError as exc:
            raise PublishError(
                f"the repository index {self.index_url} is unreachable ({exc.reason}); "
                "check the URL and that the server is running"
            ) from exc

    def _http_error(self, url: str, exc: HttpStatusError) -> PublishError:
        if exc.code in (401, 403):
            return PublishError(
                f"{url} refused the credentials (HTTP {exc.code} {exc.reason}): check "
                "TWINE_USERNAME and TWINE_PASSWORD, or the keyring entry for the repository"
            )
        return PublishError(f"{url} answered HTTP {exc.code} {exc.reason}")
