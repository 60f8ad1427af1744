"""Helpers of issue 31's tests (hostile transfers and secrets): a split transfer folder, a
recording HTTP server, a running ``patchwheel serve``, raw HTTP requests.

Imports nothing from patchwheel: the tests run against main's code too (``PYTHONPATH``).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import hardening_support as hs

SECRET = "s3cr3t-Tok3n-31"  # what no output, file or foreign request may hold


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def outside(base: Path, folder: str) -> dict[str, str]:
    """Everything under ``base`` except ``folder`` (the stated folder): must not change."""
    return {k: v for k, v in hs.snapshot(base).items() if k.split("/")[0] != folder}


@dataclass
class Transfer:
    """``base/transfer``: big.whl split into three parts by ``patchwheel split``, small.whl,
    SHA256SUMS; ``base/precious.txt`` beside it (outside the stated folder)."""

    base: Path
    cache: Path
    big: bytes

    @property
    def folder(self) -> Path:
        return self.base / "transfer"

    @property
    def precious(self) -> Path:
        return self.base / "precious.txt"

    def manifest(self) -> dict:
        return json.loads((self.folder / "parts.json").read_text())

    def write_manifest(self, data: dict) -> None:
        (self.folder / "parts.json").write_text(json.dumps(data, indent=2))

    def join(
        self, how: str, *args: str, folder: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``patchwheel join`` (how="cli") or the copied ``python3 join.py`` (how="script")."""
        target = str(folder or self.folder)
        if how == "cli":
            return hs.patchwheel(self.base, "join", target, *args, cache=self.cache, timeout=60)
        script = self.base / "join-copy.py" if folder is not None else self.folder / "join.py"
        return subprocess.run(
            [sys.executable, "-I", str(script), target, *args],
            capture_output=True,
            text=True,
            cwd=self.base,
            timeout=60,
            check=False,
        )


def make_transfer(tmp_path: Path) -> Transfer:
    base = tmp_path / "world"
    folder = base / "transfer"
    folder.mkdir(parents=True)
    big = os.urandom(300_000)
    small = b"small wheel\n"
    (folder / "big.whl").write_bytes(big)
    (folder / "small.whl").write_bytes(small)
    (folder / "SHA256SUMS").write_text(f"{sha(big)}  big.whl\n{sha(small)}  small.whl\n")
    (base / "precious.txt").write_text("precious, outside the transfer\n")
    cache = tmp_path / "cache"
    split = hs.patchwheel(base, "split", str(folder), "--size", "100kB", cache=cache)
    hs.assert_ok(split)
    assert sorted(p.name for p in folder.glob("big.whl.*")) == [
        "big.whl.001",
        "big.whl.002",
        "big.whl.003",
    ]
    # a copy of the shipped join.py outside, for folders that are missing or have none
    (base / "join-copy.py").write_bytes((folder / "join.py").read_bytes())
    return Transfer(base, cache, big)


# --------------------------------------------------------------------------- HTTP


@dataclass
class Recorder:
    """A real HTTP server on ``host`` that answers every request with ``status`` and records
    each request's line and headers (what another host would learn)."""

    url: str
    requests: list[str] = field(default_factory=list)

    def leaked(self, *secrets: str) -> list[str]:
        """The requests carrying credentials (an Authorization header) or a secret."""
        return [
            r
            for r in self.requests
            if "authorization:" in r.lower() or any(s and s in r for s in secrets)
        ]


@contextmanager
def recorder(host: str = "127.0.0.1", status: int = 401) -> Iterator[Recorder]:
    record = Recorder("")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            record.requests.append(f"{self.requestline}\n{self.headers}")
            self.send_response(status)
            if status == 401:
                self.send_header("WWW-Authenticate", 'Basic realm="pypi"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    server = http.server.ThreadingHTTPServer((host, 0), Handler)
    record.url = f"http://{host}:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield record
    finally:
        server.shutdown()
        server.server_close()


def lan_address() -> str | None:
    """An address of this machine that is not loopback (no packet is sent), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 1))
            address = str(sock.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address


@dataclass
class Served:
    url: str
    host: str
    port: int
    log: Path
    proc: subprocess.Popen[bytes]

    def output(self) -> str:
        return self.log.read_text("utf-8", "replace")


@contextmanager
def serve(root: Path, cache: Path, *args: str) -> Iterator[Served]:
    """``patchwheel serve --port 0 ARGS`` on ``root``; stops it afterwards."""
    log = root.parent / "serve.log"
    env = {**os.environ, "PATCHWHEEL_CACHE": str(cache), "COLUMNS": "400"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "patchwheel",
                "--root",
                str(root),
                "serve",
                "--port",
                "0",
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(r"http://127\.0\.0\.1:(\d+)/", log.read_text("utf-8", "replace"))
            if found:
                port = int(found.group(1))
                yield Served(found.group(0), "127.0.0.1", port, log, proc)
                break
            if proc.poll() is not None:
                raise AssertionError(f"serve exited {proc.returncode}: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        else:
            raise AssertionError(f"serve did not start: {log.read_text()[-2000:]}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def raw_request(port: int, request: bytes, timeout: float = 10) -> bytes:
    """Send ``request`` as it is; return everything the server answers (b"" for nothing)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
    return b"".join(chunks)
