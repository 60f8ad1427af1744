"""Small Markdown helpers shared by the pages: table cells and tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def cell(value: Any) -> str:
    """One table cell: scalars as written, anything else as compact JSON; pipes escaped and
    line breaks folded, so that no value can break the table."""
    if value is None:
        text = "-"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, bool | int | float):
        text = json.dumps(value)
    else:
        text = json.dumps(value, sort_keys=True)
    return " ".join(text.split()).replace("|", "\\|") or "-"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("| " + " | ".join("---" for _ in header) + " |")
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def demote_title(summary: str) -> list[str]:
    """A summary's lines without its own ``# title`` (the page has its own)."""
    lines = summary.rstrip("\n").splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    while lines and not lines[0].strip():
        lines = lines[1:]
    return lines
