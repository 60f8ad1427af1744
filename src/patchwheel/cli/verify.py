"""``patchwheel verify``: CPU hidden-state extraction with a target's built wheels."""

from __future__ import annotations

import argparse

from patchwheel import console
from patchwheel.cli import _context


def register(sub: _context.SubParsers) -> None:
    """Mount ``verify``."""
    parser = sub.add_parser(
        "verify",
        help="run speculators' extraction with the built wheels on CPU, check it against "
        "transformers (build the target first)",
    )
    parser.add_argument("--target", help=_context.TARGET_HELP)
    parser.add_argument(
        "--reuse-venv",
        action="store_true",
        help="keep the verify venv of an earlier run (the built wheels are reinstalled and "
        "re-hashed every time)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="extraction timeout (s)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Verify the target's built wheels on CPU (raises VerifyError on any mismatch)."""
    from patchwheel.verify.cpu import verify_cpu  # imported when the verb runs

    workspace = _context.workspace(args)
    name = _context.target_name(args)
    target_dir = workspace.target_dir(name)
    verify_cpu(
        target_dir,
        index_dir=target_dir / "simple",
        work_dir=workspace.work_dir(name, "verify-cpu"),
        reuse_venv=args.reuse_venv,
        timeout_s=args.timeout,
        console=console.stderr,
    )
    return 0
