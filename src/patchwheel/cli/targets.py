"""``patchwheel targets``: the targets under patches/, which one is the default, their
generation, pins, pinned extras and what their audit checks."""

from __future__ import annotations

import argparse
import json
from typing import Any

from patchwheel import manifest
from patchwheel.cli import _context
from patchwheel.config.targets import default_target_name, list_target_names, load_target
from patchwheel.errors import PatchwheelError
from patchwheel.workspace import Workspace


def register(sub: _context.SubParsers) -> None:
    """Mount ``targets``."""
    parser = sub.add_parser("targets", help="list targets")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print one line per target (or JSON with ``--json``)."""
    workspace = _context.workspace(args)
    patches = workspace.patches
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
                "generation": target.generation,
                "audit": {
                    "provider": target.audit.provider,
                    "consumers": list(target.audit.consumers),
                    "baseline": target.audit.baseline,
                },
                "pins": {s.key: s.pin.text for s in target.pin_specs},
                "extras": {
                    p.name: {e.name: [str(r) for r in e.requires] for e in p.extras}
                    for p in target.projects
                    if p.extras
                },
                "gpu": target.gpu.to_json(),
                "kernels": _built_kernels(workspace, name),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        mark = " (default)" if row["default"] else ""
        print(f"{row['name']}{mark}: {row['description']}")
    return 0


def _built_kernels(workspace: Workspace, name: str) -> list[dict[str, Any]] | None:
    """The architecture table build/<name>/manifest.json records (None: not built, or built
    before patchwheel read kernels, or unreadable)."""
    path = manifest.path_in(workspace.target_dir(name))
    try:
        built = manifest.read(path)
    except (OSError, manifest.ManifestError):
        return None
    if built.gpu is None:
        return None
    modules = built.gpu.get("modules")
    return modules if isinstance(modules, list) else None
