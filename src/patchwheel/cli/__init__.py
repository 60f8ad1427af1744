"""The ``patchwheel`` command: parses arguments, calls the library, prints results."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from patchwheel import __version__, console
from patchwheel.building import run
from patchwheel.config.lock import lock_target
from patchwheel.config.targets import default_target_name, list_target_names, load_target
from patchwheel.errors import PatchwheelError
from patchwheel.upstream.cache import Cache

Handler = Callable[[argparse.Namespace], int]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``patchwheel`` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except PatchwheelError as exc:
        console.stderr.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return exc.exit_status
    except KeyboardInterrupt:
        console.stderr.print("[red]interrupted[/]: outputs are unchanged; re-run to continue")
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="patchwheel",
        description="Fork-and-patch builds of speculators and vLLM: pinned sources, strict patch "
        "series, labelled wheels in a pip index, an API-drift audit and hidden-state "
        "verification.",
    )
    parser.add_argument("--version", action="version", version=f"patchwheel {__version__}")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="checkout root (default: .)")
    parser.add_argument("--cache", type=Path, default=None, help="cache dir ($PATCHWHEEL_CACHE)")
    sub = parser.add_subparsers(metavar="COMMAND")

    build = sub.add_parser("build", help="build a target's wheels into build/ (default target)")
    build.add_argument("--target", help="target name (default: the default target)")
    build.add_argument("--all", action="store_true", help="build every target")
    build.add_argument(
        "--allow-audit-findings",
        action="store_true",
        help="build even if the API audit finds drift (the manifest records it)",
    )
    build.add_argument("--no-audit", action="store_true", help="skip the API audit")
    build.set_defaults(handler=_cmd_build)

    lock = sub.add_parser("lock", help="resolve new or changed pins into target.lock")
    lock.add_argument("--target", help="target name (default: the default target)")
    lock.add_argument("--all", action="store_true", help="lock every target")
    lock.add_argument(
        "--update",
        action="append",
        default=[],
        metavar="KEY",
        help="re-resolve this pin on purpose (project or project:variant); repeatable",
    )
    lock.set_defaults(handler=_cmd_lock)

    targets = sub.add_parser("targets", help="list targets")
    targets.add_argument("--json", action="store_true", help="print JSON")
    targets.set_defaults(handler=_cmd_targets)

    for register in _extensions():
        register(sub)
    return parser


def _extensions() -> list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]]:
    """Sub-commands owned by higher layers (audit, verify, rebase, publish …)."""
    from patchwheel.cli import commands

    return commands.REGISTRARS


def paths_of(args: argparse.Namespace) -> run.Paths:
    """The checkout layout the command works on."""
    return run.Paths.at(Path(args.root).resolve())


def cache_of(args: argparse.Namespace) -> Cache:
    """The cache the command uses."""
    return Cache(Path(args.cache).resolve() if args.cache else None)


def target_names(args: argparse.Namespace) -> list[str]:
    """The targets a command applies to (``--target``, ``--all`` or the default)."""
    patches = paths_of(args).patches
    if getattr(args, "all", False):
        return list_target_names(patches)
    return [args.target or default_target_name(patches)]


def _cmd_build(args: argparse.Namespace) -> int:
    paths = paths_of(args)
    cache = cache_of(args)
    from patchwheel.cli import commands

    hook = None if args.no_audit else commands.build_audit_hook(args.allow_audit_findings, cache)
    for name in target_names(args):
        report = run.build_target(name, paths, cache, audit=hook)
        _print_build(report, paths)
    return 0


def _print_build(report: run.BuildReport, paths: run.Paths) -> None:
    table = Table(title=f"target {report.target}", title_justify="left")
    for column in ("project", "variant", "version", "patches", "wheel", "action"):
        table.add_column(column, overflow="fold")
    wheels = report.manifest.get("wheels", [])
    patch_counts = {
        name: len(data.get("patches", []))
        for name, data in report.manifest.get("projects", {}).items()
    }
    for wheel in wheels:
        table.add_row(
            wheel["project"],
            wheel["variant"] or "-",
            wheel["version"],
            str(patch_counts.get(wheel["project"], 0)),
            wheel["filename"],
            "up to date" if report.up_to_date else wheel.get("action", ""),
        )
    console.stderr.print(table)
    where = paths.build / report.target
    console.stderr.print(
        f"wheels: {where / 'wheels'}\nmanifest: {where / 'manifest.json'}\n"
        f"index: {paths.build / 'simple'} (this target only: {where / 'simple'})\n"
        f"took {report.seconds:.1f} s"
    )


def _cmd_lock(args: argparse.Namespace) -> int:
    paths = paths_of(args)
    cache = cache_of(args)
    for name in target_names(args):
        target = load_target(paths.patches, name)
        locked = lock_target(target, cache, update=args.update)
        for key, entry in locked.items():
            console.status(f"{name}: {key} = {entry.pin} → {entry.identity}")
        console.status(f"[green]wrote[/] {target.lock_path}")
    return 0


def _cmd_targets(args: argparse.Namespace) -> int:
    patches = paths_of(args).patches
    names = list_target_names(patches)
    try:
        default = default_target_name(patches)
    except PatchwheelError:
        default = ""
    rows = []
    for name in names:
        target = load_target(patches, name)
        rows.append(
            {
                "name": name,
                "default": name == default,
                "description": target.description,
                "pins": {s.key: s.pin.text for s in target.pin_specs},
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        mark = " (default)" if row["default"] else ""
        print(f"{row['name']}{mark}: {row['description']}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
