"""HTTP for every request patchwheel makes: one user agent, one timeout, one error mapping.

:func:`open_url` is the only place that calls urllib: index pages, downloads, metadata range
reads and the publish repository's pages all go through it. Its errors are two, both
:class:`~patchwheel.errors.FetchError`: :class:`~patchwheel.errors.HttpStatusError` (the server
answered, with an error status) and :class:`~patchwheel.errors.UnreachableError` (no answer);
callers that know what the request was for say so in their own words.

:func:`configured_index_urls` is the package index patchwheel reads: pip's configuration.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from http.client import HTTPResponse

from patchwheel import __version__
from patchwheel.errors import HttpStatusError, UnreachableError

USER_AGENT = f"patchwheel/{__version__}"
TIMEOUT_S = 60
PYPI_SIMPLE = "https://pypi.org/simple/"


@contextmanager
def open_url(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    method: str | None = None,
    opener: urllib.request.OpenerDirector | None = None,
) -> Iterator[HTTPResponse]:
    """The response to a request for ``url`` (read it inside the ``with``).

    An error status raises HttpStatusError, no answer (refused, timed out, cut off while
    reading) UnreachableError; ``opener`` replaces urllib's default one (redirect rules).
    """
    request = urllib.request.Request(
        url, headers={"User-Agent": USER_AGENT, **(headers or {})}, method=method
    )
    try:
        if opener is None:
            response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
        else:
            response = opener.open(request, timeout=TIMEOUT_S)
        with response:
            yield response
    except urllib.error.HTTPError as exc:
        raise HttpStatusError(url, exc.code, str(exc.reason)) from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
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
