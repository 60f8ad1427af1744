"""What a roll records before it changes anything, and ``--abort``: everything put back.

Before the rebase (under the target's lock): each vendor tree of the target, after a killed
run's leftovers are undone, is recorded (its refs, vendor state and git config, or that it did
not exist) and ``patches/<target>/`` is copied aside (:func:`patchwheel.roll.state.take_backup`).

``--abort`` at any step — in the rebase, after it, after a kill — first lets the rebase undo
itself when one is in progress, then puts ``patches/<target>/`` back byte for byte from the
backup and each vendor tree at its record; for ``--new-target`` the new target's directory and
vendor trees are removed. Every path is checked to lie in ``patches/`` or in the vendor folder
of the roll's own targets before anything is removed or rewritten there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from patchwheel.building.trees import recover_vendor_trees
from patchwheel.config.targets import Target
from patchwheel.errors import VendorError
from patchwheel.patching import vendor_git
from patchwheel.patching.vendor import TXN_FILE
from patchwheel.rebase.prepare import vendor_snapshot
from patchwheel.rebase.state import restore_dir
from patchwheel.rebase.undo import remove_tree, restore_vendor
from patchwheel.roll import state as roll_state
from patchwheel.roll.state import RollState
from patchwheel.workspace import Workspace

_GIT_LOCKS = ("index.lock", "HEAD.lock", "packed-refs.lock", "config.lock")


@contextlib.contextmanager
def locked(workspace: Workspace, state: RollState) -> Iterator[None]:
    """Hold the build locks of the rolled target (and of the new one): builds wait."""
    with workspace.locked(state.target):
        if not state.new_target:
            yield
            return
        with workspace.locked(state.output):
            yield


def record(workspace: Workspace, state: RollState, target: Target) -> None:
    """Record what ``--abort`` restores: the vendor trees' state, then patches/<target>/."""
    with locked(workspace, state):
        recover_vendor_trees(target, workspace)  # a killed build's half-applied tree first
        state.vendor = {
            project.name: vendor_snapshot(workspace.vendor_dir(state.target, project.name))
            for project in target.projects
        }
        roll_state.take_backup(workspace, state)


def restore(workspace: Workspace, state: RollState) -> None:
    """Put patches/<target>/ and the vendor trees back as the roll found them."""
    backup = roll_state.backup_dir(workspace, state.target)
    if not backup.is_dir():
        raise VendorError(
            f"the roll of {state.target} has no backup at {backup}; nothing was restored"
        )
    with locked(workspace, state):
        if state.new_target:
            out_vendor = workspace.vendor / state.output
            for project in sorted(state.vendor):
                remove_tree(workspace.vendor_dir(state.output, project), out_vendor)
            with contextlib.suppress(OSError):
                out_vendor.rmdir()
            remove_tree(workspace.target_patches(state.output), workspace.patches)
        else:
            root = workspace.vendor / state.target
            for project, snapshot in sorted(state.vendor.items()):
                path = workspace.vendor_dir(state.target, project)
                if snapshot.get("exists"):
                    if not (path / ".git").is_dir():
                        continue  # removed since: the next build makes it again
                    _drop_leftovers(path)
                restore_vendor(path, snapshot, root)
        restore_dir(backup, workspace.target_patches(state.target))


def _drop_leftovers(path: Path) -> None:
    """What a killed git or build left in a vendor repo: lock files and a build's transaction
    record (the snapshot is restored over whatever state it describes)."""
    git_dir = vendor_git.git_dir(path)
    for name in (*_GIT_LOCKS, TXN_FILE):
        (git_dir / name).unlink(missing_ok=True)
    for stale in git_dir.joinpath("refs").rglob("*.lock"):
        stale.unlink(missing_ok=True)
