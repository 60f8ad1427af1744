"""HTTP for every request patchwheel makes: one user agent, one timeout, one error mapping.

:func:`open_url` is the only place that calls urllib: index pages, downloads, metadata range
reads and the publish repository's pages all go through it. Its errors are two, both
:class:`~patchwheel.errors.FetchError`: :class:`~patchwheel.errors.HttpStatusError` (the server
answered, with an error status) and :class:`~patchwheel.errors.UnreachableError` (no answer);
callers that know what the request was for say so in their own words.

Redirects are checked *before* they are followed: a ``Location`` that is not http(s), or that
leaves https for http, is refused for every request, and a caller can hold a request's
redirects to its own rule (a channel's pages and wheels stay on the channel's host and path):
:class:`~patchwheel.errors.RedirectRefusedError`, and the redirected request is never made.

:func:`configured_index_urls` is the package index patchwheel reads: pip's configuration.

:func:`redact` is the one way a URL is shown or written: its user info (``user:password@``, a
token as the user name) becomes ``****@``, in every verb's output, error and file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from http.client import HTTPException, HTTPMessage, HTTPResponse
from typing import IO
from urllib.parse import urlsplit

from patchwheel import __version__
from patchwheel.errors import HttpStatusError, RedirectRefusedError, UnreachableError

USER_AGENT = f"patchwheel/{__version__}"
TIMEOUT_S = 60
PYPI_SIMPLE = "https://pypi.org/simple/"


# scheme://…@ up to the last '@' before the host: a password may hold an unencoded '@'.
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s]*@")
REDACTED = "****"


def redact(text: str) -> str:
    """``text`` with the user info of every URL in it replaced by ``****`` (tokens given as the
    user name, passwords, ``@`` inside a password included)."""
    return _USERINFO.sub(rf"\1{REDACTED}@", text)


def has_userinfo(url: str) -> bool:
    """Whether ``url`` carries a user name or password (credentials on a command line)."""
    return redact(url) != url


# A redirect rule: (the URL redirected from, the Location) -> why it is refused, or None.
RedirectRule = Callable[[str, str], str | None]


def plain_redirect(source: str, location: str) -> str | None:
    """The rule for every redirect: http(s) only, and never from https down to http."""
    scheme, before = urlsplit(location).scheme.lower(), urlsplit(source).scheme.lower()
    if scheme not in ("http", "https"):
        return f"only redirects to http(s) are followed (not to {scheme or 'no scheme'}:)"
    if before == "https" and scheme == "http":
        return "a redirect from https to http is not followed"
    return None


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirect handling, with the Location checked before the request is made."""

    def __init__(self, rule: RedirectRule | None) -> None:
        super().__init__()
        self.rule = rule

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        why = plain_redirect(req.full_url, newurl)
        if why is None and self.rule is not None:
            why = self.rule(req.full_url, newurl)
        if why is not None:
            fp.close()
            raise RedirectRefusedError(req.full_url, newurl, why)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


@contextmanager
def open_url(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    method: str | None = None,
    opener: urllib.request.OpenerDirector | None = None,
    redirects: RedirectRule | None = None,
) -> Iterator[HTTPResponse]:
    """The response to a request for ``url`` (read it inside the ``with``).

    An error status raises HttpStatusError, no answer (refused, timed out, cut off while
    reading) UnreachableError, a redirect that breaks :func:`plain_redirect` or ``redirects``
    RedirectRefusedError (before it is followed); ``opener`` replaces patchwheel's own (with
    redirect rules of its own).
    """
    request = urllib.request.Request(
        url, headers={"User-Agent": USER_AGENT, **(headers or {})}, method=method
    )
    if opener is None:
        opener = urllib.request.build_opener(_CheckedRedirects(redirects))
    try:
        response = opener.open(request, timeout=TIMEOUT_S)
        with response:
            yield response
    except urllib.error.HTTPError as exc:
        raise HttpStatusError(url, exc.code, str(exc.reason)) from exc
    except (urllib.error.URLError, TimeoutError, OSError, HTTPException) as exc:
        raise UnreachableError(url, exc) from exc


def configured_index_urls() -> list[str]:
    """The index URLs pip is configured with: index-url first, then extra-index-urls.

    ``PATCHWHEEL_INDEX_URL`` (space-separated) overrides pip's configuration.
    """
    override = os.environ.get("PATCHWHEEL_INDEX_URL")
    if override:
        return [_with_slash(u) for u in override.split()]
    return list(_pip_index_urls())


@cache
def _pip_index_urls() -> tuple[str, ...]:
    """Read ``pip config list`` (files and ``PIP_*`` environment) once per process."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    primary: list[str] = []
    extra: list[str] = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        value = value.strip().strip("'\"")
        option = key.rsplit(".", 1)[-1]
        if option == "index-url" and value:
            primary = [value]
        elif option == "extra-index-url" and value:
            extra.extend(value.split())
    env_primary = os.environ.get("PIP_INDEX_URL")
    if env_primary:
        primary = [env_primary]
    urls = (primary or [PYPI_SIMPLE]) + [u for u in extra if u not in primary]
    return tuple(_with_slash(u) for u in urls)


def _with_slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"
