"""``patchwheel publish``: upload a built target's files with twine, safely and repeatably.

patchwheel publish --repository-url URL [--target T] [--index-url URL]
                   [--require-verified] [--only-patched] [--dry-run] [--json]
"""

from __future__ import annotations

import argparse
import json

from rich.markup import escape
from rich.table import Table

from patchwheel import console
from patchwheel.cli import _context
from patchwheel.errors import PublishError
from patchwheel.publish.twine import publish_target

PUBLISH_HELP = """\
Upload a built target's files (build/<target>/manifest.json) to a package repository with
twine. Credentials come from TWINE_USERNAME / TWINE_PASSWORD or keyring, never from the
command line; they go only to the repository's own origin (an --index-url elsewhere is read
without them), over https or to this machine's loopback (plain http elsewhere needs
--allow-http); every URL shown has its user info redacted. Files already there with the same
sha256 are skipped; a different file under the same name is refused. Exit status 0 when every
file is on the repository."""


def register(sub: _context.SubParsers) -> None:
    """Mount ``publish``."""
    publish = sub.add_parser(
        "publish",
        help="upload a target's wheels to a package repository (twine)",
        description=PUBLISH_HELP,
    )
    publish.add_argument("--target", help=_context.TARGET_HELP)
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
        help="upload only if this build's passing verify-cpu.json / verify-gpu.json list every "
        "patched file (unpatched upstream copies go with them)",
    )
    publish.add_argument(
        "--only-patched", action="store_true", help="leave out unpatched upstream copies"
    )
    publish.add_argument(
        "--dry-run", action="store_true", help="check the repository, upload nothing"
    )
    publish.add_argument(
        "--allow-http",
        action="store_true",
        help="send the credentials over plain http to a host other than this machine "
        "(refused otherwise: use https)",
    )
    publish.add_argument("--json", action="store_true", help="print the JSON report on stdout")
    publish.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Publish the target; print each file's outcome; fail unless every file is there."""
    target = _context.target_name(args)
    report = publish_target(
        target,
        _context.workspace(args),
        args.repository_url,
        index_url=args.index_url,
        require_verified=args.require_verified,
        only_patched=args.only_patched,
        dry_run=args.dry_run,
        allow_http=args.allow_http,
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
        raise PublishError(report.problem())
    return 0
