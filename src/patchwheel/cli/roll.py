"""``patchwheel roll``: move a target onto its channel's newest (or a given) revision.

    patchwheel roll --target T [--to VERSION|COMMIT|latest] [--new-target NAME]
                    [--verify extraction|install] [--pre] [--project P]
                    [--missing VARIANT=keep|drop …] [--allow-downgrade]
    patchwheel roll --target T --continue | --skip | --abort

Exit status: 0 green (or already up to date), 1 a person is needed (a conflict, new drift, a
failed build or verification: the next command is printed), 2 an error.
"""

from __future__ import annotations

import argparse
import json

from rich.markup import escape

from patchwheel import console, roll
from patchwheel.cli import _context
from patchwheel.config.targets import load_target
from patchwheel.errors import ConfigError, PatchwheelError
from patchwheel.rebase.missing import parse_overrides

ERROR = 2

ROLL_HELP = """\
Roll a target onto the newest revision of the channel its target.toml names
([projects.P.channel]: a nightly / per-commit wheel index and the git repository of its
sources), or onto --to VERSION (e.g. 0.33.1rc1.dev123+g1a2b3c4d5) or a commit: the source pin
becomes that commit, each variant's pin that revision's wheel (sha256 recorded). Without a
channel table the roll follows the project's releases on the package index its pin comes from
(pip's index-url): the newest final release (--pre: pre-releases too) or --to 0.33.0; the
source pin becomes its sdist, each variant's pin its wheel. A variant the release has no wheel
of is kept at its pin or dropped, as its `missing` in target.toml (or --missing) says; without
either it is dropped and the exit status is 1, with the command that keeps it. The series is
rebased (patches whose Drop-When holds or whose change is upstream are dropped; remembered
resolutions answer known conflicts), the target built and audited (drift is bisected to the
upstream commit that introduced it) and verified on CPU where it has a CPU variant. Report:
build/<target>/roll.md and roll.json."""


def register(sub: _context.SubParsers) -> None:
    """Mount ``roll``."""
    parser = sub.add_parser(
        "roll",
        help="roll a target onto its channel's newest revision (rebase, build, audit, verify)",
        description=ROLL_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--target", help=_context.TARGET_HELP)
    parser.add_argument(
        "--to",
        metavar="VERSION",
        help="a channel version, a commit id, a release (0.33.0), or latest (default: latest)",
    )
    parser.add_argument(
        "--pre",
        action="store_true",
        help="following releases: pre-releases count as the newest (default: final releases)",
    )
    parser.add_argument(
        "--project",
        help="the project to roll (default: the one with a channel, else the one "
        "overlay project pinned to a release)",
    )
    parser.add_argument(
        "--missing",
        action="append",
        default=[],
        metavar="VARIANT=keep|drop",
        help="when the new version has no wheel of VARIANT: keep its pin, or drop it (overrides "
        "target.toml's `missing`); repeatable",
    )
    parser.add_argument(
        "--new-target", metavar="NAME", help="write the result as a new target (T untouched)"
    )
    parser.add_argument(
        "--allow-downgrade",
        action="store_true",
        help="let --to move the pin to an older revision (a roll never moves backwards unless "
        "asked; when the channel's newest is older than the pin, the pin stays)",
    )
    parser.add_argument(
        "--verify",
        choices=["extraction", "install"],
        default="extraction",
        help="CPU verification: what `nox -s verify` runs (the consumer's install commands, "
        "the model families against both oracles, speculators' library pipeline; default), or the "
        "install check (install from the target's index, hash-check, import)",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--continue",
        dest="resume",
        action="store_true",
        help="go on from the step the roll reached (after resolving a conflict, fixing what "
        "roll.md names, or a kill)",
    )
    action.add_argument(
        "--skip",
        action="store_true",
        help="drop the patch a conflict stopped at (or skip the bisect), go on",
    )
    action.add_argument(
        "--abort",
        action="store_true",
        help="undo the roll at any step: target.toml, target.lock, the series and vendor/ as "
        "before it",
    )
    parser.add_argument("--json", action="store_true", help="print roll.json on stdout")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Start, continue, skip or abort a roll: 0 green, 1 a person is needed, 2 an error."""
    try:
        outcome = _run(args)
    except PatchwheelError as exc:
        console.stderr.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return ERROR
    if args.json and outcome.report:
        print(json.dumps(outcome.report, indent=2))
    return outcome.exit_status


def _run(args: argparse.Namespace) -> roll.RollOutcome:
    workspace = _context.workspace(args)
    name = _context.target_name(args)
    if args.resume or args.skip or args.abort:
        if (
            args.to
            or args.new_target
            or args.missing
            or args.pre
            or args.project
            or args.allow_downgrade
        ):
            raise ConfigError(
                "--continue, --skip and --abort take no --to, --new-target, --missing, --pre, "
                "--project or --allow-downgrade"
            )
        if args.abort:
            return roll.abort(workspace, name)
        if args.skip:
            return roll.skip(workspace, _context.cache(args), name)
        return roll.resume(workspace, _context.cache(args), name)
    target = load_target(workspace.patches, name)
    return roll.start(
        workspace,
        _context.cache(args),
        name,
        to=args.to,
        new_target=args.new_target,
        verify=args.verify,
        pre=args.pre,
        project=args.project,
        missing=parse_overrides(args.missing, target),
        allow_downgrade=args.allow_downgrade,
    )
