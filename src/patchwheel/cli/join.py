"""``patchwheel join``: split files joined again, every part and whole checked by sha256."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from patchwheel import console
from patchwheel.cli import _context
from patchwheel.errors import InvalidNameError, PatchwheelError
from patchwheel.wheelhouse import join


def register(sub: _context.SubParsers) -> None:
    """Mount ``join``."""
    parser = sub.add_parser("join", help="join split files again and check every sha256")
    parser.add_argument("directory", type=Path, help="folder holding parts.json and SHA256SUMS")
    parser.add_argument("--keep-parts", action="store_true", help="keep the parts after joining")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Join the parts in the folder; check every sha256 (SHA256SUMS is required); remove the
    parts only once everything matches."""
    directory = Path(args.directory).absolute()
    try:
        joined = join.join_dir(
            directory, keep_parts=args.keep_parts, log=lambda m: console.status(escape(m))
        )
    except join.UnsafeNameError as exc:
        raise InvalidNameError(str(exc)) from exc
    except join.PartsError as exc:
        raise PatchwheelError(str(exc)) from exc
    console.status(escape(f"{len(joined)} file(s) joined in {directory}; every sha256 matches"))
    return 0
