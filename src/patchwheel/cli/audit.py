"""``patchwheel audit``: the static API-drift audit, of two pins or of a target's vendor trees.

    patchwheel audit --consumer PIN --provider PIN [--baseline PIN] [--json FILE]
    patchwheel audit --target NAME [--baseline PIN] [--json FILE]   (when mounted with trees)

Exit status: 0 without findings, 1 with findings (or when the audit cannot run).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from patchwheel import atomic
from patchwheel.cli import _context
from patchwheel.config.audit import AuditSpec
from patchwheel.errors import AuditError, PatchwheelError

DESCRIPTION = """\
Check every call from the consumer (e.g. speculators) into the provider (e.g. vLLM) against
the provider's real signatures, statically (mypy on the provider's sources; nothing is
installed or imported). The consumer is checked against the provider version it declares (the
baseline) and against the new one; only what the new one breaks is reported.
PINs: `name==version` (sdist from the index), a git pin, or a local source directory."""


# A target's patched vendor trees by project, and what its [audit] table says to audit.
TargetTrees = Callable[[argparse.Namespace], tuple[Mapping[str, Path], AuditSpec]]


def register(sub: _context.SubParsers) -> None:
    """Mount ``audit`` with ``--target``: a target's patched vendor trees are audited."""
    add_audit_parser(sub, target_trees=_target_trees)


def _target_trees(args: argparse.Namespace) -> tuple[Mapping[str, Path], AuditSpec]:
    """The patched vendor trees of ``--target`` (default target), by project name, and the
    target's ``[audit]`` (which consumers, which provider, which baseline)."""
    workspace = _context.workspace(args)
    from patchwheel.building.run import vendor_trees
    from patchwheel.config.targets import load_target

    name = _context.target_name(args)
    trees = vendor_trees(name, workspace, _context.cache(args))
    return trees, load_target(workspace.patches, name).audit


def add_audit_parser(
    subparsers: _context.SubParsers,
    target_trees: TargetTrees | None = None,
) -> argparse.ArgumentParser:
    """Register ``audit`` on the `patchwheel` command; its handler is ``args.handler(args)``.

    `target_trees`, given by the core CLI, turns the parsed arguments (``--target``, and
    whatever global options it reads) into a target's patched vendor trees by project name;
    with it, ``--target NAME`` audits that target's consumer against its provider.
    """
    parser = subparsers.add_parser(
        "audit",
        help="static API-drift audit of a consumer's calls into a provider",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    by_pin = target_trees is None
    parser.add_argument(
        "--consumer", required=by_pin, metavar="PIN", help="e.g. speculators==0.3.0"
    )
    parser.add_argument("--provider", required=by_pin, metavar="PIN", help="e.g. vllm==0.16.0")
    if target_trees is not None:
        parser.add_argument(
            "--target",
            metavar="NAME",
            help="audit the target's patched consumer against its provider (default target "
            "when neither --consumer nor --provider is given)",
        )
    parser.add_argument(
        "--baseline",
        metavar="PIN",
        help="the provider the consumer was written for (default: the version it declares)",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the JSON report")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="engine caches (default: audit/ in patchwheel's cache)",
    )
    parser.set_defaults(handler=lambda args: audit_command(args, target_trees))
    return parser


def audit_command(args: argparse.Namespace, target_trees: TargetTrees | None = None) -> int:
    """Run the audit the parsed arguments describe; print it; return the exit status."""
    console = Console(soft_wrap=True)  # no hard wraps: paths and source lines stay whole
    progress = Console(stderr=True, soft_wrap=True)
    from patchwheel.audit.engine import MypyEngine  # the audit's imports, only when it runs
    from patchwheel.audit.run import audit_pins
    from patchwheel.audit.target import audit_target

    engine = MypyEngine(cache_dir=args.cache_dir) if args.cache_dir else MypyEngine()
    if args.consumer and args.provider:
        reports = {
            args.consumer: audit_pins(
                args.consumer, args.provider, args.baseline, engine=engine, progress=progress
            )
        }
    elif target_trees is not None and not (args.consumer or args.provider):
        trees, spec = target_trees(args)
        reports = audit_target(
            spec, trees, baseline=args.baseline, engine=engine, progress=progress
        )
    else:
        raise AuditError("give both --consumer and --provider (or neither, for a --target)")
    for report in reports.values():
        report.render(console)
    if args.json is not None:
        if len(reports) == 1:
            next(iter(reports.values())).write_json(args.json)
        else:  # one report per consumer, by name
            atomic.write_json(args.json, {n: r.to_dict() for n, r in reports.items()})
        console.print(f"JSON report: {args.json}")
    return max(report.exit_status for report in reports.values())


def main_audit(argv: Sequence[str] | None = None) -> int:
    """``patchwheel audit ARGS`` as a function (for the CLI, nox sessions and tests)."""
    parser = argparse.ArgumentParser(prog="patchwheel")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_audit_parser(subparsers)
    args = parser.parse_args(["audit", *(sys.argv[1:] if argv is None else argv)])
    try:
        status: int = args.handler(args)
    except PatchwheelError as error:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(str(error))}")
        return error.exit_status
    return status
