"""The workspace: where a run reads and writes — ``patches/``, ``vendor/`` and ``build/``.

One checkout is one workspace: ``patches/<target>`` holds a target's inputs,
``vendor/<target>/<project>`` its vendor trees, ``build/<target>`` its outputs (a link into
``build/.store``), ``build/simple`` the index of every target, ``build/.work`` scratch space and
``build/.locks`` the locks that make two runs on one target wait for each other.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from patchwheel import console

INDEX_NAME = "simple"
LOCKS = ".locks"
WORK = ".work"


@dataclass(frozen=True)
class Workspace:
    """The three directories of a checkout (each may lie elsewhere, e.g. in tests)."""

    patches: Path
    vendor: Path
    build: Path

    @classmethod
    def at(cls, root: Path) -> Workspace:
        """The standard layout under a checkout root."""
        return cls(root / "patches", root / "vendor", root / "build")

    def target_dir(self, target: str) -> Path:
        """``build/<target>``: the target's outputs (manifest, wheels, index, reports)."""
        return self.build / target

    @property
    def index_dir(self) -> Path:
        """``build/simple``: the index of every target in build/."""
        return self.build / INDEX_NAME

    def work_dir(self, target: str, what: str) -> Path:
        """``build/.work/<target>/<what>``: scratch space of one session (venvs, logs)."""
        return self.build / WORK / target / what

    def vendor_dir(self, target: str, project: str) -> Path:
        """``vendor/<target>/<project>``: a project's vendor tree."""
        return self.vendor / target / project

    def locked(self, name: str) -> AbstractContextManager[None]:
        """Hold ``build/.locks/<name>.lock``; a second holder waits (and says so)."""
        return build_lock(self.build, name)


@contextmanager
def build_lock(build_dir: Path, name: str) -> Iterator[None]:
    """Hold ``<build_dir>/.locks/<name>.lock`` (a target's, or the union index's)."""
    lock_dir = build_dir / LOCKS
    lock_dir.mkdir(parents=True, exist_ok=True)
    with (lock_dir / f"{name}.lock").open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            console.status(f"waiting for another patchwheel run holding {name} …")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
