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
import shlex
import time
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from patchwheel import console
from patchwheel.config.lock import locked_pins
from patchwheel.config.targets import MissingPolicy, Target, load_target
from patchwheel.errors import ConfigError
from patchwheel.patching import vendor_git
from patchwheel.rebase import missing as missing_mod
from patchwheel.rebase import onto as onto_mod
from patchwheel.rebase import replay, report
from patchwheel.rebase.audit import run_audits
from patchwheel.rebase.finish import AuditRunner, finish, patch_loader
from patchwheel.rebase.prepare import new_state, next_commands, prepare, resolve_moves
from patchwheel.rebase.state import (
    ProjectState,
    RebaseState,
    in_progress,
    load,
    take_backup,
)
from patchwheel.rebase.undo import undo
from patchwheel.upstream.cache import Cache
from patchwheel.workspace import Workspace, check_target_name

Status = Literal["done", "stopped", "unchanged", "aborted"]


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
    pins: Mapping[str, onto_mod.KeyPin] | None = None,
    versions: Mapping[str, str] | None = None,
    missing: Mapping[str, MissingPolicy] | None = None,
    missing_variants: Sequence[missing_mod.MissingVariant] = (),
    rerun: Sequence[str] = (),
    undo_command: str = "",
) -> Outcome:
    """Rebase ``target_name`` onto the ``onto`` pins (see the module doc).

    ``pins`` sets pins by lock key (what a roll does); ``versions`` records, per lock key, the
    version a new pin carries where the pin does not say it (a channel's commit), which the
    patches' ``Drop-When`` predicates are read against. ``missing`` answers, by lock key, for
    variants whose new version has no wheel (``--missing``; else each variant's own policy);
    ``missing_variants``: such variants the caller already answered (a roll's discovery).
    ``rerun``: the command that makes this move again (default: this rebase's), from which the
    report writes the exact command that keeps a variant dropped by default; ``undo_command``:
    what undoes the move before that command (default: remove the new target, or git checkout).
    """
    began = time.monotonic()
    if not onto and not pins:
        raise ConfigError("rebase needs at least one --onto PIN (e.g. --onto vllm==0.26.0)")
    check_target_name(target_name)
    if new_target is not None:
        check_target_name(new_target, "--new-target")
    _refuse_in_progress(workspace, target_name)
    output = new_target or target_name
    with _locked(workspace, target_name, output):
        target = load_target(workspace.patches, target_name)
        lock = locked_pins(target)
        if new_target:
            _check_new_target(workspace, target, new_target)
        out_root = workspace.patches / output
        changes, warnings = onto_mod.plan_changes(
            target, onto, cwd=cwd or Path.cwd(), out_root=out_root, by_key=pins
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
        changes, resolved, found = resolve_moves(target, changes, cache, missing or {})
        for key, version in (versions or {}).items():
            if key in resolved:
                resolved[key] = replace(resolved[key], version=version)
        described = [*onto, *(f"{k} = {p.pin}" for k, p in (pins or {}).items())]
        state = new_state(
            workspace,
            target,
            lock,
            changes,
            resolved,
            described,
            output,
            warnings,
            [*missing_variants, *found],
        )
        state.rerun = list(rerun) or _rerun(target_name, onto, new_target, missing or {})
        state.undo = undo_command
        take_backup(state, target.root, {p.name: p.series_dir for p in target.projects if p.pool})
        state.save()
        try:
            prepare(state, target, lock, changes, resolved, cache)
        except BaseException:
            console.status("[red]rebase failed while preparing[/]: restoring everything")
            undo(state)
            raise
        state.phase = "replay"
        began = state.clock(began)
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
                replay.resolve_current(project, patch_loader(state, project)(record.name))
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
        undo(state)
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


def _rerun(
    target: str, onto: Sequence[str], new_target: str | None, missing: Mapping[str, MissingPolicy]
) -> list[str]:
    """The command that makes this rebase again (for the report's next steps)."""
    words = ["nox -s rebase --", "--target", target]
    words += [w for pin in onto for w in ("--onto", shlex.quote(pin))]
    if new_target:
        words += ["--new-target", new_target]
    words += [f"--missing {key}={policy}" for key, policy in missing.items()]
    return words


def _check_new_target(workspace: Workspace, target: Target, name: str) -> None:
    check_target_name(name, "--new-target")
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


# --------------------------------------------------------------------------- replay


def _run(state: RebaseState, cache: Cache, audit: AuditRunner | None, began: float) -> Outcome:
    if state.phase == "replay":
        for project in state.projects:
            if not project.affected or project.current is None:
                continue
            stop = replay.replay_project(
                project,
                patch_loader(state, project),
                state.save,
                report.build_versions(state),
                new_variants(state, project.name),
            )
            began = state.clock(began)
            state.save()
            if stop is not None:
                return Outcome("stopped", state.target, state.output, stop=stop)
        state.phase = "finish"
        state.save()
    data, text, files = finish(state, cache, audit, began)
    return Outcome("done", state.target, state.output, report=data, markdown=text, files=files)


def new_variants(state: RebaseState, project: str) -> list[str] | None:
    """The project's variants in the rebased target (None: it has none, a source project)."""
    data = tomllib.loads(state.target_toml)
    projects = data.get("projects", {})
    table = projects.get(project, {}) if isinstance(projects, dict) else {}
    variants = table.get("variants") if isinstance(table, dict) else None
    return list(variants) if isinstance(variants, dict) else None


def _stopped(state: RebaseState) -> ProjectState | None:
    return next((p for p in state.projects if p.affected and p.stopped), None)


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
