"""``--abort``: the vendor trees, ``patches/<target>`` and its lock put back byte for byte from
what the rebase recorded when it started; what it created removed.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

from patchwheel import atomic
from patchwheel.errors import VendorError
from patchwheel.patching import vendor, vendor_git
from patchwheel.rebase.prepare import OLD_HEAD_REF, unmark
from patchwheel.rebase.state import (
    RebaseState,
    backup_dir,
    remove,
    restore_dir,
)


def undo(state: RebaseState) -> None:
    """Restore the vendor trees, ``patches/<target>`` and its lock; remove what was created."""
    patches = Path(state.patches_dir)
    for project in reversed(state.projects):
        path = project.path
        if project.created:
            shutil.rmtree(path, ignore_errors=True)
            for stale in path.parent.glob(f".{path.name}.tmp-*"):
                shutil.rmtree(stale, ignore_errors=True)
            with contextlib.suppress(OSError):
                path.parent.rmdir()
        elif project.snapshot is not None:
            _restore_vendor(path, project.snapshot)
    for stale in patches.glob(f".{state.output}.rebase-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if state.new_target:
        shutil.rmtree(patches / state.output, ignore_errors=True)
    backup = backup_dir(state)
    if backup.is_dir():
        restore_dir(backup, patches / state.target)
    remove(state)


def _restore_vendor(path: Path, snapshot: dict[str, Any]) -> None:
    if not snapshot.get("exists"):
        shutil.rmtree(path, ignore_errors=True)
        return
    if not (path / ".git").is_dir():
        raise VendorError(f"{path}: the vendor tree is gone; cannot restore it")
    unmark(path)
    vendor_git.set_branch(path, vendor.PATCHED, snapshot["head"])
    if snapshot["upstream"]:
        vendor_git.run(path, "update-ref", f"refs/heads/{vendor.UPSTREAM}", snapshot["upstream"])
    vendor_git.run(path, "update-ref", "-d", OLD_HEAD_REF, check=False)
    state_file = vendor_git.git_dir(path) / vendor.STATE_FILE
    if snapshot["state"] is None:
        state_file.unlink(missing_ok=True)
    else:
        atomic.write_text(state_file, snapshot["state"])
