"""The ``wheelhouse``, ``split`` and ``join`` sub-commands: parse, call the library, print."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from patchwheel import console
from patchwheel.errors import ConfigError, PatchwheelError
from patchwheel.wheelhouse import join
from patchwheel.wheelhouse.destination import DEFAULT_PLATFORM, DEFAULT_PYTHON

if TYPE_CHECKING:
    SubParsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def register(sub: SubParsers) -> None:
    """Add ``wheelhouse``, ``split`` and ``join`` to the ``patchwheel`` command."""
    _register_wheelhouse(sub)
    split = sub.add_parser(
        "split", help="split large files into parts (for size-limited transfers)"
    )
    split.add_argument("directory", type=Path, help="folder whose large files to split")
    split.add_argument(
        "--size", default="60MiB", help="largest part, e.g. 60MiB (default), 64MB, 1GiB"
    )
    split.add_argument("files", nargs="*", help="only these file names (default: every file)")
    split.set_defaults(handler=_cmd_split)
    join = sub.add_parser("join", help="join split files again and check every sha256")
    join.add_argument("directory", type=Path, help="folder holding parts.json")
    join.add_argument("--keep-parts", action="store_true", help="keep the parts after joining")
    join.set_defaults(handler=_cmd_join)


def _register_wheelhouse(sub: SubParsers) -> None:
    parser = sub.add_parser(
        "wheelhouse",
        help="one folder with a target's wheels and their dependencies, for offline installs",
        description="Resolve a built target's wheels and their dependency closure for another "
        "machine (binary only, as of a date, minus what it already has) and write them, a lock "
        "and the offline install commands into one folder.",
    )
    parser.add_argument("--target", help="target name (default: the default target)")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="PROJECT=VARIANT",
        help="which variant of an overlay project to carry (default: cuda); VARIANT alone: "
        "for every project that has it; repeatable",
    )
    parser.add_argument(
        "--python-version",
        default=DEFAULT_PYTHON,
        help=f"the destination's CPython (default {DEFAULT_PYTHON})",
    )
    parser.add_argument(
        "--platform",
        default=DEFAULT_PLATFORM,
        help=f"the destination's wheel platform tag (default {DEFAULT_PLATFORM})",
    )
    parser.add_argument(
        "--exclude-newer",
        default="auto",
        metavar="DATE",
        help="resolve as of this date or RFC 3339 time; 'none' for now "
        "(default: upload time of the newest pinned file)",
    )
    parser.add_argument(
        "--installed",
        type=Path,
        metavar="FILE",
        help="`pip list --format=freeze` of the destination: those packages are not carried",
    )
    parser.add_argument(
        "--upgrade",
        action="append",
        default=[],
        metavar="NAME",
        help="carry NAME although the destination has it (its version does not fit)",
    )
    parser.add_argument(
        "--accept-installed",
        action="append",
        default=[],
        metavar="NAME",
        help="keep the destination's NAME although a requirement excludes its version",
    )
    parser.add_argument(
        "--with",
        dest="with_requirements",
        action="append",
        default=[],
        metavar="REQ",
        help="also carry this requirement (PEP 508); repeatable",
    )
    parser.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="NAME",
        help="leave out a requirement the target never imports (and what only it needs)",
    )
    parser.add_argument(
        "--out", type=Path, help="folder to write (default build/<target>/wheelhouse)"
    )
    parser.add_argument(
        "--split",
        metavar="SIZE",
        help="split files larger than SIZE (e.g. 60MiB) into parts; join.py joins them",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="resolve and report; download and write nothing"
    )
    parser.add_argument("--json", action="store_true", help="print the lock as JSON on stdout")
    parser.set_defaults(handler=_cmd_wheelhouse)


def _cmd_wheelhouse(args: argparse.Namespace) -> int:
    from patchwheel.cli import cache_of, paths_of, target_names
    from patchwheel.wheelhouse import run
    from patchwheel.wheelhouse.destination import Destination

    variants = {}
    for text in args.variant:
        project, sep, variant = text.partition("=")
        variants[project if sep else "*"] = variant if sep else project
    options = run.Options(
        target=target_names(args)[0],
        destination=Destination(args.python_version, args.platform),
        variants=variants,
        exclude_newer=args.exclude_newer,
        installed=args.installed.resolve() if args.installed else None,
        upgrade=tuple(args.upgrade),
        accept_installed=tuple(args.accept_installed),
        with_requirements=tuple(args.with_requirements),
        drop=tuple(args.drop),
        out=args.out.resolve() if args.out else None,
        split=_size(args.split) if args.split else None,
        dry_run=args.dry_run,
    )
    report = run.make_wheelhouse(paths_of(args), cache_of(args), options)
    _print_wheelhouse(report)
    if args.json:
        print(json.dumps(report.lock, indent=2))
    return 0


def _size(text: str) -> int:
    try:
        return join.parse_size(text)
    except ValueError as exc:
        raise ConfigError(f"--split: {exc}") from exc


def _print_wheelhouse(report: object) -> None:
    from rich.markup import escape
    from rich.table import Table

    from patchwheel.wheelhouse.run import Report, summary_rows

    assert isinstance(report, Report)
    lock = report.lock
    table = Table(title=f"wheelhouse of {lock['target']}", title_justify="left")
    for column in ("package", "version", "size", "why"):
        table.add_column(column, overflow="fold")
    for row in summary_rows(report):
        table.add_row(*(escape(cell) for cell in row))
    console.stderr.print(table)
    installed = lock["installed"]
    relied = ", ".join(r["name"] for r in installed["relied-on"])
    lines = [
        f"{len(lock['wheels'])} wheels, {console.human_bytes(lock['total-size'])}, for CPython "
        f"{lock['destination']['python-version']} on {lock['destination']['platform']}, as of "
        f"{lock['exclude-newer'] or 'now'} ({lock['exclude-newer-from']})",
    ]
    if installed["file"]:
        lines.append(
            f"already on the destination and needed ({len(installed['relied-on'])}): {relied}"
        )
    lines += [
        f"accepted mismatch: {m['required_by']} requires {m['requirement']}, "
        f"destination keeps {m['installed']}"
        for m in installed["accepted-mismatches"]
    ]
    lines += [f"dropped: {d['name']} ({d['why']})" for d in lock["dropped"]]
    if report.dry_run:
        lines.append(f"dry run: nothing downloaded or written; took {report.seconds:.1f} s")
    else:
        split = lock.get("split")
        lines += [
            f"wrote {report.path} (lock {report.path / 'wheelhouse.lock.json'}, "
            f"INSTALL.txt{', ' + str(len(split['files'])) + ' split file(s)' if split else ''})",
            f"offline install, inside the folder: {lock['install']['environment']}",
            f"took {report.seconds:.1f} s",
        ]
    console.stderr.print(escape("\n".join(lines)))


def _cmd_split(args: argparse.Namespace) -> int:
    directory = Path(args.directory).resolve()
    if not directory.is_dir():
        raise ConfigError(f"{directory} is not a folder")
    size = _size(args.size)
    names = join.split_dir(directory, size, names=list(args.files) or None)
    missing = sorted(set(args.files) - set(names) - {p.name for p in directory.iterdir()})
    if missing:
        raise ConfigError(f"{directory}: no file(s) {', '.join(missing)}")
    for name in names:
        console.status(f"split {name}")
    console.status(
        f"{len(names)} file(s) split into parts of at most {size} bytes in {directory}; "
        "join there with `python3 join.py` (or `patchwheel join DIR`)"
    )
    return 0


def _cmd_join(args: argparse.Namespace) -> int:
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
