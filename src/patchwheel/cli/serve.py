"""``patchwheel serve``: build/ over HTTP (PEP 503 HTML and PEP 691 JSON at /simple/)."""

from __future__ import annotations

import argparse

from patchwheel import console
from patchwheel.cli import _context
from patchwheel.errors import ConfigError, PublishError
from patchwheel.index.serve import TIMEOUT_S, IndexServer


def register(sub: _context.SubParsers) -> None:
    """Mount ``serve``."""
    serve = sub.add_parser(
        "serve", help="serve build/ over HTTP (PEP 503 HTML and PEP 691 JSON at /simple/)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (8000; 0: any free port)")
    serve.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_S,
        metavar="S",
        help=f"close a connection idle this many seconds ({TIMEOUT_S})",
    )
    serve.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    if not args.timeout > 0:
        raise ConfigError(f"--timeout {args.timeout}: give a number of seconds above 0")
    workspace = _context.workspace(args)
    build = workspace.build
    if not workspace.index_dir.is_dir():
        raise PublishError(f"{workspace.index_dir} does not exist: build a target first")
    server = IndexServer(build, args.host, args.port, log=console.status, timeout=args.timeout)
    console.status(
        f"serving {build} at {server.url}\n"
        f"  pip install --index-url {server.index_url} PACKAGE\n"
        "  (PEP 503 HTML, PEP 691 JSON, PEP 658 metadata; Ctrl-C stops)\n"
        "  a development server: for an index others share, use pypiserver or devpi"
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.status("stopped")
    finally:
        server.close()
    return 0
