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
from patchwheel.workspace import check_target_name, within


def undo(state: RebaseState) -> None:
    """Restore the vendor trees, ``patches/<target>`` and its lock; remove what was created.

    Nothing outside ``vendor/<output>/`` and ``patches/`` is removed or rewritten, whatever the
    state says: every path is checked against the workspace before it is touched.
    """
    patches = Path(state.patches_dir)
    check_target_name(state.target)
    check_target_name(state.output)
    vendor_root = Path(state.vendor_dir) / state.output
    for project in reversed(state.projects):
        path = project.path
        if project.created:
            remove_tree(path, vendor_root)
            for stale in path.parent.glob(f".{path.name}.tmp-*"):
                remove_tree(stale, vendor_root)
            with contextlib.suppress(OSError):
                path.parent.rmdir()
        elif project.snapshot is not None:
            restore_vendor(path, project.snapshot, vendor_root)
    for stale in patches.glob(f".{state.output}.rebase-*"):
        remove_tree(stale, patches)
    if state.new_target:
        remove_tree(patches / state.output, patches)
    backup = backup_dir(state)
    if backup.is_dir():
        restore_dir(backup, patches / state.target)
    remove(state)


def remove_tree(path: Path, root: Path) -> None:
    """Remove the directory ``path``, which must lie inside ``root`` (else VendorError: a state
    file or name that points elsewhere never removes anything)."""
    if not path.exists() and not path.is_symlink():
        return
    if not within(path, root) or path.is_symlink():
        raise VendorError(
            f"refusing to remove {path}: it is not a directory inside {root}; nothing removed"
        )
    shutil.rmtree(path, ignore_errors=True)


def restore_vendor(path: Path, snapshot: dict[str, Any], root: Path) -> None:
    """Put the vendor repo ``path`` (inside ``root``) back at ``snapshot`` (its refs and state
    from before), or remove it when it did not exist then."""
    if not within(path, root):
        raise VendorError(f"refusing to restore {path}: it is not inside {root}")
    if not snapshot.get("exists"):
        remove_tree(path, root)
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
    if isinstance(snapshot.get("config"), str):
        atomic.write_text(vendor_git.git_dir(path) / "config", snapshot["config"])
