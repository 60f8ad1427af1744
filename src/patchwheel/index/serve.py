"""``patchwheel serve``: build/ over HTTP, with PEP 691 content negotiation on build/simple.

A plain static server hands out ``index.html`` for a directory, so clients only ever see the
PEP 503 HTML. This server answers ``Accept: application/vnd.pypi.simple.v1+json`` with the
``index.json`` written beside it (``Vary: Accept``), serves files (wheels, ``.metadata``) as they
are, and nothing else: no directory listings, no dot-paths (``.store``, ``.locks``), nothing
reached through a symbolic link that leads out of build/.

A development server, hardened against careless and hostile clients alike: each connection has
a timeout (:data:`TIMEOUT_S`), the listen backlog is :data:`BACKLOG`, at most :data:`MAX_THREADS`
requests run at once (the rest wait in the backlog), and a bad request (NUL bytes, an over-long
path, …) is answered 400 or 404 without a traceback. For anything shared, use pypiserver or
devpi.
"""

from __future__ import annotations

import http.server
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Literal
from urllib.parse import unquote, urlsplit

from patchwheel.index.static import HTML_TYPE, JSON_TYPE

Format = Literal["json", "html"]
# Media types a client may ask for, in the server's order of preference for ties.
OFFERS: tuple[tuple[str, Format, str], ...] = (
    (JSON_TYPE, "json", JSON_TYPE),
    ("application/vnd.pypi.simple.latest+json", "json", JSON_TYPE),
    (HTML_TYPE, "html", HTML_TYPE),
    ("application/vnd.pypi.simple.latest+html", "html", HTML_TYPE),
    ("text/html", "html", "text/html; charset=utf-8"),
)
PAGES: dict[Format, str] = {"json": "index.json", "html": "index.html"}
TIMEOUT_S = 30  # an idle or slow connection is closed after this many seconds
BACKLOG = 256
MAX_THREADS = 64
MAX_PATH = 2048  # longer request paths are refused (400) before any file system call


def negotiate(accept: str) -> tuple[Format, str] | None:
    """The page format and Content-Type for an ``Accept`` header (PEP 691), or None (406).

    The highest quality wins; ties go to the server's order (JSON first). No header, or
    ``*/*``, means HTML, the format every client understands.
    """
    if not accept.strip():
        return "html", "text/html; charset=utf-8"
    best: tuple[float, int, Format, str] | None = None
    for item in accept.split(","):
        media, _, params = item.strip().partition(";")
        quality = _quality(params)
        if quality <= 0:
            continue
        for rank, fmt, content_type in _matches(media.strip().lower()):
            if best is None or (quality, -rank) > best[:2]:
                best = (quality, -rank, fmt, content_type)
    return None if best is None else (best[2], best[3])


def _matches(media: str) -> list[tuple[int, Format, str]]:
    if media in ("*/*", "text/*"):
        return [(len(OFFERS), "html", "text/html; charset=utf-8")]
    return [(rank, fmt, ct) for rank, (offer, fmt, ct) in enumerate(OFFERS) if offer == media]


def _quality(params: str) -> float:
    for param in params.split(";"):
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value)
            except ValueError:
                return 0.0
    return 1.0


class IndexServer:
    """A threaded HTTP server over ``root`` (a build/ directory); ``with`` runs it in a thread."""

    def __init__(
        self,
        root: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        log: Callable[[str], None] | None = None,
        timeout: float = TIMEOUT_S,
    ) -> None:
        handler = _handler(root.resolve(), log, timeout)
        self.httpd = _BoundedServer((host, port), handler, log)
        bound_host, bound_port = self.httpd.server_address[:2]
        self.url = f"http://{_url_host(str(bound_host))}:{bound_port}/"
        self._thread: threading.Thread | None = None

    @property
    def index_url(self) -> str:
        """The URL of the union index (``build/simple``)."""
        return self.url + "simple/"

    def serve_forever(self) -> None:
        """Serve until interrupted."""
        self.httpd.serve_forever()

    def __enter__(self) -> IndexServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join()
            self._thread = None
        self.httpd.server_close()


class _BoundedServer(http.server.ThreadingHTTPServer):
    """ThreadingHTTPServer with a real backlog, at most MAX_THREADS handlers at once (the
    accept loop waits for a free one, so a flood waits in the backlog instead of taking every
    descriptor) and one log line, never a traceback, for a connection that failed."""

    request_queue_size = BACKLOG
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[http.server.BaseHTTPRequestHandler],
        log: Callable[[str], None] | None,
    ) -> None:
        self._slots = threading.BoundedSemaphore(MAX_THREADS)
        self._log = log
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if self._log is not None:
            self._log(f"{client_address[0]} connection failed: {sys.exc_info()[1]!r}"[:300])


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _handler(
    root: Path, log: Callable[[str], None] | None, idle_s: float
) -> type[http.server.SimpleHTTPRequestHandler]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        timeout = idle_s  # per connection: an idle or slow client is disconnected

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def send_head(self) -> BinaryIO | None:
            try:
                url_path = unquote(urlsplit(self.path).path, errors="strict")
            except (ValueError, UnicodeDecodeError):
                self.send_error(400, "bad request path")
                return None
            if len(self.path) > MAX_PATH or "\0" in url_path or "\\" in url_path:
                self.send_error(400, "bad request path")
                return None
            if any(part.startswith(".") for part in url_path.split("/")):
                self.send_error(404, "not found")
                return None
            try:
                local = Path(self.translate_path(self.path))
                inside = local.resolve() == root or local.resolve().is_relative_to(root)
                if not inside:  # a symbolic link in build/ that leads out of it
                    self.send_error(404, "not found")
                    return None
                if local.is_dir() and url_path.endswith("/"):
                    return self._send_page(local)
                return super().send_head()
            except (OSError, ValueError, RuntimeError):
                self.send_error(404, "not found")
                return None

        def _send_page(self, directory: Path) -> BinaryIO | None:
            chosen = negotiate(self.headers.get("Accept", ""))
            if chosen is None:
                self.send_error(406, "acceptable: " + ", ".join(o[0] for o in OFFERS))
                return None
            fmt, content_type = chosen
            page = directory / PAGES[fmt]
            if not page.is_file() or not page.resolve().is_relative_to(root):
                self.send_error(404, "not found")
                return None
            fh = page.open("rb")
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(page.stat().st_size))
            self.send_header("Vary", "Accept")
            self.end_headers()
            return fh

        def list_directory(self, path: str | Path) -> None:  # type: ignore[override]
            del path
            self.send_error(404, "not found")

        def log_message(self, format: str, *args: object) -> None:
            if log is not None:
                log(f"{self.address_string()} {format % args}")

    return Handler
