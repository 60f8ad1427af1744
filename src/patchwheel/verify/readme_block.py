"""README's generated blocks: the text between a start and an end marker, replaced whole.

Each report that README shows (the CPU verification, the served one, the GPU sessions) owns one
block; its module writes the block's text and calls :func:`replace` here.
"""

from __future__ import annotations

from pathlib import Path

from patchwheel import atomic
from patchwheel.errors import VerifyError


def replace(readme: Path, start: str, end: str, body: str) -> None:
    """Write ``body`` between ``start`` and ``end`` in ``readme`` (atomically); refuse a
    README without the pair, naming the markers."""
    text = readme.read_text(encoding="utf-8")
    head, found_start, rest = text.partition(start)
    _, found_end, tail = rest.partition(end)
    if not (found_start and found_end):
        raise VerifyError(f"{readme} has no {start} … {end} block to rewrite")
    atomic.write_text(readme, f"{head}{start}\n{body}\n{end}{tail}")
