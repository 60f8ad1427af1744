"""``patchwheel split``: large files into size-limited parts (for size-limited transfers)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from patchwheel import console
from patchwheel.cli import _context
from patchwheel.errors import ConfigError, InvalidNameError
from patchwheel.wheelhouse.join import PartsError, UnsafeNameError, split_dir


def register(sub: _context.SubParsers) -> None:
    """Mount ``split``."""
    split = sub.add_parser(
        "split", help="split large files into parts (for size-limited transfers)"
    )
    split.add_argument("directory", type=Path, help="folder whose large files to split")
    split.add_argument(
        "--size", default="60MiB", help="largest part, e.g. 60MiB (default), 64MB, 1GiB"
    )
    split.add_argument("files", nargs="*", help="only these file names (default: every file)")
    split.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Split the folder's large files; say how to join them."""
    directory = Path(args.directory).resolve()
    if not directory.is_dir():
        raise ConfigError(f"{directory} is not a folder")
    size = _context.size(args.size)
    try:
        names = split_dir(directory, size, names=list(args.files) or None)
    except UnsafeNameError as exc:
        raise InvalidNameError(str(exc)) from exc
    except PartsError as exc:
        raise ConfigError(str(exc)) from exc
    missing = sorted(set(args.files) - set(names) - {p.name for p in directory.iterdir()})
    if missing:
        raise ConfigError(f"{directory}: no file(s) {', '.join(missing)}")
    for name in names:
        console.status(escape(f"split {name}"))
    console.status(
        f"{len(names)} file(s) split into parts of at most {size} bytes in {directory}; "
        "join there with `python3 join.py` (or `patchwheel join DIR`)"
    )
    return 0
