"""The workspace: where a run reads and writes — ``patches/``, ``vendor/`` and ``build/``.

One checkout is one workspace: ``patches/<target>`` holds a target's inputs,
``vendor/<target>/<project>`` its vendor trees, ``build/<target>`` its outputs (a link into
``build/.store``), ``build/simple`` the index of every target, ``build/.work`` scratch space and
``build/.locks`` the locks that make two runs on one target wait for each other.

A name read from a file that travels (parts.json, SHA256SUMS, a lock, a JSON freeze) that
becomes a path follows :data:`PATH_RULE` (:func:`check_relative_path`) before anything is
opened through it.

Every name that becomes a path here — a target, a project, a lock — must follow :data:`NAME_RULE`
(:func:`check_name`): one plain path component, so no name reaches outside its folder. The
command line checks names where they enter; these helpers refuse an unchecked one as well.
"""

from __future__ import annotations

import fcntl
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from patchwheel import console
from patchwheel.errors import InvalidNameError

INDEX_NAME = "simple"
LOCKS = ".locks"
WORK = ".work"
MAX_NAME = 100
NAME_RULE = (
    f"a name is one plain path component of at most {MAX_NAME} letters, digits, '.', '_' and "
    "'-', not starting with '-' or '.'"
)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# build/simple is the union index and build/README.md says what build/ is: no target's outputs.
RESERVED_TARGETS = frozenset({INDEX_NAME, "readme.md"})


def check_name(value: object, what: str) -> str:
    """``value`` if it follows :data:`NAME_RULE`; else InvalidNameError naming ``what`` and it."""
    if not isinstance(value, str) or len(value) > MAX_NAME or not _NAME.fullmatch(value):
        raise InvalidNameError(f"{what} {value!r} is refused: {NAME_RULE}")
    return value


PATH_RULE = (
    "a file name in a transfer is a relative path of plain components (none empty, '.' or "
    "'..', no backslash or control character, at most 255 bytes each) that stays in its folder"
)


def check_relative_path(value: object, what: str) -> str:
    """``value`` if it follows :data:`PATH_RULE` (a name read from a file: parts.json,
    SHA256SUMS, a lock, a JSON freeze), else InvalidNameError naming ``what`` and it.

    ``wheelhouse/join.py`` (stdlib only) carries a copy, ``check_path``; a test holds both to
    the same answers.
    """
    ok = isinstance(value, str) and 0 < len(value) <= 4096 and not value.startswith("/")
    if ok:
        assert isinstance(value, str)
        ok = "\\" not in value and not any(ord(c) < 32 or ord(c) == 127 for c in value)
        ok = ok and all(
            p not in ("", ".", "..") and len(p.encode("utf-8", "surrogatepass")) <= 255
            for p in value.split("/")
        )
    if not ok:
        shown = repr(value) if len(repr(value)) <= 120 else repr(value)[:117] + "…"
        raise InvalidNameError(f"{what} {shown} is refused: {PATH_RULE}")
    return str(value)


def check_target_name(value: object, what: str = "target") -> str:
    """A target name: :func:`check_name`, and not a name build/ keeps for itself."""
    name = check_name(value, what)
    if name.lower() in RESERVED_TARGETS:
        raise InvalidNameError(
            f"{what} {name!r} is refused: build/{name} is not a target's (reserved: "
            f"{', '.join(sorted(RESERVED_TARGETS))})"
        )
    return name


def within(path: Path, root: Path) -> bool:
    """Whether ``path`` lies inside ``root`` (strictly), symbolic links resolved: what may be
    removed or rewritten in ``root``'s name."""
    try:
        resolved, base = path.resolve(), root.resolve()
    except (OSError, RuntimeError):
        return False
    return resolved != base and resolved.is_relative_to(base)


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
        return self.build / check_target_name(target)

    @property
    def index_dir(self) -> Path:
        """``build/simple``: the index of every target in build/."""
        return self.build / INDEX_NAME

    def work_dir(self, target: str, what: str) -> Path:
        """``build/.work/<target>/<what>``: scratch space of one session (venvs, logs)."""
        return self.build / WORK / check_target_name(target) / check_name(what, "work folder")

    def vendor_dir(self, target: str, project: str) -> Path:
        """``vendor/<target>/<project>``: a project's vendor tree."""
        return self.vendor / check_target_name(target) / check_name(project, "project")

    def target_patches(self, target: str) -> Path:
        """``patches/<target>``: the target's inputs (target.toml, lock, series)."""
        return self.patches / check_target_name(target)

    def locked(self, name: str) -> AbstractContextManager[None]:
        """Hold ``build/.locks/<name>.lock``; a second holder waits (and says so)."""
        return build_lock(self.build, name)


@contextmanager
def build_lock(build_dir: Path, name: str) -> Iterator[None]:
    """Hold ``<build_dir>/.locks/<name>.lock`` (a target's, or the union index's)."""
    check_name(name, "lock")
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
