"""The ``patchwheel`` command: parses arguments, calls the library, prints results.

One module per verb (``build``, ``lock``, ``targets``, ``audit``, ``publish``, ``serve``,
``wheelhouse``, ``split``, ``join``, ``rebase``, ``roll``, ``export``, ``bisect``, ``verify``,
``gpu``),
each with a ``register(subparsers)`` that mounts its parser and handler. A verb imports
:mod:`patchwheel.cli._context` and the library, never another verb; nothing outside ``cli/``
imports this package. A :class:`~patchwheel.errors.PatchwheelError` becomes one red line and its
exit status, never a traceback.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.markup import escape

from patchwheel import __version__, console
from patchwheel.cli import (
    _context,
    audit,
    bisect,
    build,
    export,
    gpu,
    join,
    lock,
    publish,
    rebase,
    roll,
    serve,
    split,
    targets,
    verify,
    wheelhouse,
)
from patchwheel.errors import PatchwheelError
from patchwheel.http import redact

Handler = Callable[[argparse.Namespace], int]
# In the order `patchwheel --help` lists them.
VERBS = [build, lock, targets, audit, publish, serve, wheelhouse, split, join, rebase, roll]
VERBS += [export, bisect]
VERBS += [verify, gpu]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``patchwheel`` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        _context.check_names(args)
        return handler(args)
    except PatchwheelError as exc:
        message = redact(str(exc))
        console.stderr.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
        return exc.exit_status
    except KeyboardInterrupt:
        console.stderr.print("[red]interrupted[/]: outputs are unchanged; re-run to continue")
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="patchwheel",
        description="Fork-and-patch builds of speculators and vLLM: pinned sources, strict patch "
        "series, labelled wheels in a pip index, an API-drift audit and hidden-state "
        "verification.",
    )
    parser.add_argument("--version", action="version", version=f"patchwheel {__version__}")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="checkout root (default: .)")
    parser.add_argument("--cache", type=Path, default=None, help="cache dir ($PATCHWHEEL_CACHE)")
    sub = parser.add_subparsers(metavar="COMMAND")
    for verb in VERBS:
        verb.register(sub)
    return parser
