"""A roll in progress, kept on disk from its start until it is green or aborted.

``build/.work/<target>/roll/`` holds ``state.json`` and ``backup/``:

* ``state.json`` — the old pins, the revision rolled onto (and the pins that say so, so the
  rebase can be started again), the options, the **step** the roll has reached, what the steps
  before it found (the rebase's report, the build, the audit, the bisect, the verification)
  and the time each took;
* ``backup/`` — the bytes of ``patches/<target>/`` before the roll, and in ``state.json`` each
  vendor tree's refs and state: what ``--abort`` puts back, after the rebase as well as in it.

Steps, in order (:data:`STEPS`): ``rebase`` (stopped at a conflict, or not yet finished),
``build`` (with the audit), ``bisect`` (when the audit found drift), ``verify``, ``report``.
A roll that needs a person after its rebase (drift, a failed build or verification) stays in
progress at ``build``: ``--continue`` after the fix builds, audits and verifies again. One whose
checks are green but which dropped a variant no ``missing`` policy answers stays at ``report``
(``asked``): ``--continue`` accepts the drop (``accepted``), ``--abort`` undoes the roll.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from patchwheel import atomic
from patchwheel.errors import ConfigError
from patchwheel.rebase.missing import from_dict
from patchwheel.rebase.onto import KeyPin
from patchwheel.workspace import Workspace, check_name, check_target_name

SCHEMA = 2
_COMMIT = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})?")
STATE_FILE = "state.json"
BACKUP = "backup"
Verify = Literal["extraction", "install"]
Step = Literal["rebase", "build", "bisect", "verify", "report"]
STEPS: tuple[Step, ...] = get_args(Step)


@dataclass
class RollState:
    """What a roll needs to go on, or to be undone."""

    target: str
    output: str
    project: str
    verify: Verify
    started: str
    old: dict[str, dict[str, Any]]  # lock key -> the old lock entry
    new: dict[str, Any]  # version, commit, wheels, pins, channel
    step: Step = "rebase"
    moved: bool = True  # False: the pins stay (the checks of the pins the target has)
    pins: dict[str, dict[str, Any]] = field(default_factory=dict)  # lock key -> KeyPin fields
    versions: dict[str, str] = field(default_factory=dict)  # lock key -> version (Drop-When)
    rebase: dict[str, Any] | None = None  # the finished rebase's report
    rebase_markdown: str = ""
    checks: dict[str, Any] = field(default_factory=dict)  # build, audit, bisect, verification
    rerun: list[str] = field(default_factory=list)  # the command that makes this roll again
    asked: bool = False  # a variant dropped without a `missing` policy: a person was asked
    accepted: bool = False  # ... and accepted the drop with --continue
    vendor: dict[str, dict[str, Any]] = field(default_factory=dict)  # project -> snapshot
    timings: dict[str, float] = field(default_factory=dict)
    schema: int = SCHEMA

    def add_time(self, step: str, seconds: float) -> None:
        """Add the time a step took (a step may run in several invocations)."""
        self.timings[step] = round(self.timings.get(step, 0.0) + seconds, 2)

    def key_pins(self) -> dict[str, KeyPin]:
        """The new pins, as the rebase takes them."""
        return {key: KeyPin(**value) for key, value in self.pins.items()}

    @property
    def new_target(self) -> bool:
        """Whether the roll writes another target (the rolled one stays as it was)."""
        return self.output != self.target


def home(workspace: Workspace, target: str) -> Path:
    """Where the state of a roll of ``target`` lives."""
    return workspace.work_dir(target, "roll")


def backup_dir(workspace: Workspace, target: str) -> Path:
    """The copy of ``patches/<target>/`` from before the roll."""
    return home(workspace, target) / BACKUP


def save(workspace: Workspace, state: RollState) -> None:
    """Write the state atomically."""
    directory = home(workspace, state.target)
    directory.mkdir(parents=True, exist_ok=True)
    atomic.write_json(directory / STATE_FILE, asdict(state))


def load(workspace: Workspace, target: str) -> RollState | None:
    """The roll in progress for ``target``, if any (its names checked: a state that names a
    path cannot make ``--continue`` or ``--abort`` touch anything outside the checkout's
    folders of its targets)."""
    path = home(workspace, target) / STATE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text("utf-8"))
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"schema {found!r}, expected {SCHEMA}")
        state = RollState(**data)
        if state.step not in STEPS:
            raise ValueError(f"step {state.step!r}")
        check_target_name(state.target, "its target")
        check_target_name(state.output, "its output")
        check_name(state.project, "its project")
        for project, snapshot in state.vendor.items():
            check_name(project, "its vendor tree")
            _check_snapshot(project, snapshot)
        if state.target != target:
            raise ValueError(f"it is the state of {state.target!r}")
        state.key_pins()
        if not isinstance(state.rerun, list) or not all(isinstance(w, str) for w in state.rerun):
            raise ValueError("its rerun command is not a list of words")
        if not isinstance(state.new, dict) or not isinstance(state.new.get("missing", []), list):
            raise ValueError("its new revision is not a table with a list of missing variants")
        for record in state.new.get("missing", []):
            check_name(from_dict(record).variant, "its missing variant")
    except (ValueError, TypeError, AttributeError, RecursionError, ConfigError) as exc:
        raise ConfigError(
            f"{path} is not a roll state patchwheel can read ({exc}); undo the rebase with "
            f"`nox -s rebase -- --target {target} --abort` and remove {path.parent}"
        ) from exc
    return state


def _check_snapshot(project: str, snapshot: Any) -> None:
    """A vendor tree's record: commits are 40 hex digits (or none), texts are texts."""
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("exists"), bool):
        raise ValueError(f"the record of vendor tree {project} is not a table with `exists`")
    if not snapshot["exists"]:
        return
    for key in ("head", "upstream"):
        if not isinstance(snapshot.get(key), str) or not _COMMIT.fullmatch(snapshot[key]):
            raise ValueError(f"vendor tree {project}: {key} {snapshot.get(key)!r} is no commit")
    for key in ("state", "config"):
        if not isinstance(snapshot.get(key), str | None):
            raise ValueError(f"vendor tree {project}: {key} is not a text")


def take_backup(workspace: Workspace, state: RollState) -> None:
    """Copy ``patches/<target>/`` into the roll's home (before anything changes): written
    beside and renamed into place, so a backup that exists is complete."""
    directory = home(workspace, state.target)
    directory.mkdir(parents=True, exist_ok=True)
    dest = directory / BACKUP
    tmp = directory / f".{BACKUP}.tmp"
    for stale in (tmp, dest):
        if stale.exists():
            shutil.rmtree(stale)
    shutil.copytree(workspace.target_patches(state.target), tmp, symlinks=True)
    tmp.rename(dest)


def remove(workspace: Workspace, target: str) -> None:
    """Forget the roll (its state and backup)."""
    shutil.rmtree(home(workspace, target), ignore_errors=True)


def leftover(workspace: Workspace, target: str) -> bool:
    """Whether a roll's home exists without a state (a roll killed while it started)."""
    directory = home(workspace, target)
    return directory.exists() and not (directory / STATE_FILE).is_file()
