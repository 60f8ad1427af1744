"""``patchwheel verify``: CPU hidden-state extraction with a target's built wheels."""

from __future__ import annotations

import argparse
from pathlib import Path

from patchwheel.verify.cpu import verify_cpu


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Mount ``verify`` on the ``patchwheel`` command."""
    parser = subparsers.add_parser(
        "verify",
        help="run speculators' extraction with the built wheels on CPU, check it against "
        "transformers (build the target first)",
    )
    parser.add_argument("--target", help="target name (default: the default target)")
    parser.add_argument(
        "--reuse-venv",
        action="store_true",
        help="keep the verify venv of an earlier run (the built wheels are reinstalled and "
        "re-hashed every time)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="extraction timeout (s)")
    parser.set_defaults(handler=_verify)

    gpu = subparsers.add_parser(
        "gpu", help="extraction on a CUDA GPU with the built wheels, checked and timed"
    )
    from patchwheel.verify.gpu.session import add_arguments

    add_arguments(gpu)
    gpu.set_defaults(handler=_gpu)


def _verify(args: argparse.Namespace) -> int:
    from patchwheel import cli, console

    paths = cli.paths_of(args)
    name = cli.target_names(args)[0]
    target_dir = paths.build / name
    verify_cpu(
        target_dir,
        index_dir=target_dir / "simple",
        work_dir=paths.build / ".work" / name / "verify-cpu",
        reuse_venv=args.reuse_venv,
        timeout_s=args.timeout,
        console=console.stderr,
    )
    return 0


def _gpu(args: argparse.Namespace) -> int:
    from patchwheel import console
    from patchwheel.verify.gpu import session as gpu

    return gpu.run(gpu.options_from(args, Path(args.root).resolve()), console.stderr)
