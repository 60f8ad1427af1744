"""The state of a rebase in progress, kept on disk so ``--continue``/``--skip``/``--abort`` work.

``vendor/<target>/.patchwheel-rebase/`` holds ``state.json`` (pins, the new target.toml and
lock, per project the vendor repo's snapshot and per patch its class) and ``backup/``: the bytes
of ``patches/<target>/`` before the rebase, which ``--abort`` puts back exactly.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from patchwheel import atomic
from patchwheel.errors import ConfigError
from patchwheel.workspace import Workspace, check_name, check_target_name

SCHEMA = 1
STATE_DIR = ".patchwheel-rebase"
STATE_FILE = "state.json"
BACKUP = "backup"
Phase = Literal["prepare", "replay", "finish"]
CLASSES = ("clean", "offset", "merged", "conflict", "upstream", "target-gone", "variants-gone")


@dataclass
class PatchState:
    """One patch of a replayed series: where it was, what it became."""

    name: str
    sha256: str
    commit: str  # its commit on the old upstream
    klass: str = ""  # one of CLASSES once replayed
    reason: str = ""
    offsets: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # files in conflict or gone
    resolution: str = ""  # "", "by hand", "skipped"
    new_commit: str = ""  # its commit on the new upstream
    dropped: bool = False  # the patch leaves the series
    touched_upstream: list[str] = field(default_factory=list)  # its files upstream changed
    remembered: list[str] = field(default_factory=list)  # files rerere resolved from memory
    recorded: list[str] = field(default_factory=list)  # files whose resolution rerere recorded


@dataclass
class ProjectState:
    """One project of the target during a rebase."""

    name: str
    vendor: str  # the vendor repo the rebase works in
    affected: bool  # its source pin changed: the series is replayed
    old_identity: str
    new_identity: str
    old_upstream: str = ""
    new_upstream: str = ""
    snapshot: dict[str, Any] | None = None  # the vendor repo before (in place), to restore
    created: bool = False  # the vendor repo was made by this rebase (removed on abort)
    patches: list[PatchState] = field(default_factory=list)
    position: int = 0  # the next patch to replay
    base: str = ""  # the commit patches[position] is replayed onto
    stopped: bool = False
    remembered: int = 0  # resolutions kept with the series, loaded into the vendor repo

    @property
    def path(self) -> Path:
        """The vendor repo."""
        return Path(self.vendor)

    @property
    def current(self) -> PatchState | None:
        """The patch the replay is at (None when done)."""
        return self.patches[self.position] if self.position < len(self.patches) else None


@dataclass
class RebaseState:
    """Everything a rebase in progress needs to continue or to be undone."""

    target: str
    output: str
    onto: list[str]
    patches_dir: str
    vendor_dir: str
    build_dir: str
    target_toml: str  # the new target.toml text
    lock: list[dict[str, Any]]  # the new lock entries, in target order
    changes: list[dict[str, str]]  # key, old, new, why, old-identity, new-identity
    warnings: list[str] = field(default_factory=list)
    projects: list[ProjectState] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)  # variants without a new wheel
    rerun: list[str] = field(default_factory=list)  # the command that makes this move again
    undo: str = ""  # the command that undoes the move before it is made again (a roll's --abort)
    phase: Phase = "prepare"
    started: str = ""
    seconds: float = 0.0
    schema: int = SCHEMA

    @property
    def new_target(self) -> bool:
        """Whether the result is written as another target."""
        return self.output != self.target

    @property
    def home(self) -> Path:
        """The state directory."""
        return state_home(Path(self.vendor_dir), self.target)

    @property
    def workspace(self) -> Workspace:
        """The checkout the rebase works in."""
        return Workspace(Path(self.patches_dir), Path(self.vendor_dir), Path(self.build_dir))

    def clock(self, since: float) -> float:
        """Add the time since ``since`` to the rebase's own time (not the user's); return now."""
        now = time.monotonic()
        self.seconds += now - since
        return now

    def save(self) -> None:
        """Write state.json atomically."""
        self.home.mkdir(parents=True, exist_ok=True)
        atomic.write_json(self.home / STATE_FILE, asdict(self), indent=1)

    def project(self, name: str) -> ProjectState:
        """The state of one project."""
        return next(p for p in self.projects if p.name == name)


def state_home(vendor_root: Path, target: str) -> Path:
    """Where the state of a rebase of ``target`` lives."""
    return vendor_root / check_target_name(target) / STATE_DIR


def load(vendor_root: Path, target: str) -> RebaseState | None:
    """The rebase in progress for ``target``, if any (its names and paths checked)."""
    path = state_home(vendor_root, target) / STATE_FILE
    if not path.is_file():
        return None
    unreadable = f"{path} is not a rebase state patchwheel can read"
    try:
        data = json.loads(path.read_text("utf-8"))
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"schema {data.get('schema') if isinstance(data, dict) else data!r}")
        projects = [
            ProjectState(**{**p, "patches": [PatchState(**x) for x in p["patches"]]})
            for p in data.pop("projects")
        ]
        state = RebaseState(**data, projects=projects)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise ConfigError(f"{unreadable} ({exc}); remove {path.parent} by hand") from exc
    _check_paths(state, vendor_root, target, f"{unreadable}:")
    return state


def _check_paths(state: RebaseState, vendor_root: Path, target: str, what: str) -> None:
    """The names and paths a state holds must be the workspace's own: nothing it says may make
    ``--continue`` or ``--abort`` touch anything outside ``vendor/<output>/`` and ``patches/``."""
    check_target_name(state.target, f"{what} target")
    check_target_name(state.output, f"{what} output")
    if state.target != target or Path(state.vendor_dir).resolve() != vendor_root.resolve():
        raise ConfigError(f"{what} it names another target or checkout ({state.target})")
    for project in state.projects:
        check_name(project.name, f"{what} project")
        expected = Path(state.vendor_dir) / state.output / project.name
        if Path(project.vendor) != expected:
            raise ConfigError(f"{what} project {project.name}'s vendor tree is not {expected}")


def in_progress(vendor_root: Path) -> list[str]:
    """The targets with a rebase in progress (under names that follow the rule)."""
    if not vendor_root.is_dir():
        return []
    found = (p.parent.parent.name for p in vendor_root.glob(f"*/{STATE_DIR}/{STATE_FILE}"))
    return sorted(check_target_name(name, f"rebase state in {vendor_root}:") for name in found)


def backup_dir(state: RebaseState) -> Path:
    """The copy of ``patches/<target>/`` from before the rebase."""
    return state.home / BACKUP


def pool_backup_dir(state: RebaseState) -> Path:
    """The copies of the pools the target's projects use (``<project>/``), from before."""
    return state.home / "pool-backup"


def take_backup(
    state: RebaseState, target_dir: Path, pools: Mapping[str, Path] | None = None
) -> None:
    """Copy the target directory's bytes aside (before anything changes), and the pools its
    projects take their series from (``pools``: project → pool folder), which a rebase reads
    its old patches from but never changes."""
    dest = backup_dir(state)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(target_dir, dest, symlinks=True)
    pooled = pool_backup_dir(state)
    if pooled.exists():
        shutil.rmtree(pooled)
    for project, folder in (pools or {}).items():
        shutil.copytree(folder, pooled / project, symlinks=True)


def restore_dir(source: Path, dest: Path) -> None:
    """Make ``dest`` hold exactly the files of ``source`` (bytes and modes), nothing more."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted = {p.relative_to(source) for p in source.rglob("*")}
    for path in sorted(dest.rglob("*"), reverse=True):
        rel = path.relative_to(dest)
        if rel not in wanted:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    for src in sorted(source.rglob("*")):
        target = dest / src.relative_to(source)
        if src.is_dir() and not src.is_symlink():
            target.mkdir(exist_ok=True)
        elif not target.is_file() or target.read_bytes() != src.read_bytes():
            shutil.copy2(src, target)
        else:
            shutil.copymode(src, target)


def remove_leftover(vendor_root: Path, target: str) -> bool:
    """Remove what a rebase killed while it started (or while it removed its state) left: its
    state directory without a state. Whether there was one."""
    home = state_home(vendor_root, target)
    if not home.is_dir() or (home / STATE_FILE).is_file():
        return False
    shutil.rmtree(home, ignore_errors=True)
    return True


def remove(state: RebaseState) -> None:
    """Forget the rebase (its state and backup)."""
    shutil.rmtree(state.home, ignore_errors=True)
    parent = state.home.parent
    if parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
