"""The static index in build/ (PEP 503, 629, 691, 700, 658, 714), ``patchwheel serve``, and pip
resolving through the metadata files without reading a wheel.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import venv
import zipfile
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin

import pytest

from patchwheel.index.serve import IndexServer
from patchwheel.index.static import JSON_TYPE
from tests import support
from tests.conftest import DefaultBuild
from tests.integration.pypiserver_support import clean_pip_env
from tests.integration.test_publish import Built, built_once

__all__ = ["built_once"]  # the module-scoped build fixture, shared with test_publish


class Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[dict[str, str | None]] = []
        self.meta: dict[str, str | None] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))
        elif tag == "meta":
            values = dict(attrs)
            self.meta[values.get("name") or ""] = values.get("content")


def parse_html(path: Path) -> Anchors:
    parser = Anchors()
    parser.feed(path.read_text("utf-8"))
    return parser


def local_file(page_dir: Path, href: str) -> Path:
    """Where a relative link of a page in ``page_dir`` points on disk."""
    url, _ = urldefrag(urljoin(page_dir.as_uri() + "/", href))
    return Path(unquote(url.removeprefix("file://")))


def test_pages_follow_the_simple_api_specs(built_once: Built) -> None:
    simple = built_once.root / "build" / "simple"
    wheel, sdist = built_once.wheel(patched=True), built_once.wheel(patched=False)

    root = parse_html(simple / "index.html")
    assert root.meta["pypi:repository-version"] == "1.1"
    assert [a["href"] for a in root.anchors] == ["speculators/", "tinydep/"]
    root_json = json.loads((simple / "index.json").read_text())
    assert root_json["meta"] == {"api-version": "1.1"}
    assert [p["name"] for p in root_json["projects"]] == ["speculators", "tinydep"]

    page = simple / "speculators"
    [anchor] = parse_html(page / "index.html").anchors
    href, fragment = urldefrag(anchor["href"] or "")
    assert fragment == f"sha256={wheel['sha256']}"
    wheel_path = local_file(page, href)
    assert wheel_path.name == wheel["filename"] and support.sha256(wheel_path) == wheel["sha256"]
    metadata = wheel_path.with_name(wheel_path.name + ".metadata")
    with zipfile.ZipFile(wheel_path) as zf:
        [member] = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        assert metadata.read_bytes() == zf.read(member)
    assert anchor["data-core-metadata"] == f"sha256={support.sha256(metadata)}"
    assert anchor["data-dist-info-metadata"] == anchor["data-core-metadata"]  # PEP 714 legacy
    assert anchor["data-requires-python"] == ">=3.8"
    assert 'data-requires-python="&gt;=3.8"' in (page / "index.html").read_text()

    data = json.loads((page / "index.json").read_text())
    assert data["meta"] == {"api-version": "1.1"} and data["name"] == "speculators"
    assert data["versions"] == [wheel["version"]]  # PEP 700
    [entry] = data["files"]
    assert entry == {
        "filename": wheel["filename"],
        "url": href,
        "hashes": {"sha256": wheel["sha256"]},
        "requires-python": ">=3.8",
        "core-metadata": {"sha256": support.sha256(metadata)},
        "size": wheel_path.stat().st_size,
    }  # no "dist-info-metadata": pip 22.3-23.1 crash on it in JSON (PEP 714)

    [sdist_anchor] = parse_html(simple / "tinydep" / "index.html").anchors
    assert "data-core-metadata" not in sdist_anchor  # metadata files exist for wheels only
    [sdist_entry] = json.loads((simple / "tinydep" / "index.json").read_text())["files"]
    assert sdist_entry["filename"] == sdist["filename"] and "core-metadata" not in sdist_entry


def get(url: str, accept: str | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), b""


def test_serve_negotiates_json_and_hides_internals(built_once: Built) -> None:
    build = built_once.root / "build"
    page = build / "simple" / "speculators"
    with IndexServer(build) as server:
        status, headers, body = get(server.index_url + "speculators/", support.PIP_ACCEPT)
        assert status == 200 and headers["Content-Type"] == JSON_TYPE
        assert headers["Vary"] == "Accept"
        assert body == (page / "index.json").read_bytes()
        status, headers, body = get(server.index_url + "speculators/")
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        assert body == (page / "index.html").read_bytes()
        assert get(server.index_url + "speculators/", "application/json")[0] == 406
        wheel = built_once.wheel()
        url = server.url + "tiny/wheels/" + wheel["filename"].replace("+", "%2B")
        assert get(url + ".metadata")[0] == 200
        assert get(server.url + "tiny/wheels/")[0] == 404  # no directory listings
        assert get(server.url + ".store/")[0] == 404
        assert get(server.url + ".locks/tiny.lock")[0] == 404


class StaticServer:
    """A plain static HTTP server over build/ (HTML only, like any web server) that logs paths."""

    def __init__(self, root: Path, log: list[str]) -> None:
        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

            def log_message(self, format: str, *args: object) -> None:
                log.append(format % args)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.index_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simple/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(params=["patchwheel-serve", "static"])
def served_build(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[Callable[[Path], str], list[str]]]:
    """A function that serves a build/ dir (JSON-negotiating or plain) and logs each request."""
    servers: list[IndexServer | StaticServer] = []
    log: list[str] = []

    def serve(build: Path) -> str:
        if request.param == "patchwheel-serve":
            server: IndexServer | StaticServer = IndexServer(build, log=log.append).__enter__()
        else:
            server = StaticServer(build, log)
        servers.append(server)
        return server.index_url

    yield serve, log
    for server in servers:
        server.close()


def dry_run(tmp_path: Path, index_url: str, requirement: str) -> dict:
    """``pip install --dry-run --report`` for a fresh venv (pip of this environment, >= 26)."""
    target = tmp_path / "fresh-venv"
    venv.EnvBuilder(with_pip=False).create(target)
    report = tmp_path / "report.json"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(target / "bin" / "python")),
            *("install", "--dry-run", "--no-deps", "--ignore-installed", "--no-cache-dir"),
            *("--report", str(report), "--index-url", index_url, requirement),
        ],
        capture_output=True,
        text=True,
        env=clean_pip_env(),
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data: dict = json.loads(report.read_text())
    return data


def requested(log: list[str]) -> list[str]:
    return [unquote(line.split('"')[1].split()[1]) for line in log if '"GET ' in line]


def test_pip_resolves_through_metadata_without_reading_the_wheel(
    built_once: Built, served_build: tuple, tmp_path: Path
) -> None:
    serve, log = served_build
    wheel = built_once.wheel()
    report = dry_run(tmp_path, serve(built_once.root / "build"), f"speculators=={wheel['version']}")
    [item] = report["install"]
    assert item["metadata"]["version"] == wheel["version"]
    assert item["download_info"]["archive_info"]["hashes"] == {"sha256": wheel["sha256"]}
    paths = requested(log)
    assert f"/tiny/wheels/{wheel['filename']}.metadata" in paths
    assert f"/tiny/wheels/{wheel['filename']}" not in paths, paths


@pytest.mark.network
@pytest.mark.slow
def test_pip_resolves_the_vllm_wheel_without_downloading_it(
    default_build: DefaultBuild, served_build: tuple, tmp_path: Path
) -> None:
    serve, log = served_build
    manifest = default_build.manifest()
    [vllm] = [w for w in manifest["wheels"] if w["distribution"] == "vllm"]  # type: ignore
    assert vllm["size"] > 100_000_000
    report = dry_run(tmp_path, serve(default_build.build), f"vllm=={vllm['version']}")
    [item] = report["install"]
    assert item["metadata"]["name"] == "vllm" and item["metadata"]["version"] == vllm["version"]
    paths = requested(log)
    wheel_path = f"/{default_build.target}/wheels/{vllm['filename']}"
    assert wheel_path + ".metadata" in paths
    assert wheel_path not in paths, paths
