"""The start of a rebase: the new pins resolved, the state recorded, every vendor tree prepared
at the old pins and, where the source moved, the new upstream imported (steps 1 and 2 of
:mod:`patchwheel.rebase.run`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import git
from rich.markup import escape

from patchwheel import console
from patchwheel.building.trees import upstream_of
from patchwheel.config.lock import LockedPin
from patchwheel.config.targets import TARGET_FILE, MissingPolicy, PinSpec, Target
from patchwheel.errors import NotOnIndexError, VendorError
from patchwheel.patching import series as series_mod
from patchwheel.patching import vendor, vendor_git
from patchwheel.patching.export import (
    applied_entries,
)
from patchwheel.patching.gates import pin_versions
from patchwheel.patching.patches import Patch
from patchwheel.rebase import missing as missing_mod
from patchwheel.rebase import onto as onto_mod
from patchwheel.rebase import replay, rerere
from patchwheel.rebase.state import (
    PatchState,
    ProjectState,
    RebaseState,
)
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.resolve import resolve
from patchwheel.workspace import Workspace

OLD_HEAD_REF = "refs/patchwheel/rebase-old-head"


def next_commands(target: str) -> str:
    """The commands that finish or undo a stopped rebase."""
    base = f"patchwheel rebase --target {target}"
    return f"`{base} --continue` after resolving, `{base} --skip` to drop the patch, " + (
        f"`{base} --abort` to undo everything"
    )


def resolve_changes(changes: Sequence[onto_mod.PinChange], cache: Cache) -> dict[str, LockedPin]:
    """Resolve each new pin (network), in the order of the changes."""
    resolved = {}
    for change in changes:
        console.status(f"resolve {change.key}: {change.new.pin.text}")
        resolved[change.key] = resolve(change.new, cache)
    return resolved


def resolve_moves(
    target: Target,
    changes: Sequence[onto_mod.PinChange],
    cache: Cache,
    overrides: Mapping[str, MissingPolicy],
) -> tuple[list[onto_mod.PinChange], dict[str, LockedPin], list[missing_mod.MissingVariant]]:
    """Resolve each new pin (network); a variant that followed its project's new version but
    has no wheel of it is answered by its ``missing`` policy (kept: its change is withdrawn;
    dropped: left out of the result) instead of stopping the rebase."""
    variants = {v.spec.key: v for p in target.projects for v in p.variants}
    kept: list[onto_mod.PinChange] = []
    resolved: dict[str, LockedPin] = {}
    found: list[missing_mod.MissingVariant] = []
    for change in changes:
        console.status(f"resolve {change.key}: {change.new.pin.text}")
        try:
            resolved[change.key] = resolve(change.new, cache)
        except NotOnIndexError as exc:
            if not change.derived or change.key not in variants:
                raise
            version = getattr(change.new.pin, "version", change.new.pin.text)
            answer = missing_mod.decide(variants[change.key], version, str(exc), overrides)
            console.status(f"[yellow]warning:[/] {escape(answer.sentence('the result'))}")
            found.append(answer)
            continue
        kept.append(change)
    return kept, resolved, found


def new_state(
    workspace: Workspace,
    target: Target,
    lock: dict[str, LockedPin],
    changes: Sequence[onto_mod.PinChange],
    resolved: dict[str, LockedPin],
    onto: Sequence[str],
    output: str,
    warnings: list[str],
    missing: Sequence[missing_mod.MissingVariant] = (),
) -> RebaseState:
    """The rebase's state at its start: new target.toml and lock, the changes, no projects.

    ``missing``: variants the new version has no wheel of; the dropped ones leave the result."""
    dropped = [m for m in missing if m.policy == "drop"]
    gone = {m.key for m in dropped}
    new_lock = [
        resolved.get(spec.key, lock[spec.key]) for spec in target.pin_specs if spec.key not in gone
    ]
    toml_text = onto_mod.rewrite_target_toml(
        (target.root / TARGET_FILE).read_text("utf-8"),
        {c.key: c.new.pin.text for c in changes},
        {c.key: resolved[c.key].sha256 for c in changes},
        where=target.root / TARGET_FILE,
        default=False if output != target.name and target.default else None,
        description=onto_mod.follow_description(target.description, changes),
        declare=[c.key for c in changes if c.new.sha256],
    )
    toml_text = missing_mod.drop_variants(toml_text, dropped, where=str(target.root / TARGET_FILE))
    moved = {c.key for c in changes}
    warnings += gated_changes(target, lock, new_lock, toml_text, moved)
    for project in target.projects:
        if project.pool and project.source.key in moved:
            toml_text = unpool(toml_text, project.name)
            warnings.append(
                f"{project.name} leaves pool {project.pool} (its pin moves): the rebased series "
                f"is patches/{output}/{project.name}/; when another target builds the same "
                "release, make it that release's pool (patches/README.md)"
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
        missing=[m.to_dict() for m in missing],
    )


def _old_upstream(dest: Path, spec: PinSpec, entry: LockedPin, cache: Cache) -> vendor.Upstream:
    """The old pin's upstream; without extracting it when the vendor repo already holds it."""
    state_file = vendor_git.git_dir(dest) / vendor.STATE_FILE
    if state_file.is_file() and vendor.read_state(git.Repo(dest)).get("upstream") == entry.identity:
        return vendor.Upstream(entry.identity, spec.pin.text, epoch=0)  # nothing to import
    return upstream_of(spec, entry, cache)


def prepare(
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
        series = series_mod.resolve(project, lock).patches
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
        rerere.enable(dest)
        record.remembered = rerere.load(dest, project.series_dir)
        _touched_upstream(record, series)
        mark(dest, state)
        state.save()


def gated_changes(
    target: Target,
    lock: dict[str, LockedPin],
    new_lock: Sequence[LockedPin],
    toml_text: str,
    moved: Collection[str],
) -> list[str]:
    """For each project whose sources stay (its series is not replayed), the patches its gates
    take in or leave out at the new pins and variants: what the next build applies differently."""
    out = []
    data = tomllib.loads(toml_text)
    versions = pin_versions(new_lock)
    for project in target.projects:
        if project.source.key in moved:
            continue
        table = data.get("projects", {}).get(project.name, {})
        variants = list(table.get("variants", {})) if project.variants else []
        before = series_mod.resolve(project, lock)
        after = series_mod.resolve_patches(
            project, [e.patch for e in before.entries], versions, variants
        )
        for old, new in zip(before.entries, after.entries, strict=True):
            if old.applied and not new.applied:
                out.append(
                    f"{project.name}: {new.patch.name} is left out at the new pins: {new.why}"
                )
            elif new.applied and not old.applied:
                name = f"{project.name}: {new.patch.name}"
                out.append(f"{name} applies at the new pins (it did not: {old.why})")
    return out


def unpool(text: str, project: str) -> str:
    """``target.toml`` without the project's ``pool`` line (and the comment right above it)."""
    out: list[str] = []
    table = ""
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("["):
            table = stripped
        if table == f"[projects.{project}]" and stripped.startswith("pool") and "=" in stripped:
            if out and out[-1].lstrip().startswith("#") and "pools/" in out[-1]:
                out.pop()
            continue
        out.append(line)
    return "".join(out)


def _touched_upstream(record: ProjectState, series: Sequence[Patch]) -> None:
    """Note, per patch, the files it touches that changed between the old and new upstream."""
    changed = set(vendor_git.changed_paths(record.path, record.old_upstream, record.new_upstream))
    by_name = {patch.name: patch for patch in series}
    touched = []
    for patch_state in record.patches:
        patch = by_name.get(patch_state.name)
        if patch is None:
            continue
        patch_state.touched_upstream = sorted(patch.paths() & changed)
        if patch_state.touched_upstream:
            touched.append(f"{patch_state.name} ({', '.join(patch_state.touched_upstream)})")
    console.status(
        f"{record.name}: {len(changed)} file(s) changed upstream; "
        + (
            f"{len(touched)} of {len(record.patches)} patch(es) touch them: " + "; ".join(touched)
            if touched
            else "no patch touches them"
        )
    )


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
    record.snapshot = vendor_snapshot(dest)


def vendor_snapshot(dest: Path) -> dict[str, Any]:
    """What undoes a rebase's (or a roll's) changes to a vendor repo: its refs, its vendor
    state and its git config (rerere is turned on in it), or that it did not exist."""
    if not (dest / ".git").is_dir():
        return {"exists": False}
    git_dir = vendor_git.git_dir(dest)
    state_file = git_dir / vendor.STATE_FILE
    config = git_dir / "config"
    return {
        "exists": True,
        "head": vendor_git.rev(dest, "HEAD") or "",
        "upstream": vendor_git.rev(dest, f"refs/heads/{vendor.UPSTREAM}") or "",
        "state": state_file.read_text("utf-8") if state_file.is_file() else None,
        "config": config.read_text("utf-8") if config.is_file() else None,
    }


def mark(repo: Path, state: RebaseState) -> None:
    """Mark a vendor repo as in the middle of this rebase (builds and exports refuse it)."""
    marker = vendor_git.git_dir(repo) / vendor.REBASE_MARKER
    marker.write_text(
        f"`patchwheel rebase --target {state.target}` (onto {' '.join(state.onto)}) is in "
        f"progress: {next_commands(state.target)}\n"
    )


def unmark(repo: Path) -> None:
    """Remove the rebase mark of a vendor repo."""
    (vendor_git.git_dir(repo) / vendor.REBASE_MARKER).unlink(missing_ok=True)
