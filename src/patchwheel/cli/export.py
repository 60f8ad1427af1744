"""``patchwheel export``: the commits of a vendor tree become the project's patch series."""

from __future__ import annotations

import argparse

from rich.markup import escape

from patchwheel import console
from patchwheel.cli import _context
from patchwheel.patching.export import export_project

EXPORT_HELP = """\
Turn the commits of a vendor tree (vendor/<target>/<project>, branch `patched`) into the
project's series: new commits become new patch files (git format-patch), edited ones replace
their patch, removed ones leave the series. The result is checked by applying it strictly."""


def register(sub: _context.SubParsers) -> None:
    """Mount ``export``."""
    export = sub.add_parser(
        "export",
        help="turn vendor-tree commits into the series' patch files",
        description=EXPORT_HELP,
    )
    export.add_argument("--target", help=_context.TARGET_HELP)
    export.add_argument("--project", required=True, help="the project (vendor tree) to export")
    export.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Export the vendor tree's commits; print what was written and removed."""
    workspace = _context.workspace(args)
    result = export_project(workspace, _context.target_name(args), args.project)
    for warning in result.warnings:
        console.status(f"[yellow]warning:[/] {escape(warning)}")
    if not result.changed:
        return 0
    for name in result.written:
        console.status(f"wrote {result.series_dir / name}")
    for name in result.removed:
        console.status(f"removed {result.series_dir / name}")
    console.status(f"series {result.series_dir / 'series'}: {len(result.names)} patch(es)")
    return 0
