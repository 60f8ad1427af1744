"""``patchwheel lock``: resolve new or changed pins into ``patches/<target>/target.lock``."""

from __future__ import annotations

import argparse

from patchwheel import console
from patchwheel.cli import _context
from patchwheel.config.targets import load_target
from patchwheel.upstream.resolve import lock_target


def register(sub: _context.SubParsers) -> None:
    """Mount ``lock``."""
    parser = sub.add_parser("lock", help="resolve new or changed pins into target.lock")
    parser.add_argument("--target", help=_context.TARGET_HELP)
    parser.add_argument("--all", action="store_true", help="lock every target")
    parser.add_argument(
        "--update",
        action="append",
        default=[],
        metavar="KEY",
        help="re-resolve this pin on purpose (project or project:variant); repeatable",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Lock each target the arguments name; print every pin and what it resolved to."""
    workspace = _context.workspace(args)
    cache = _context.cache(args)
    for name in _context.target_names(args):
        target = load_target(workspace.patches, name)
        locked = lock_target(target, cache, update=args.update)
        for key, entry in locked.items():
            console.status(f"{name}: {key} = {entry.pin} → {entry.identity}")
        console.status(f"[green]wrote[/] {target.lock_path}")
    return 0
