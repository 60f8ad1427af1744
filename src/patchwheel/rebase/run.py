"""Rebase a target's patch series onto new pins: start, ``--continue``, ``--skip``, ``--abort``.

1. ``--onto`` pins replace target pins (see :mod:`patchwheel.rebase.onto`); they are resolved
   and the new sources fetched.
2. Every project's vendor tree is prepared at the old pins, exactly as a build does (for
   ``--new-target`` in a copy, ``vendor/<new>/<project>``). A project whose source changed gets
   the new sources imported onto branch ``upstream`` and its series replayed
   (:mod:`patchwheel.rebase.replay`); a conflict stops with the repo in git's conflict state.
3. When every series is replayed, the patch files are rewritten from the rebased commits, the
   rewritten series is applied strictly to the new upstream (as the next build will, so that
   build reuses the vendor tree) and must reproduce every commit; then the target directory
   (target.toml, lock, series) is replaced in one rename, and the report written.

Nothing under ``patches/`` changes before step 3; ``--abort`` restores ``patches/<target>``, the
vendor trees and the lock byte for byte from what the rebase recorded when it started.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import git

from patchwheel import console
from patchwheel.building.run import upstream_of
from patchwheel.config.lock import LockedPin, locked_pins, resolve, write_lock
from patchwheel.config.targets import LOCK_FILE, TARGET_FILE, PinSpec, Target, load_target
from patchwheel.errors import ConfigError, VendorError
from patchwheel.index import outputs
from patchwheel.patching import vendor, vendor_git
from patchwheel.patching.export import (
    applied_entries,
    check_and_record,
    write_bytes,
    write_series_dir,
)
from patchwheel.patching.patches import Patch, parse_patch, read_series, series_names
from patchwheel.rebase import onto as onto_mod
from patchwheel.rebase import replay, report
from patchwheel.rebase.state import (
    PatchState,
    ProjectState,
    RebaseState,
    backup_dir,
    load,
    remove,
    restore_dir,
    take_backup,
)
from patchwheel.upstream.cache import Cache, sha256_bytes
from patchwheel.workspace import Workspace

Status = Literal["done", "stopped", "unchanged", "aborted"]
REPORT_MD = "rebase.md"
REPORT_JSON = "rebase.json"
OLD_HEAD_REF = "refs/patchwheel/rebase-old-head"
AuditRunner = Callable[[RebaseState, Cache], dict[str, Any] | None]


@dataclass
class Outcome:
    """What a rebase command did."""

    status: Status
    target: str
    output: str
    report: dict[str, Any] = field(default_factory=dict)
    markdown: str = ""
    files: list[Path] = field(default_factory=list)
    stop: replay.Stop | None = None


# --------------------------------------------------------------------------- commands


def start(
    workspace: Workspace,
    cache: Cache,
    target_name: str,
    onto: Sequence[str],
    *,
    new_target: str | None = None,
    cwd: Path | None = None,
    audit: AuditRunner | None = None,
) -> Outcome:
    """Rebase ``target_name`` onto the ``onto`` pins (see the module doc)."""
    began = time.monotonic()
    if not onto:
        raise ConfigError("rebase needs at least one --onto PIN (e.g. --onto vllm==0.26.0)")
    _refuse_in_progress(workspace, target_name)
    output = new_target or target_name
    with _locked(workspace, target_name, output):
        target = load_target(workspace.patches, target_name)
        lock = locked_pins(target)
        if new_target:
            _check_new_target(workspace, target, new_target)
        out_root = workspace.patches / output
        changes, warnings = onto_mod.plan_changes(
            target, onto, cwd=cwd or Path.cwd(), out_root=out_root
        )
        if not changes:
            reasons = [f"{s.key} is already pinned to {s.pin.text!r}" for s in target.pin_specs]
            console.status(
                f"[green]nothing to rebase[/]: the --onto pins are the pins of {target_name} "
                "already; no file written"
            )
            return Outcome(
                "unchanged",
                target_name,
                output,
                report=report.unchanged_report(target_name, onto, reasons),
            )
        for warning in warnings:
            console.status(f"[yellow]warning:[/] {warning}")
        resolved = _resolve(changes, cache)
        state = _new_state(workspace, target, lock, changes, resolved, onto, output, warnings)
        take_backup(state, target.root)
        state.save()
        try:
            _prepare(state, target, lock, changes, resolved, cache)
        except BaseException:
            console.status("[red]rebase failed while preparing[/]: restoring everything")
            _undo(state)
            raise
        state.phase = "replay"
        began = _clock(state, began)
        state.save()
        return _run(state, cache, audit, began)


def resume(
    workspace: Workspace, cache: Cache, target_name: str | None, *, audit: AuditRunner | None = None
) -> Outcome:
    """``--continue``: take the resolution of the stopped patch and go on."""
    began = time.monotonic()
    state = _find(workspace, target_name)
    with _locked(workspace, state.target, state.output):
        _recover(state)
        if state.phase == "prepare":
            raise ConfigError(
                f"the rebase of {state.target} was interrupted while preparing; undo it with "
                f"`patchwheel rebase --target {state.target} --abort` and start again"
            )
        if state.phase == "replay":
            project = _stopped(state)
            if project is not None:
                record = project.current
                assert record is not None
                replay.resolve_current(project, _loader(state, project)(record.name))
                console.status(f"{project.name} {record.name}: {record.resolution}")
                state.save()
        return _run(state, cache, audit, began)


def skip(
    workspace: Workspace, cache: Cache, target_name: str | None, *, audit: AuditRunner | None = None
) -> Outcome:
    """``--skip``: drop the stopped patch from the series and go on."""
    began = time.monotonic()
    state = _find(workspace, target_name)
    with _locked(workspace, state.target, state.output):
        _recover(state)
        project = _stopped(state) if state.phase == "replay" else None
        if project is None:
            raise ConfigError(f"the rebase of {state.target} is not stopped at a patch to skip")
        record = project.current
        assert record is not None
        replay.skip_current(project)
        console.status(f"{project.name} {record.name}: [yellow]skipped[/] (dropped)")
        state.save()
        return _run(state, cache, audit, began)


def abort(workspace: Workspace, target_name: str | None) -> Outcome:
    """``--abort``: put the target, its lock and the vendor trees back exactly as before."""
    state = _find(workspace, target_name)
    with _locked(workspace, state.target, state.output):
        _recover(state)
        _undo(state)
    console.status(f"[green]rebase of {state.target} aborted[/]: everything is as before")
    return Outcome("aborted", state.target, state.output)


# --------------------------------------------------------------------------- start


def _refuse_in_progress(workspace: Workspace, target_name: str) -> None:
    state = load(workspace.vendor, target_name)
    if state is not None:
        raise ConfigError(
            f"a rebase of {target_name} onto {' '.join(state.onto)} is in progress: "
            f"{next_commands(state.target)}"
        )


def next_commands(target: str) -> str:
    """The commands that finish or undo a stopped rebase."""
    base = f"patchwheel rebase --target {target}"
    return f"`{base} --continue` after resolving, `{base} --skip` to drop the patch, " + (
        f"`{base} --abort` to undo everything"
    )


def _check_new_target(workspace: Workspace, target: Target, name: str) -> None:
    if not name or "/" in name or name.startswith(".") or name != name.strip():
        raise ConfigError(f"--new-target {name!r}: not a valid target (directory) name")
    if (workspace.patches / name).exists():
        raise ConfigError(
            f"--new-target {name}: {workspace.patches / name} already exists; pick another name "
            "or rebase that target in place"
        )
    for project in target.projects:
        stale = workspace.vendor / name / project.name
        if stale.exists():
            raise ConfigError(
                f"--new-target {name}: {stale} exists (a vendor tree of a removed target?); "
                "remove it first"
            )


def _resolve(changes: Sequence[onto_mod.PinChange], cache: Cache) -> dict[str, LockedPin]:
    resolved = {}
    for change in changes:
        console.status(f"resolve {change.key}: {change.new.pin.text}")
        resolved[change.key] = resolve(change.new, cache)
    return resolved


def _new_state(
    workspace: Workspace,
    target: Target,
    lock: dict[str, LockedPin],
    changes: Sequence[onto_mod.PinChange],
    resolved: dict[str, LockedPin],
    onto: Sequence[str],
    output: str,
    warnings: list[str],
) -> RebaseState:
    new_lock = [resolved.get(spec.key, lock[spec.key]) for spec in target.pin_specs]
    toml_text = onto_mod.rewrite_target_toml(
        (target.root / TARGET_FILE).read_text("utf-8"),
        {c.key: c.new.pin.text for c in changes},
        {c.key: resolved[c.key].sha256 for c in changes},
        where=target.root / TARGET_FILE,
        default=False if output != target.name and target.default else None,
        description=onto_mod.follow_description(target.description, changes),
    )
    return RebaseState(
        target=target.name,
        output=output,
        onto=list(onto),
        patches_dir=str(workspace.patches),
        vendor_dir=str(workspace.vendor),
        build_dir=str(workspace.build),
        target_toml=toml_text,
        lock=[asdict(entry) for entry in new_lock],
        changes=[
            {
                "key": c.key,
                "old": c.old.pin.text,
                "new": c.new.pin.text,
                "why": c.why,
                "old-identity": lock[c.key].identity,
                "new-identity": resolved[c.key].identity,
            }
            for c in changes
        ],
        warnings=warnings,
        started=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _old_upstream(dest: Path, spec: PinSpec, entry: LockedPin, cache: Cache) -> vendor.Upstream:
    """The old pin's upstream; without extracting it when the vendor repo already holds it."""
    state_file = vendor_git.git_dir(dest) / vendor.STATE_FILE
    if state_file.is_file() and vendor.read_state(git.Repo(dest)).get("upstream") == entry.identity:
        return vendor.Upstream(entry.identity, spec.pin.text, epoch=0)  # nothing to import
    return upstream_of(spec, entry, cache)


def _prepare(
    state: RebaseState,
    target: Target,
    lock: dict[str, LockedPin],
    changes: Sequence[onto_mod.PinChange],
    resolved: dict[str, LockedPin],
    cache: Cache,
) -> None:
    """Bring every vendor tree to the old pins + series, then import the new upstreams."""
    by_key = {c.key: c for c in changes}
    vendor_root = Path(state.vendor_dir)
    for project in target.projects:
        key = project.source.key
        old_entry = lock[key]
        new_entry = resolved.get(key, old_entry)
        dest = vendor_root / state.output / project.name
        record = ProjectState(
            name=project.name,
            vendor=str(dest),
            affected=new_entry.identity != old_entry.identity,
            old_identity=old_entry.identity,
            new_identity=new_entry.identity,
        )
        state.projects.append(record)
        _take_vendor(record, vendor_root / target.name / project.name, state.new_target)
        state.save()
        series = read_series(project.series_dir)
        console.status(
            f"vendor {state.output}/{project.name}: prepare at {project.source.pin.text}"
        )
        vendor.prepare(dest, _old_upstream(dest, project.source, old_entry, cache), series)
        repo = git.Repo(dest)
        vstate = vendor.read_state(repo)
        record.old_upstream = str(vstate["upstream_commit"])
        if not record.affected:
            record.patches = replay.classify_kept(dest, record.old_upstream, series)
            record.position = len(record.patches)
            state.save()
            continue
        record.patches = [PatchState(n, s, c) for n, s, c in applied_entries(vstate)]
        head = vendor_git.rev(dest, "HEAD") or ""
        vendor_git.run(dest, "update-ref", OLD_HEAD_REF, head)
        new_spec = by_key[key].new
        upstream = upstream_of(new_spec, new_entry, cache)
        console.status(f"vendor {state.output}/{project.name}: import {upstream.description}")
        record.new_upstream = vendor.import_upstream(repo, upstream)
        vendor_git.set_branch(dest, vendor.PATCHED, record.new_upstream)
        record.base = record.new_upstream
        _mark(dest, state)
        state.save()


def _take_vendor(record: ProjectState, source: Path, copy: bool) -> None:
    """Record how to undo what the rebase does to the project's vendor repo (copy it if new)."""
    dest = record.path
    if copy:
        record.created = True
        if source.is_dir():
            dirty = vendor_git.status(source) if (source / ".git").is_dir() else []
            if dirty:
                raise VendorError(
                    f"vendor tree {source} has uncommitted changes ({dirty[0].strip()}): commit "
                    f"and export them (`patchwheel export`), or discard them, then rebase"
                )
            tmp = dest.with_name(f".{dest.name}.tmp-{secrets.token_hex(3)}")
            tmp.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(source, tmp, symlinks=True)
            os.replace(tmp, dest)
        return
    if not (dest / ".git").is_dir():
        record.snapshot = {"exists": False}
        return
    state_file = vendor_git.git_dir(dest) / vendor.STATE_FILE
    record.snapshot = {
        "exists": True,
        "head": vendor_git.rev(dest, "HEAD") or "",
        "upstream": vendor_git.rev(dest, f"refs/heads/{vendor.UPSTREAM}") or "",
        "state": state_file.read_text("utf-8") if state_file.is_file() else None,
    }


def _mark(repo: Path, state: RebaseState) -> None:
    marker = vendor_git.git_dir(repo) / vendor.REBASE_MARKER
    marker.write_text(
        f"`patchwheel rebase --target {state.target}` (onto {' '.join(state.onto)}) is in "
        f"progress: {next_commands(state.target)}\n"
    )


def _unmark(repo: Path) -> None:
    (vendor_git.git_dir(repo) / vendor.REBASE_MARKER).unlink(missing_ok=True)


# --------------------------------------------------------------------------- replay


def _run(state: RebaseState, cache: Cache, audit: AuditRunner | None, began: float) -> Outcome:
    if state.phase == "replay":
        for project in state.projects:
            if not project.affected or project.current is None:
                continue
            stop = replay.replay_project(project, _loader(state, project), state.save)
            began = _clock(state, began)
            state.save()
            if stop is not None:
                return Outcome("stopped", state.target, state.output, stop=stop)
        state.phase = "finish"
        state.save()
    return _finish(state, cache, audit, began)


def _clock(state: RebaseState, since: float) -> float:
    """Add the time since ``since`` to the rebase's own time (not the user's); return now."""
    now = time.monotonic()
    state.seconds += now - since
    return now


def _loader(state: RebaseState, project: ProjectState) -> Callable[[str], Patch]:
    """Old patches are read from the backup: the bytes the vendor commits were made from."""
    series_dir = backup_dir(state) / project.name

    def load_patch(name: str) -> Patch:
        return parse_patch(name, (series_dir / name).read_bytes())

    return load_patch


def _stopped(state: RebaseState) -> ProjectState | None:
    return next((p for p in state.projects if p.affected and p.stopped), None)


# --------------------------------------------------------------------------- finish


def _finish(state: RebaseState, cache: Cache, audit: AuditRunner | None, began: float) -> Outcome:
    workspace = Workspace(Path(state.patches_dir), Path(state.vendor_dir), Path(state.build_dir))
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
    _clock(state, began)
    audit_result = audit(state, cache) if audit is not None else None
    data = report.build_report(state, old, details, audit_result)
    text = report.markdown(data)
    files = _publish_report(workspace.build, state.output, data, text)
    _cleanup(state)
    console.status(
        f"[green]rebased[/] {state.target} onto {' '.join(state.onto)} → {target_dir} "
        f"({state.seconds:.1f} s)"
    )
    return Outcome("done", state.target, state.output, report=data, markdown=text, files=files)


def _old_patches(state: RebaseState, project: ProjectState) -> dict[str, Patch]:
    load_patch = _loader(state, project)
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
        write_bytes(tmp / TARGET_FILE, state.target_toml.encode("utf-8"))
        new_target = load_target(workspace.patches, tmp.name)
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


def _replace_dir(new: Path, dest: Path) -> None:
    if not dest.exists():
        os.replace(new, dest)
        return
    old = dest.with_name(f".{dest.name}.rebase-old-{secrets.token_hex(3)}")
    os.replace(dest, old)
    os.replace(new, dest)
    shutil.rmtree(old)


def _publish_report(build_dir: Path, name: str, data: dict[str, Any], text: str) -> list[Path]:
    """Add rebase.md/.json to build/<name>, swapping its link like a build does."""
    import json

    current = outputs.current(build_dir, name)
    payload = json.dumps(data, indent=2) + "\n"
    store = outputs.new_store(build_dir, name, sha256_bytes(payload.encode()))
    if current is not None:
        for path in sorted(current.rglob("*")):
            rel = path.relative_to(current)
            if rel.as_posix() in (REPORT_MD, REPORT_JSON):
                continue
            if path.is_dir():
                (store / rel).mkdir(parents=True, exist_ok=True)
            else:
                (store / rel).parent.mkdir(parents=True, exist_ok=True)
                outputs.place(path, store / rel)
    (store / REPORT_MD).write_text(text, "utf-8")
    (store / REPORT_JSON).write_text(payload, "utf-8")
    outputs.publish(build_dir, name, store)
    return [build_dir / name / REPORT_MD, build_dir / name / REPORT_JSON]


def _cleanup(state: RebaseState) -> None:
    for project in state.projects:
        if project.path.is_dir():
            _unmark(project.path)
            vendor_git.run(project.path, "update-ref", "-d", OLD_HEAD_REF, check=False)
    remove(state)


# --------------------------------------------------------------------------- abort


def _undo(state: RebaseState) -> None:
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
    _unmark(path)
    vendor_git.set_branch(path, vendor.PATCHED, snapshot["head"])
    if snapshot["upstream"]:
        vendor_git.run(path, "update-ref", f"refs/heads/{vendor.UPSTREAM}", snapshot["upstream"])
    vendor_git.run(path, "update-ref", "-d", OLD_HEAD_REF, check=False)
    state_file = vendor_git.git_dir(path) / vendor.STATE_FILE
    if snapshot["state"] is None:
        state_file.unlink(missing_ok=True)
    else:
        write_bytes(state_file, snapshot["state"].encode("utf-8"))


# --------------------------------------------------------------------------- helpers


def _recover(state: RebaseState) -> None:
    """Drop the lock files a killed git left in the vendor repos (we hold the target's lock)."""
    for project in state.projects:
        gd = vendor_git.git_dir(project.path)
        if not gd.is_dir():
            continue
        stale = [gd / "index.lock", gd / "HEAD.lock", gd / "packed-refs.lock"]
        stale += gd.joinpath("refs").rglob("*.lock")
        for path in stale:
            path.unlink(missing_ok=True)


def _find(workspace: Workspace, target_name: str | None) -> RebaseState:
    from patchwheel.rebase.state import in_progress

    if target_name is not None:
        state = load(workspace.vendor, target_name)
        if state is None:
            raise ConfigError(f"no rebase of {target_name} is in progress")
        return state
    names = in_progress(workspace.vendor)
    if len(names) != 1:
        which = ", ".join(names) if names else "none"
        raise ConfigError(f"say which rebase with --target (rebases in progress: {which})")
    state = load(workspace.vendor, names[0])
    assert state is not None
    return state


@contextlib.contextmanager
def _locked(workspace: Workspace, target: str, output: str) -> Iterator[None]:
    """Hold the target's build lock (and the new target's): builds wait for the rebase."""
    with workspace.locked(target):
        if output == target:
            yield
            return
        with workspace.locked(output):
            yield


def audit_pairs(state: RebaseState, cache: Cache) -> dict[str, Any] | None:
    """The API audit on the new pins (see :mod:`patchwheel.rebase.audit`)."""
    from patchwheel.rebase.audit import run_audits

    return run_audits(state, cache)


__all__ = [
    "Outcome",
    "abort",
    "audit_pairs",
    "next_commands",
    "resume",
    "skip",
    "start",
]
