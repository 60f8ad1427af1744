"""Absolute paths of the machine that ran, found in committed text (README, docs/, reports/).

A report records paths relative to the checkout or the wheelhouse; an absolute one (a home
folder, /tmp, /work, the checkout's own path) says where one machine kept its files and means
nothing to a reader. :func:`machine_paths` finds them; the writers record paths through
:mod:`patchwheel.portable`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

# A path that starts at the root in one of the places a machine keeps its own files: not
# preceded by a word character, a dot, a "$" or another path character (so `build/tmp/x`,
# `$HOME/x`, `file:///tmp` in a URL's path part and `https://host/work/` are not matched).
_ROOTS = ("tmp", "work", "root", "home", "Users", "var/tmp", "private/tmp")
PATTERN = re.compile(r"(?<![\w.$/~:-])/(?:" + "|".join(map(re.escape, _ROOTS)) + r")/[^\s\"'`),;]*")


def machine_paths(text: str, also: Iterable[str] = ()) -> list[str]:
    """Every absolute machine path in ``text`` (sorted, unique); ``also`` adds literal prefixes
    to look for (the checkout's own path, the home folder)."""
    found = set(PATTERN.findall(text))
    for prefix in also:
        if prefix and prefix != "/":
            found.update(re.findall(re.escape(prefix) + r"[^\s\"'`),;]*", text))
    return sorted(found)


def text_files(root: Path, folders: Sequence[str], files: Sequence[str]) -> list[Path]:
    """The committed text files to hold to the rule: ``files`` and every file under
    ``folders`` that reads as UTF-8 text (archives and other binaries are not text)."""
    out = [root / name for name in files if (root / name).is_file()]
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and _is_text(path):
                out.append(path)
    return out


def _is_text(path: Path) -> bool:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
