"""``patchwheel wheelhouse``: one offline folder of a target's wheels and their dependencies."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from patchwheel import console, gpuarch
from patchwheel.cli import _context
from patchwheel.errors import ConfigError
from patchwheel.kernels import render
from patchwheel.wheelhouse.destination import DEFAULT_PLATFORM, DEFAULT_PYTHON, Destination
from patchwheel.wheelhouse.plan import Options
from patchwheel.wheelhouse.run import Report, make_wheelhouse, summary_rows


def register(sub: _context.SubParsers) -> None:
    """Mount ``wheelhouse``."""
    parser = sub.add_parser(
        "wheelhouse",
        help="one folder with a target's wheels and their dependencies, for offline installs",
        description="Resolve a built target's wheels and their dependency closure for another "
        "machine (binary only, as of a date, minus what it already has) and write them, a lock "
        "and the offline install commands into one folder.",
    )
    parser.add_argument("--target", help=_context.TARGET_HELP)
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
    parser.add_argument(
        "--gpu-arch",
        action="append",
        type=_gpu_arch,
        metavar="ARCH",
        help="a GPU of the destination (sm_90: H100/H200; sm_100: B200; sm_120: RTX PRO 6000 "
        "Blackwell); every CUDA module carried must run on it; repeatable (default: the "
        "target's gpu-archs; 'none': no check)",
    )
    parser.add_argument("--json", action="store_true", help="print the lock as JSON on stdout")
    parser.set_defaults(handler=run)


class _UsageError(ConfigError):
    """A combination of options that means nothing (exit status 2, like argparse's)."""

    exit_status = 2


def _gpu_arch(text: str) -> str:
    if text == "none":
        return text
    try:
        return gpuarch.device(text).name
    except gpuarch.ArchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _gpu_archs(values: list[str] | None) -> tuple[str, ...] | None:
    """``--gpu-arch`` as given: None (left out: the target's), () for 'none', else the GPUs."""
    if not values:
        return None
    if "none" in values:
        if len(values) > 1:
            raise _UsageError("--gpu-arch none: give it alone (it means: no GPU check)")
        return ()
    return tuple(dict.fromkeys(values))


def run(args: argparse.Namespace) -> int:
    """Make the wheelhouse; print what it carries and why (and the lock with ``--json``)."""
    variants = {}
    for text in args.variant:
        project, sep, variant = text.partition("=")
        variants[project if sep else "*"] = variant if sep else project
    options = Options(
        target=_context.target_name(args),
        destination=Destination(args.python_version, args.platform),
        variants=variants,
        exclude_newer=args.exclude_newer,
        installed=args.installed.resolve() if args.installed else None,
        upgrade=tuple(args.upgrade),
        accept_installed=tuple(args.accept_installed),
        with_requirements=tuple(args.with_requirements),
        drop=tuple(args.drop),
        out=args.out.resolve() if args.out else None,
        split=_context.size(args.split) if args.split else None,
        dry_run=args.dry_run,
        gpu_archs=_gpu_archs(args.gpu_arch),
    )
    report = make_wheelhouse(_context.workspace(args), _context.cache(args), options)
    _print(report)
    if args.json:
        print(json.dumps(report.lock, indent=2))
    return 0


def _print(report: Report) -> None:
    lock = report.lock
    table = Table(title=f"wheelhouse of {lock['target']}", title_justify="left")
    for column in ("package", "version", "size", "why"):
        table.add_column(column, overflow="fold")
    for row in summary_rows(report):
        table.add_row(*(escape(cell) for cell in row))
    console.stderr.print(table)
    if report.kernels:
        title = (
            f"CUDA kernels of the wheelhouse: every carried module on the destination's GPUs "
            f"({', '.join(report.gpu_archs)})"
        )
        console.stderr.print(render(report.kernels, report.gpu_archs, title))
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
