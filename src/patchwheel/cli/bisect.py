"""``patchwheel bisect``: the first upstream commit where each audit finding appears or goes.

    patchwheel bisect [--target T] --good REV --bad REV [--project vllm] [--repo PATH]
                      [--consumer-target T] [--baseline PIN] [--report-dir DIR]

Exit status: 0 when the bisect ran (whatever it found), 1 on an error.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from rich.markup import escape

from patchwheel import console
from patchwheel.bisect.run import bisect_target, store_report
from patchwheel.cli import _context

BISECT_HELP = """\
Audit the target's patched consumer (speculators) against the provider's sources (vLLM) at
each commit of its history, and name for every finding that differs between --good and --bad
the first commit where it appears (the consumer breaks there) or disappears (the upstream
change a patch answers lands there), in log2 steps on the first-parent chain. No wheel is
built. REV: a commit, tag or branch of --repo (default: the target's channel repository); or
both ends written `vllm==X.Y.Z`: the releases between them, as sdists from the package index.
The report goes to build/<target>/bisect.md and bisect.json."""


def register(sub: _context.SubParsers) -> None:
    """Mount ``bisect``."""
    parser = sub.add_parser(
        "bisect",
        help="find the upstream commit where each audit finding appears or disappears",
        description=BISECT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--target", help=_context.TARGET_HELP)
    parser.add_argument("--good", required=True, metavar="REV", help="the older end")
    parser.add_argument("--bad", required=True, metavar="REV", help="the newer end")
    parser.add_argument(
        "--project", default="vllm", help="whose history to follow: vllm (default) or speculators"
    )
    parser.add_argument("--repo", type=Path, metavar="PATH", help="a git clone of that project")
    parser.add_argument(
        "--consumer-target",
        metavar="NAME",
        help="audit this target's patched consumer instead of --target's",
    )
    parser.add_argument(
        "--baseline",
        metavar="PIN",
        help="the provider the consumer was written for (default: the target's own)",
    )
    parser.add_argument(
        "--report-dir", type=Path, metavar="DIR", help="also write bisect.json/.md there"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Bisect, write the reports, print where each finding flips."""
    workspace = _context.workspace(args)
    name = _context.target_name(args)
    report = bisect_target(
        workspace,
        _context.cache(args),
        name,
        project=args.project,
        good=args.good,
        bad=args.bad,
        repo=args.repo,
        consumer_target=args.consumer_target,
        baseline=args.baseline,
        command=shlex.join(["patchwheel", *sys.argv[1:]]),
    )
    for path in store_report(workspace, report, args.report_dir):
        console.status(f"report: {path}")
    unit = report.unit
    for flip in report.flips:
        console.stderr.print(
            f"[bold]{escape(str(flip.subject.key))}[/] {flip.change} at {unit} "
            f"{flip.commit.id} {flip.commit.date} {escape(flip.commit.subject)}: "
            f"{flip.audit_runs} audit run(s)"
        )
    if report.unchanged:
        console.stderr.print(
            f"{len(report.unchanged)} finding(s) {escape(report.unchanged_note())}"
        )
    console.stderr.print(
        f"{len(report.runs)} audit runs, {report.seconds:.0f} s; "
        f"{len(report.flips)} change(s) located"
    )
    return 0
