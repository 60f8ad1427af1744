"""``patchwheel join``: split files joined again, every part and whole checked by sha256."""

from __future__ import annotations

import argparse
from pathlib import Path

from patchwheel import console
from patchwheel.cli import _context
from patchwheel.errors import PatchwheelError
from patchwheel.wheelhouse import join


def register(sub: _context.SubParsers) -> None:
    """Mount ``join``."""
    parser = sub.add_parser("join", help="join split files again and check every sha256")
    parser.add_argument("directory", type=Path, help="folder holding parts.json")
    parser.add_argument("--keep-parts", action="store_true", help="keep the parts after joining")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Join the parts in the folder; check every sha256."""
    directory = Path(args.directory).resolve()
    try:
        joined = join.join_dir(directory, keep_parts=args.keep_parts, log=console.status)
        problems = join.check_sums(directory) if (directory / join.SUMS).is_file() else []
    except join.PartsError as exc:
        raise PatchwheelError(str(exc)) from exc
    if problems:
        raise PatchwheelError("; ".join(problems))
    console.status(f"{len(joined)} file(s) joined in {directory}; every sha256 matches")
    return 0
