"""Atomic file writes: a temp file beside the destination, then a rename.

Readers see the old content or the new, never part of it, and a killed run leaves at most a
stray ``.<name>.*`` temp file. JSON keeps its keys in the order given (the order is meaningful).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

MODE = 0o644


def write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (mode 0644, like any file patchwheel shares)."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        tmp.chmod(MODE)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, data: object, *, indent: int = 2) -> None:
    """Replace ``path`` with ``data`` as indented JSON and a final newline, atomically."""
    write_text(path, json.dumps(data, indent=indent) + "\n")
