"""``patchwheel gpu``: extraction on a CUDA GPU with the built wheels, checked and timed.

The same session as ``python -m patchwheel.verify.gpu`` (what ``nox -s gpu`` runs with the GPU
machine's own python); its options live with it in :mod:`patchwheel.verify.gpu.options`.
"""

from __future__ import annotations

import argparse

from patchwheel import console
from patchwheel.cli import _context
from patchwheel.verify import add_gpu_arguments, gpu_options_from, run_gpu


def register(sub: _context.SubParsers) -> None:
    """Mount ``gpu``."""
    parser = sub.add_parser(
        "gpu", help="extraction on a CUDA GPU with the built wheels, checked and timed"
    )
    add_gpu_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the GPU session; its own exit status (it prints its errors itself)."""
    chosen = gpu_options_from(args, _context.workspace(args))
    return run_gpu(chosen, console.stderr)
