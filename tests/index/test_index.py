"""The static index and the server's content negotiation, without a build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchwheel.errors import BuildError
from patchwheel.index.serve import negotiate
from patchwheel.index.static import Artifact, write_index
from tests import support


def test_a_file_shared_by_two_targets_is_listed_once_and_a_clash_is_refused(
    tmp_path: Path,
) -> None:
    build = tmp_path / "build"
    for target, body in (("a", b"same"), ("b", b"same"), ("c", b"different")):
        (build / target).mkdir(parents=True)
        (build / target / "pkg-1.0.tar.gz").write_bytes(body)

    def artifact(target: str) -> Artifact:
        path = build / target / "pkg-1.0.tar.gz"
        return Artifact(path=path, project="pkg", sha256=support.sha256(path))

    write_index(tmp_path / "ok", build / "simple", [artifact("a"), artifact("b")])
    assert len(json.loads((tmp_path / "ok" / "pkg" / "index.json").read_text())["files"]) == 1

    with pytest.raises(BuildError) as info:
        write_index(tmp_path / "bad", build / "simple", [artifact("a"), artifact("c")])
    message = str(info.value)
    assert "pkg-1.0.tar.gz" in message and str(build / "a") in message
    assert str(build / "c") in message and "new local label" in message


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("", "html"),
        ("*/*", "html"),
        ("text/html", "html"),
        (support.PIP_ACCEPT, "json"),
        ("application/vnd.pypi.simple.latest+json", "json"),
        ("application/vnd.pypi.simple.v1+json;q=0.5, text/html", "html"),
        ("application/vnd.pypi.simple.v1+json;q=0, text/html;q=0.1", "html"),
        ("application/json", None),
    ],
)
def test_content_negotiation(accept: str, expected: str | None) -> None:
    chosen = negotiate(accept)
    assert (chosen[0] if chosen else None) == expected
