"""``patchwheel publish`` and ``patchwheel serve``: the argparse glue the command mounts.

patchwheel publish --repository-url URL [--target T] [--index-url URL]
                   [--require-verified] [--only-patched] [--dry-run] [--json]
patchwheel serve [--host 127.0.0.1] [--port 8000]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from patchwheel import console
from patchwheel.errors import PublishError

PUBLISH_HELP = """\
Upload a built target's files (build/<target>/manifest.json) to a package repository with
twine. Credentials come from TWINE_USERNAME / TWINE_PASSWORD or keyring, never from the
command line. Files already there with the same sha256 are skipped; a different file under
the same name is refused. Exit status 0 when every file is on the repository."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``publish`` and ``serve`` to the ``patchwheel`` command."""
    publish = subparsers.add_parser(
        "publish",
        help="upload a target's wheels to a package repository (twine)",
        description=PUBLISH_HELP,
    )
    publish.add_argument("--target", help="target name (default: the default target)")
    publish.add_argument(
        "--repository-url", required=True, metavar="URL", help="the repository's upload URL"
    )
    publish.add_argument(
        "--index-url",
        metavar="URL",
        help="the repository's Simple API (default: URL/simple/ or URL/+simple/)",
    )
    publish.add_argument(
        "--require-verified",
        action="store_true",
        help="upload only files listed by a passing verify-cpu.json / verify-gpu.json",
    )
    publish.add_argument(
        "--only-patched", action="store_true", help="leave out unpatched upstream copies"
    )
    publish.add_argument(
        "--dry-run", action="store_true", help="check the repository, upload nothing"
    )
    publish.add_argument("--json", action="store_true", help="print the JSON report on stdout")
    publish.set_defaults(handler=_cmd_publish)

    serve = subparsers.add_parser(
        "serve", help="serve build/ over HTTP (PEP 503 HTML and PEP 691 JSON at /simple/)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (8000; 0: any free port)")
    serve.set_defaults(handler=_cmd_serve)


def _build_dir(args: argparse.Namespace) -> Path:
    return Path(args.root).resolve() / "build"


def _cmd_publish(args: argparse.Namespace) -> int:
    from patchwheel.config.targets import default_target_name
    from patchwheel.publish.twine import publish_target

    root = Path(args.root).resolve()
    target = args.target or default_target_name(root / "patches")
    report = publish_target(
        target,
        _build_dir(args),
        args.repository_url,
        index_url=args.index_url,
        require_verified=args.require_verified,
        only_patched=args.only_patched,
        dry_run=args.dry_run,
    )
    table = Table(title=f"publish {target} → {report.repository_url}", title_justify="left")
    for column in ("file", "result", "detail"):
        table.add_column(column, overflow="fold")
    for outcome in report.outcomes:
        table.add_row(escape(outcome.filename), outcome.status, escape(outcome.detail))
    console.stderr.print(table)
    for name, state in report.verification.items():
        console.status(escape(f"verification report {name}: {state}"))
    console.status(f"{report.summary()} in {report.seconds:.1f} s")
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    if not report.ok:
        held = [o.filename for o in report.outcomes if o.status not in ("uploaded", "skipped")]
        raise PublishError(
            f"{len(held)} file(s) of {target} are not on {report.repository_url}: "
            + ", ".join(held)
            + " (see above)"
        )
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from patchwheel.index.serve import IndexServer

    build = _build_dir(args)
    if not (build / "simple").is_dir():
        raise PublishError(f"{build / 'simple'} does not exist: build a target first")
    server = IndexServer(build, args.host, args.port, log=console.status)
    console.status(
        f"serving {build} at {server.url}\n"
        f"  pip install --index-url {server.index_url} PACKAGE\n"
        "  (PEP 503 HTML, PEP 691 JSON, PEP 658 metadata; Ctrl-C stops)"
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.status("stopped")
    finally:
        server.close()
    return 0
