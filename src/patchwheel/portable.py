"""Reports name no absolute path of the machine that wrote them.

A report travels (committed under reports/, read on another machine); where one machine kept
its checkout, wheelhouse or cache means nothing there. :func:`portable` rewrites every string
in a report: a path under the checkout becomes relative to it, one under another known folder
starts with that folder's name (``$WHEELHOUSE``, ``$WORK_DIR``, ``$PATCHWHEEL_CACHE``), one
under the home folder with ``~``. Standard library only: the GPU session uses it too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Roots = list[tuple[str, str]]


def roots(checkout: Path | None, named: Iterable[tuple[Path | None, str]] = ()) -> Roots:
    """The prefixes to rewrite, longest first: ``checkout`` to relative, each named folder to its
    name, the cache to ``$PATCHWHEEL_CACHE`` and the home folder to ``~`` (each also in its
    resolved spelling)."""
    cache = os.environ.get("PATCHWHEEL_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "patchwheel"
    )
    pairs: list[tuple[Path | None, str]] = [(checkout, "")]
    pairs += list(named)
    pairs += [(Path(cache), "$PATCHWHEEL_CACHE"), (Path.home(), "~")]
    out: dict[str, str] = {}
    for path, name in pairs:
        if path is None:
            continue
        for spelling in {str(Path(path).absolute()), str(Path(path).resolve())}:
            if spelling != "/" and spelling not in out:
                out[spelling] = name
    return sorted(out.items(), key=lambda pair: -len(pair[0]))


def _text(text: str, table: Roots) -> str:
    for prefix, name in table:
        if prefix not in text:
            continue
        # under the folder: relative (name "") or below its name; the folder itself: its name;
        # a longer name that merely starts the same (/tmp/wh vs /tmp/wheels) is left alone
        text = re.sub(re.escape(prefix) + "/", f"{name}/" if name else "", text)
        text = re.sub(re.escape(prefix) + r"(?![\w.+-])", name or ".", text)
    return text


def portable(value: Any, table: Roots) -> Any:
    """``value`` (JSON-shaped: dicts, lists, strings, scalars) with every path in ``table``
    rewritten in every string, keys included."""
    if isinstance(value, str):
        return _text(value, table)
    if isinstance(value, dict):
        return {portable(k, table): portable(v, table) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [portable(v, table) for v in value]
    return value
