"""The roll's reports without the machine's paths: a checkout's folders are written relative to
it (``vendor/…``, ``build/…``, ``patches/…``) and the cache as ``$PATCHWHEEL_CACHE``, so that a
report can be committed as the roll wrote it (reports/roll/) and read on any machine."""

from __future__ import annotations

from typing import Any

from patchwheel.upstream.cache import default_root
from patchwheel.workspace import Workspace

CACHE = "$PATCHWHEEL_CACHE"


def replacements(workspace: Workspace) -> list[tuple[str, str]]:
    """(absolute prefix, what it becomes), longest first; both the path and its resolution."""
    pairs: dict[str, str] = {}
    for folder, name in (
        (workspace.vendor, "vendor"),
        (workspace.build, "build"),
        (workspace.patches, "patches"),
        (default_root(), CACHE),
    ):
        for absolute in {str(folder), str(folder.resolve())}:
            if absolute.startswith("/") and absolute != "/":
                pairs[absolute] = name
    return sorted(pairs.items(), key=lambda pair: -len(pair[0]))


def machine_free(value: Any, pairs: list[tuple[str, str]]) -> Any:
    """``value`` (JSON data or text) with every absolute prefix of ``pairs`` replaced."""
    if isinstance(value, str):
        for absolute, name in pairs:
            value = value.replace(absolute, name)
        return value
    if isinstance(value, dict):
        return {key: machine_free(item, pairs) for key, item in value.items()}
    if isinstance(value, list):
        return [machine_free(item, pairs) for item in value]
    return value
