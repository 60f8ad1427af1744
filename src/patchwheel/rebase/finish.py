"""The end of a rebase: patch files rewritten from the rebased commits and checked by applying
them strictly, the target directory replaced in one rename, the audit and the report (step 3
of :mod:`patchwheel.rebase.run`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from patchwheel import atomic, console
from patchwheel.config.lock import LockedPin, locked_pins, write_lock
from patchwheel.config.targets import LOCK_FILE, TARGET_FILE, read_target
from patchwheel.errors import ConfigError
from patchwheel.index import outputs
from patchwheel.patching import vendor_git
from patchwheel.patching.export import (
    check_and_record,
    write_series_dir,
)
from patchwheel.patching.patches import Patch, parse_patch, series_names
from patchwheel.rebase import report, rerere
from patchwheel.rebase.prepare import OLD_HEAD_REF, unmark
from patchwheel.rebase.state import (
    ProjectState,
    RebaseState,
    backup_dir,
    pool_backup_dir,
    remove,
)
from patchwheel.upstream.cache import Cache, sha256_bytes
from patchwheel.workspace import Workspace

REPORT_MD = "rebase.md"
REPORT_JSON = "rebase.json"
AuditRunner = Callable[[RebaseState, Cache], dict[str, Any] | None]


def patch_loader(state: RebaseState, project: ProjectState) -> Callable[[str], Patch]:
    """Old patches are read from the backup: the bytes the vendor commits were made from."""
    series_dir = backup_dir(state) / project.name
    if not series_dir.is_dir():  # a pooled project: its pool as it was
        series_dir = pool_backup_dir(state) / project.name

    def load_patch(name: str) -> Patch:
        return parse_patch(name, (series_dir / name).read_bytes())

    return load_patch


def finish(
    state: RebaseState, cache: Cache, audit: AuditRunner | None, began: float
) -> tuple[dict[str, Any], str, list[Path]]:
    """Rewrite, check and install the new series; audit; write the report: (report, text, files)."""
    workspace = state.workspace
    old = {p.name: _old_patches(state, p) for p in state.projects}
    written: dict[str, dict[str, bytes]] = {}
    details: dict[str, dict[str, dict[str, Any]]] = {}
    for project in state.projects:
        if project.affected:
            written[project.name], details[project.name] = _rewrite(project, old[project.name])
    for project in state.projects:
        if project.affected:
            _verify(project, written[project.name])
    target_dir = _install_target(state, workspace, written)
    remembered = _remember_resolutions(state, workspace)
    state.clock(began)
    audit_result = audit(state, cache) if audit is not None else None
    data = report.build_report(state, old, details, audit_result, remembered)
    text = report.markdown(data)
    files = _add_report(workspace.build, state.output, data, text)
    _cleanup(state)
    console.status(
        f"[green]rebased[/] {state.target} onto {' '.join(state.onto)} → {target_dir} "
        f"({state.seconds:.1f} s)"
    )
    return data, text, files


def _old_patches(state: RebaseState, project: ProjectState) -> dict[str, Patch]:
    load_patch = patch_loader(state, project)
    return {record.name: load_patch(record.name) for record in project.patches}


def _rewrite(
    project: ProjectState, old: dict[str, Patch]
) -> tuple[dict[str, bytes], dict[str, dict[str, Any]]]:
    """The new patch files of a replayed series, from the rebased commits."""
    repo = project.path
    files: dict[str, bytes] = {}
    details: dict[str, dict[str, Any]] = {}
    survivors = [r for r in project.patches if not r.dropped]
    for number, record in enumerate(survivors, start=1):
        before = old[record.name]
        data = vendor_git.format_patch(
            repo,
            record.new_commit,
            abbrev=vendor_git.abbrev_of(before.data),
            renames=vendor_git.has_renames(before),
            prefix=vendor_git.subject_prefix(before.data, number=number, total=len(survivors)),
        )
        files[record.name] = data
        changed = data != before.data
        details[record.name] = {
            "sha256": sha256_bytes(data),
            "text-changed": changed,
            "range-diff": vendor_git.range_diff(repo, record.commit, record.new_commit)
            if changed
            else None,
        }
    return files, details


def _verify(project: ProjectState, files: dict[str, bytes]) -> None:
    """Apply the rewritten series strictly to the new upstream, as the next build will."""
    survivors = [r for r in project.patches if not r.dropped]
    console.status(
        f"vendor {project.name}: apply the rewritten series ({len(survivors)} patches) strictly"
    )
    check_and_record(
        project.path,
        identity=project.new_identity,
        upstream_commit=project.new_upstream,
        prefix=[],
        series=[parse_patch(r.name, files[r.name]) for r in survivors],
        commits=[r.new_commit for r in survivors],
    )


def _install_target(
    state: RebaseState, workspace: Workspace, written: dict[str, dict[str, bytes]]
) -> Path:
    """Write the new target directory beside the old one, check it, and rename it into place."""
    source = workspace.patches / state.target
    dest = workspace.patches / state.output
    for stale in workspace.patches.glob(f".{state.output}.rebase-*"):  # of a killed run
        shutil.rmtree(stale, ignore_errors=True)
    tmp = workspace.patches / f".{state.output}.rebase-{secrets.token_hex(3)}"
    shutil.copytree(source if source.is_dir() else backup_dir(state), tmp, symlinks=True)
    try:
        atomic.write_text(tmp / TARGET_FILE, state.target_toml)
        new_target = read_target(tmp, state.output)
        entries = [LockedPin(**entry) for entry in state.lock]
        write_lock(tmp / LOCK_FILE, entries)
        for project in state.projects:
            if project.name not in written:
                continue
            series_dir = tmp / project.name
            names = [r.name for r in project.patches if not r.dropped]
            dropped = [r.name for r in project.patches if r.dropped]
            write_series_dir(series_dir, written[project.name], names, dropped)
            if series_names(series_dir) != names:  # pragma: no cover - defensive
                raise ConfigError(f"{series_dir}: the rewritten series does not list {names}")
        locked_pins(new_target)  # every pin locked, and the lock agrees with target.toml
        _replace_dir(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _remember_resolutions(state: RebaseState, workspace: Workspace) -> dict[str, list[str]]:
    """Keep the vendor repos' recorded conflict resolutions with the series (the rebased one
    and, for a new target, the one it came from); per project, the resolution ids written."""
    out: dict[str, list[str]] = {}
    for project in state.projects:
        if not project.affected or not project.path.is_dir():
            continue
        entries = rerere.resolved(project.path)
        if not entries:
            continue
        homes = [workspace.patches / state.output / project.name]
        # (not into a pool: a pooled project's source target has no folder of its own for it)
        if state.new_target and (workspace.patches / state.target / project.name).is_dir():
            homes.append(workspace.patches / state.target / project.name)
        written: set[str] = set()
        for home in homes:
            written |= set(rerere.save(entries, home))
        if written:
            out[project.name] = sorted(written)
            console.status(
                f"{project.name}: {len(written)} conflict resolution(s) remembered in "
                f"{', '.join(str(h / rerere.RR_CACHE) for h in homes)}"
            )
    return out


def _replace_dir(new: Path, dest: Path) -> None:
    if not dest.exists():
        os.replace(new, dest)
        return
    old = dest.with_name(f".{dest.name}.rebase-old-{secrets.token_hex(3)}")
    os.replace(dest, old)
    os.replace(new, dest)
    shutil.rmtree(old)


def _add_report(build_dir: Path, name: str, data: dict[str, Any], text: str) -> list[Path]:
    """Add rebase.md/.json to build/<name>, swapping its link like a build does."""
    return outputs.add_files(build_dir, name, report_files(data, text))


def report_files(data: dict[str, Any], text: str) -> dict[str, bytes]:
    """rebase.md and rebase.json as bytes, by file name."""
    return {
        REPORT_MD: text.encode("utf-8"),
        REPORT_JSON: (json.dumps(data, indent=2) + "\n").encode("utf-8"),
    }


def _cleanup(state: RebaseState) -> None:
    for project in state.projects:
        if project.path.is_dir():
            unmark(project.path)
            vendor_git.run(project.path, "update-ref", "-d", OLD_HEAD_REF, check=False)
    remove(state)
