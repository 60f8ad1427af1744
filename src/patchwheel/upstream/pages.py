"""Index pages are hostile input: read and parsed within bounds, every failure a FetchError.

What every page parser of patchwheel (the package index's pages, :mod:`.simple_api`; a
channel's, :mod:`.channel_index`) reads through:

* :func:`read_body` — at most :data:`MAX_PAGE` bytes of a response;
* :func:`json_document` — JSON nested at most :data:`MAX_DEPTH` levels deep (a PEP 691 page
  nests four: ``{"files": [{"hashes": {…}}]}``), checked before it is parsed, so a page of
  100000 times ``[`` is refused by name instead of exhausting the parser's recursion;
* :func:`anchors` — the ``<a>`` tags of an HTML page (the standard library's parser keeps no
  stack, so HTML has no depth to bound), at most :data:`MAX_LINKS` of them.

Each error names the page and what is wrong with it.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from http.client import HTTPResponse
from typing import Any

from patchwheel.errors import FetchError

MAX_PAGE = 16 * 1024 * 1024
MAX_DEPTH = 32
MAX_LINKS = 200_000
# What decides JSON's nesting: quotes (strings hide brackets), escapes inside strings, brackets.
_TOKENS = re.compile(rb'["\\\[\]{}]')
_QUOTE, _ESCAPE = ord('"'), ord("\\")
_OPEN = frozenset(b"[{")


def read_body(response: HTTPResponse, url: str, what: str, limit: int = MAX_PAGE) -> bytes:
    """The body of a page, refused when it is larger than ``limit`` bytes."""
    body = response.read(limit + 1)
    return check_size(body, url, what, limit)


def check_size(body: bytes, url: str, what: str, limit: int = MAX_PAGE) -> bytes:
    """``body``, unless it is larger than ``limit`` bytes."""
    if len(body) > limit:
        raise FetchError(f"{what}: {url} is larger than {limit} bytes; refused")
    return body


def nesting(body: bytes, limit: int = MAX_DEPTH) -> int:
    """How deep brackets nest in a JSON text, strings aside (counting stops past ``limit``).

    One pass over the quotes, escapes and brackets (linear in the page: a page of quotes and
    backslashes costs no more than its length)."""
    depth = deepest = 0
    in_string = False
    skip_to = -1
    for match in _TOKENS.finditer(body):
        at = match.start()
        if at < skip_to:
            continue  # the character an escape quotes
        char = body[at]
        if in_string:
            if char == _ESCAPE:
                skip_to = at + 2
            elif char == _QUOTE:
                in_string = False
        elif char == _QUOTE:
            in_string = True
        elif char in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif char != _ESCAPE:
            depth -= 1
    return deepest


def json_document(body: bytes, url: str, what: str) -> Any:
    """The JSON value of a page: bounded in size and depth; else FetchError naming the page."""
    check_size(body, url, what)
    depth = nesting(body)
    if depth > MAX_DEPTH:
        raise FetchError(
            f"{what}: {url} nests JSON more than {MAX_DEPTH} levels deep; refused (an index "
            "page nests four)"
        )
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise FetchError(f"{what}: {url} is not valid JSON: {exc}") from exc


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.found.append(dict(attrs))


def anchors(text: str, url: str, what: str) -> list[dict[str, str | None]]:
    """The attributes of every ``<a>`` of an HTML page; FetchError when it cannot be read."""
    if len(text) > MAX_PAGE:
        raise FetchError(f"{what}: {url} is larger than {MAX_PAGE} characters; refused")
    parser = _Anchors()
    try:
        parser.feed(text)
        parser.close()
    except (AssertionError, ValueError, RecursionError) as exc:
        raise FetchError(f"{what}: {url} is not an HTML page patchwheel can read: {exc}") from exc
    if len(parser.found) > MAX_LINKS:
        raise FetchError(f"{what}: {url} lists more than {MAX_LINKS} links; refused")
    return parser.found
