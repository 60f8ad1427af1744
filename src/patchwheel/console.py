"""The console: status lines and progress on stderr (stdout stays machine-readable).

Rich bars on a terminal, one line per step elsewhere (CI logs).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

stderr = Console(
    stderr=True,
    highlight=False,
    soft_wrap=True,
    width=None if sys.stderr.isatty() else 200,
)


class Advance(Protocol):
    """A callback that reports ``n`` more units (bytes) done."""

    def __call__(self, n: int) -> None: ...


def status(message: str) -> None:
    """Print one status line (to stderr, so stdout stays machine-readable)."""
    stderr.print(message)


def human_bytes(n: float) -> str:
    """Format a byte count the way users read it (``326.5 MB``)."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover - loop always returns


@contextmanager
def transfer(description: str, total: int | None) -> Iterator[Advance]:
    """Show a byte-progress bar (terminal) or a start/end line (logs) around a transfer."""
    start = time.monotonic()
    if stderr.is_terminal:
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=stderr, transient=True) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n: bar.advance(task, n)
    else:
        size = f" ({human_bytes(total)})" if total else ""
        stderr.print(f"{description}{size} …")
        yield _ignore
    seconds = time.monotonic() - start
    size = f"{human_bytes(total)} " if total else ""
    stderr.print(f"{description}: {size}done in {seconds:.1f} s")


def _ignore(n: int) -> None:
    del n


def is_interactive() -> bool:
    """Whether stderr is a terminal (progress bars) rather than a log."""
    return sys.stderr.isatty()
