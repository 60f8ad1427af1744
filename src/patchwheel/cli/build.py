"""``patchwheel build``: a target's wheels, manifest and index into build/ (default target)."""

from __future__ import annotations

import argparse

from rich.table import Table

from patchwheel import console
from patchwheel.building.run import BuildReport, build_target
from patchwheel.cli import _context
from patchwheel.kernels import render
from patchwheel.workspace import Workspace


def register(sub: _context.SubParsers) -> None:
    """Mount ``build``."""
    parser = sub.add_parser("build", help="build a target's wheels into build/ (default target)")
    parser.add_argument("--target", help=_context.TARGET_HELP)
    parser.add_argument("--all", action="store_true", help="build every target")
    parser.add_argument(
        "--allow-audit-findings",
        action="store_true",
        help="build even if the API audit finds drift (the manifest records it)",
    )
    parser.add_argument("--no-audit", action="store_true", help="skip the API audit")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Build each target the arguments name; print what each build did."""
    workspace = _context.workspace(args)
    cache = _context.cache(args)
    hook = None
    if not args.no_audit:
        from patchwheel.audit.target import build_hook  # the audit's imports, only when it runs

        hook = build_hook(args.allow_audit_findings, cache=cache)
    for name in _context.target_names(args):
        report = build_target(name, workspace, cache, audit=hook)
        _print(report, workspace)
    return 0


def _print(report: BuildReport, workspace: Workspace) -> None:
    table = Table(title=f"target {report.target}", title_justify="left")
    for column in ("project", "variant", "version", "patches", "wheel", "action"):
        table.add_column(column, overflow="fold")
    patch_counts = {name: len(p.patches) for name, p in report.manifest.projects.items()}
    for wheel in report.manifest.wheels:
        table.add_row(
            wheel.project,
            wheel.variant or "-",
            wheel.version,
            str(patch_counts.get(wheel.project, 0)),
            wheel.filename,
            "up to date" if report.up_to_date else wheel.action,
        )
    console.stderr.print(table)
    if report.kernels:
        gpu = report.manifest.gpu or {}
        archs = [str(a) for a in gpu.get("archs", [])]
        title = (
            f"CUDA kernels of {report.target}: SASS and PTX per module, and how each runs on the "
            f"GPUs the target names ({', '.join(archs)})"
        )
        console.stderr.print(render(report.kernels, archs, title))
    where = workspace.target_dir(report.target)
    console.stderr.print(
        f"wheels: {where / 'wheels'}\nmanifest: {where / 'manifest.json'}\n"
        f"index: {workspace.index_dir} (this target only: {where / 'simple'})\n"
        f"took {report.seconds:.1f} s"
    )
