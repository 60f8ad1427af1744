"""A target's vendor trees brought to upstream + series, all or nothing per project."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from patchwheel import console
from patchwheel.building.plan import Unit
from patchwheel.config.lock import LockedPin
from patchwheel.config.pins import GitPin
from patchwheel.config.targets import PinSpec, Target
from patchwheel.errors import PatchError
from patchwheel.patching import vendor
from patchwheel.upstream import gitsrc
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import source_epoch, source_tree_of
from patchwheel.workspace import Workspace


def prepare_vendor_trees(
    target: Target,
    lock: dict[str, LockedPin],
    units: list[Unit],
    workspace: Workspace,
    cache: Cache,
    *,
    only: Collection[str] | None = None,
) -> dict[str, Path]:
    """Bring every project's vendor tree (or those ``only`` names) to upstream + series.

    All or nothing per project.
    """
    trees: dict[str, Path] = {}
    series = {u.project.name: u.tree_patches for u in units}
    for project in target.projects:
        if only is not None and project.name not in only:
            continue
        upstream = upstream_of(project.source, lock[project.source.key], cache)
        vendor_dir = workspace.vendor_dir(target.name, project.name)
        try:
            result = vendor.prepare(vendor_dir, upstream, series[project.name])
        except PatchError as exc:
            raise PatchError(
                f"{exc}\nThe vendor tree {vendor_dir} is as it was before this run; "
                "build/ is untouched."
            ) from exc
        for offset in result.offsets:
            console.status(f"[yellow]offset:[/] {offset}")
        if result.applied:
            console.status(
                f"vendor {target.name}/{project.name}: applied {len(result.applied)} patch(es)"
                + (f", reused {result.reused}" if result.reused else "")
            )
        trees[project.name] = vendor_dir
    return trees


def recover_vendor_trees(target: Target, workspace: Workspace) -> None:
    """Undo what a killed run left in the target's vendor trees (before any decision)."""
    for project in target.projects:
        vendor.recover(workspace.vendor_dir(target.name, project.name))


def vendor_tree_states(
    target: Target, lock: dict[str, LockedPin], units: list[Unit], workspace: Workspace
) -> dict[str, tuple[vendor.TreeState, str]]:
    """Each project's vendor tree: current, stale or held (no source needed to tell)."""
    series = {u.project.name: u.tree_patches for u in units}
    return {
        project.name: vendor.tree_state(
            workspace.vendor_dir(target.name, project.name),
            lock[project.source.key].identity,
            series[project.name],
        )
        for project in target.projects
    }


def upstream_of(spec: PinSpec, entry: LockedPin, cache: Cache) -> vendor.Upstream:
    """What a vendor tree's ``upstream`` branch holds for a locked source pin.

    The extracted source tree (checked file by file against its record) is made only when the
    vendor tree imports it; a git pin imports straight from its mirror.
    """
    git_dir = None
    if isinstance(spec.pin, GitPin):
        git_dir = str(gitsrc.mirror(spec.pin, entry.commit or "", cache).git_dir)
    return vendor.Upstream(
        identity=entry.identity,
        description=f"{spec.pin.text} ({entry.kind} {entry.identity[:12]})",
        epoch=source_epoch(spec, entry, cache),
        git_dir=git_dir,
        tree_source=None if git_dir else lambda: source_tree_of(spec, entry, cache).path,
    )
