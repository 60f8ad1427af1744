"""The architecture table a person reads: per CUDA module, its SASS and PTX and each GPU."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from patchwheel.kernels.check import Row

__all__ = ["render"]

_STYLE = {"sass": "green", "ptx": "yellow", "not for it": "dim", "MISSING": "bold red"}


def render(table: Sequence[Row], archs: Sequence[str], title: str) -> Table:
    """A rich table: wheel (when several), module, SASS, PTX, then one column per GPU."""
    several = len({r.wheel for r in table}) > 1
    out = Table(title=title, title_justify="left")
    if several:
        out.add_column("wheel", overflow="fold")
    for column in ("module", "SASS", "PTX"):
        out.add_column(column, overflow="fold")
    for arch in archs:
        out.add_column(arch)
    for row in table:
        cells = [
            escape(row.module.path),
            " ".join(a.removeprefix("sm_") for a in row.module.sass) or "-",
            " ".join(a.removeprefix("sm_") for a in row.module.ptx) or "-",
        ]
        for arch in archs:
            cell = row.cells[arch]
            cells.append(f"[{_STYLE[cell]}]{cell}[/]")
        out.add_row(*([escape(row.wheel)] if several else []), *cells)
    return out
