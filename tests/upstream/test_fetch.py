"""Fetching through a real HTTP package index: hashes, the cache, partial downloads, pip config."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchwheel.errors import FetchError, HashMismatchError
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.fetch import fetch_url
from tests import support
from tests.conftest import Checkout


class Server:
    """A real HTTP server over a directory that counts requests and can cut a file short."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[str] = []
        self.truncate: set[str] = set()
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

            def do_GET(self) -> None:
                server.requests.append(self.path)
                name = self.path.rsplit("/", 1)[-1]
                if name in server.truncate:
                    data = (root / self.path.lstrip("/")).read_bytes()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.connection.close()
                    return
                super().do_GET()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, Path, str]]:
    """An sdist of tinyproj behind a PEP 503 index on a real HTTP server."""
    upstream = tmp_path / "served-upstream"
    support.make_upstream(upstream)
    root = tmp_path / "www"
    files = root / "files"
    sdist = support.make_sdist(upstream, files, "tinyproj", "1.0")
    page = root / "simple" / "tinyproj"
    page.mkdir(parents=True)
    digest = support.sha256(sdist)
    (page / "index.html").write_text(
        f'<a href="../../files/{sdist.name}#sha256={digest}">{sdist.name}</a>\n'
    )
    server = Server(root)
    yield server, sdist, digest
    server.stop()


def test_wrong_sha256_is_refused_and_nothing_is_cached(served, tmp_path: Path) -> None:
    server, sdist, digest = served
    cache = Cache(tmp_path / "cache")
    wrong = "0" * 64
    with pytest.raises(HashMismatchError) as info:
        fetch_url(f"{server.url}/files/{sdist.name}", wrong, cache, what="pin 'tinyproj==1.0'")
    message = str(info.value)
    assert "tinyproj==1.0" in message and wrong in message and digest in message
    assert not cache.blob_path(wrong).exists() and not cache.blob_path(digest).exists()
    assert list((cache.root / "tmp").iterdir()) == []


def test_second_fetch_makes_no_request_and_corruption_is_refetched(served, tmp_path: Path) -> None:
    server, sdist, digest = served
    cache = Cache(tmp_path / "cache")
    url = f"{server.url}/files/{sdist.name}"
    path = fetch_url(url, digest, cache, what="pin")
    assert support.sha256(path) == digest
    count = len(server.requests)

    assert fetch_url(url, digest, cache, what="pin") == path
    assert len(server.requests) == count  # served from the cache

    path.write_bytes(b"corrupted")
    again = fetch_url(url, digest, cache, what="pin")
    assert support.sha256(again) == digest
    assert len(server.requests) == count + 1  # detected and fetched again


def test_interrupted_download_leaves_no_partial_file(served, tmp_path: Path) -> None:
    server, sdist, digest = served
    server.truncate.add(sdist.name)
    cache = Cache(tmp_path / "cache")
    with pytest.raises(FetchError):
        fetch_url(f"{server.url}/files/{sdist.name}", digest, cache, what="pin")
    assert not cache.blob_path(digest).exists()
    assert list((cache.root / "tmp").iterdir()) == []


def test_lock_and_build_honour_pip_index_url(served, checkout: Checkout) -> None:
    server, _sdist, digest = served
    checkout.write_target("tinyproj==1.0")
    env = {"PIP_INDEX_URL": f"{server.url}/simple/", "PATCHWHEEL_INDEX_URL": ""}
    locked = checkout.run("lock", env=env)
    assert locked.returncode == 0, locked.stderr
    lock_text = (checkout.patches / "tiny" / "target.lock").read_text()
    assert digest in lock_text and 'kind = "sdist"' in lock_text

    built = checkout.run("build", "--no-audit", env=env)
    assert built.returncode == 0, built.stderr
    manifest = json.loads((checkout.build / "tiny" / "manifest.json").read_text())
    [wheel] = manifest["wheels"]
    assert wheel["action"] == "copied" and wheel["sha256"] == digest  # empty series: as is

    # From a clean checkout state the cache serves everything: not one request.
    count = len(server.requests)
    for path in (checkout.build, checkout.vendor):
        support.subprocess.run(["rm", "-rf", str(path)], check=True)
    offline = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple/", "PATCHWHEEL_INDEX_URL": ""}
    rebuilt = checkout.run("build", "--no-audit", env=offline)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert len(server.requests) == count


def test_wrong_sha256_in_target_toml_names_pin_and_both_values(served, checkout: Checkout) -> None:
    server, _sdist, digest = served
    checkout.write_target("tinyproj==1.0")
    target = checkout.patches / "tiny" / "target.toml"
    target.write_text(target.read_text() + f'sha256 = "{"ab" * 32}"\n')
    result = checkout.run("lock", env={"PATCHWHEEL_INDEX_URL": f"{server.url}/simple/"})
    assert result.returncode == 1
    assert "tinyproj==1.0" in result.stderr
    assert "ab" * 32 in result.stderr and digest in result.stderr
