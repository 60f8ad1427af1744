"""patchwheel.http.redact: the one way a URL is shown or written (issue 31)."""

from __future__ import annotations

import pytest

from patchwheel.http import has_userinfo, redact


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://TOKEN@host/simple/", "https://****@host/simple/"),
        ("https://user:pw@host:8443/", "https://****@host:8443/"),
        ("http://u:p@ss@w#rd?x@host/", "http://****@host/"),  # '@', '#', '?' in a password
        ("see https://a:b@one/ and http://c@two/x", "see https://****@one/ and http://****@two/x"),
        ("https://host/path@v1/file", "https://host/path@v1/file"),  # '@' after the host
        ("file:///tmp/x.whl", "file:///tmp/x.whl"),
        ("git+https://tok@github.com/o/r@v1", "git+https://****@github.com/o/r@v1"),
        ("no url here: user@example.com", "no url here: user@example.com"),
    ],
)
def test_redact_hides_every_user_info(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert has_userinfo(text) == (text != shown)
