"""A roll in progress, kept on disk while its rebase waits for a person (``--continue``).

``build/.work/<target>/roll/state.json``: the old pins, the channel revision rolled onto, the
options, and the time each step took so far. It is removed when the roll ends (green or not).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from patchwheel import atomic
from patchwheel.errors import ConfigError
from patchwheel.workspace import Workspace

SCHEMA = 1
STATE_FILE = "state.json"
Verify = Literal["extraction", "install"]


@dataclass
class RollState:
    """What a stopped roll needs to go on."""

    target: str
    output: str
    project: str
    verify: Verify
    started: str
    old: dict[str, dict[str, Any]]  # lock key -> the old lock entry
    new: dict[str, Any]  # version, commit, wheels, pins
    timings: dict[str, float] = field(default_factory=dict)
    schema: int = SCHEMA

    def add_time(self, step: str, seconds: float) -> None:
        """Add the time a step took (a step may run in several invocations)."""
        self.timings[step] = round(self.timings.get(step, 0.0) + seconds, 2)


def home(workspace: Workspace, target: str) -> Path:
    """Where the state of a roll of ``target`` lives."""
    return workspace.work_dir(target, "roll")


def save(workspace: Workspace, state: RollState) -> None:
    """Write the state atomically."""
    directory = home(workspace, state.target)
    directory.mkdir(parents=True, exist_ok=True)
    atomic.write_json(directory / STATE_FILE, asdict(state))


def load(workspace: Workspace, target: str) -> RollState | None:
    """The roll in progress for ``target``, if any."""
    path = home(workspace, target) / STATE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text("utf-8"))
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema {data.get('schema')!r}")
        return RollState(**data)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"{path} is not a roll state patchwheel can read ({exc}); undo the rebase with "
            f"`nox -s rebase -- --target {target} --abort` and remove {path.parent}"
        ) from exc


def remove(workspace: Workspace, target: str) -> None:
    """Forget the roll."""
    shutil.rmtree(home(workspace, target), ignore_errors=True)
