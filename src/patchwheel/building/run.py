"""The build of one target: lock → fetch → vendor trees → audit → wheels → outputs.

The outputs are ``build/<target>`` (wheels, manifest, the target's own index, the consumer set)
and ``build/simple`` (the index of every target), each replaced atomically. Before anything is
written, the new wheels' requirements are checked against the target (``consistency``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.markup import escape

from patchwheel import __version__, atomic, console
from patchwheel.building.consistency import Built, check_built_set
from patchwheel.building.hooks import AuditHook
from patchwheel.building.kernels import (
    check_target,
    from_manifest,
    gpu_record,
    recorded,
    scan_outputs,
)
from patchwheel.building.plan import Unit, check_headers, inputs_key, plan
from patchwheel.building.trees import (
    prepare_vendor_trees,
    recover_vendor_trees,
    vendor_tree_states,
)
from patchwheel.building.unit import Output, build_unit
from patchwheel.config.lock import LockedPin, locked_pins
from patchwheel.config.targets import Target, load_target
from patchwheel.errors import BuildError
from patchwheel.index import consumer, outputs, static
from patchwheel.kernels import Row
from patchwheel.manifest import Manifest, PatchEntry, PinEntry, ProjectEntry, WheelEntry, path_in
from patchwheel.patching.series import Resolved
from patchwheel.upstream.cache import Cache, sha256_bytes, sha256_file
from patchwheel.workspace import Workspace


@dataclass
class BuildReport:
    """What a build did; ``manifest`` is what build/<target>/manifest.json holds."""

    target: str
    up_to_date: bool
    outputs: list[Output]
    manifest: Manifest
    seconds: float
    # the architecture table of its CUDA modules (kernels/check.py)
    kernels: list[Row] = field(default_factory=list)


def build_target(
    target_name: str,
    workspace: Workspace,
    cache: Cache,
    *,
    audit: AuditHook | None = None,
) -> BuildReport:
    """Build one target into build/<target> and refresh build/simple."""
    start = time.monotonic()
    cache.sweep_tmp()
    target = load_target(workspace.patches, target_name)
    lock = locked_pins(target)
    units = plan(target, lock)
    key = inputs_key(units)
    check_headers(units)
    _print_series(units)
    with workspace.locked(target.name):
        # A killed run's half-applied vendor tree goes back to its last good state first:
        # nothing is decided on a tree in that state.
        recover_vendor_trees(target, workspace)
        existing = outputs.up_to_date(workspace.build, target.name, key)
        if (
            existing is not None
            and existing.generation == target.generation
            and _consumer_current(workspace.build, target, existing)
            and recorded(existing, target)
        ):
            _vendor_trees_to_series(target, lock, units, workspace, cache)
            outputs.settle(workspace.build, target.name)
            console.status(
                f"[green]{target.name} is up to date[/] (inputs {key[:12]}): nothing rebuilt"
            )
            table = check_target(target, from_manifest(existing.wheels))
            return BuildReport(target.name, True, [], existing, time.monotonic() - start, table)
        trees = prepare_vendor_trees(target, lock, units, workspace, cache)
        audit_result = audit(target, trees) if audit else None
        results = [build_unit(unit, trees, cache) for unit in units]
        check_built_set(
            target, [Built(r.unit.distribution, r.version, r.path, r.filename) for r in results]
        )
        records = scan_outputs(results, cache)
        table = check_target(target, records)
        manifest = _manifest(target, key, units, results, audit_result)
        manifest = replace(
            manifest,
            wheels=tuple(
                replace(w, kernels=k.to_json() if k is not None else None)
                for w, k in zip(manifest.wheels, records, strict=True)
            ),
            gpu=gpu_record(target, table),
        )
        manifest = _store(workspace.build, target, key, results, manifest)
    return BuildReport(target.name, False, results, manifest, time.monotonic() - start, table)


def _series_json(series: Resolved | None) -> dict[str, Any] | None:
    return series.to_json() if series is not None and series.entries else None


def _print_series(units: list[Unit]) -> None:
    """Each project's series as this target resolves it: applied (and for which variants), or
    left out by its gate."""
    printed: set[str] = set()
    for unit in units:
        if unit.series is None or unit.project.name in printed:
            continue
        printed.add(unit.project.name)
        if unit.series.entries:
            for line in unit.series.lines():
                console.status(escape(line))


def _vendor_trees_to_series(
    target: Target,
    lock: dict[str, LockedPin],
    units: list[Unit],
    workspace: Workspace,
    cache: Cache,
) -> None:
    """With up-to-date outputs: vendor trees at other inputs (a killed run's, say) go back to
    the series; a tree holding someone's work (edits, commits, a rebase) is left, and said so.
    """
    states = vendor_tree_states(target, lock, units, workspace)
    stale = [name for name, (state, _) in states.items() if state == "stale"]
    if stale:
        prepare_vendor_trees(target, lock, units, workspace, cache, only=stale)
    for name, (state, why) in states.items():
        if state == "held":
            console.status(f"[yellow]note:[/] vendor tree {name} left as it is: {escape(why)}")


def vendor_trees(target_name: str, workspace: Workspace, cache: Cache) -> dict[str, Path]:
    """Bring a target's vendor trees to upstream + series (no wheel built); by project."""
    target = load_target(workspace.patches, target_name)
    lock = locked_pins(target)
    units = plan(target, lock)
    with workspace.locked(target.name):
        recover_vendor_trees(target, workspace)
        return prepare_vendor_trees(target, lock, units, workspace, cache)


def _manifest(
    target: Target,
    key: str,
    units: list[Unit],
    results: list[Output],
    audit_result: dict[str, Any] | None,
) -> Manifest:
    lock = {k: e for u in units for k, e in u.entries.items()}
    return Manifest(
        target=target.name,
        description=target.description,
        generation=target.generation,
        patchwheel=__version__,
        inputs=key,
        pins={
            k: PinEntry(e.pin, e.kind, e.sha256, e.filename, e.size, e.url, e.rev, e.commit)
            for k, e in lock.items()
        },
        projects={
            p.name: ProjectEntry(
                p.build,
                tuple(
                    PatchEntry(x.name, x.sha256, x.subject, x.fields)
                    for x in next(u.tree_patches for u in units if u.project is p)
                ),
                _series_json(next(u.series for u in units if u.project is p)),
            )
            for p in target.projects
        },
        wheels=tuple(
            WheelEntry(
                project=r.unit.project.name,
                variant=r.unit.variant,
                distribution=r.unit.distribution,
                version=r.version,
                filename=r.filename,
                sha256=r.sha256,
                size=r.path.stat().st_size,
                patched=r.patched,
                label=r.unit.label if r.patched else None,
                build_key=r.unit.key,
                action=r.action,
                details=r.details,
            )
            for r in results
        ),
        audit=audit_result,
    )


def _consumer_current(build_dir: Path, target: Target, existing: Manifest) -> bool:
    """Whether build/<target> holds the consumer set this target.toml and patchwheel make."""
    store = outputs.current(build_dir, target.name)
    expected = consumer.consumer_files(target, existing.wheels)
    if store is None or set(existing.consumer) != set(expected):
        return False
    for name, text in expected.items():
        path = store / name
        data = text.encode()
        if not path.is_file() or path.read_bytes() != data:
            return False
        if existing.consumer[name] != sha256_bytes(data):
            return False
    return True


def _store(
    build_dir: Path, target: Target, key: str, results: list[Output], manifest: Manifest
) -> Manifest:
    """Write a new store for ``build/<name>`` (wheels, metadata files, index, consumer set,
    manifest)."""
    name = target.name
    store = outputs.new_store(build_dir, name, key)
    wheels = store / "wheels"
    wheels.mkdir()
    entries = []
    for result, entry in zip(results, manifest.wheels, strict=True):
        dest = outputs.store_file(store, result.filename)
        outputs.place(result.path, dest)
        if sha256_file(dest) != result.sha256:
            raise BuildError(f"{dest}: sha256 changed while placing it; re-run the build")
        if dest.name.endswith(".whl"):
            metadata_sha256, requires_python = static.write_metadata_file(dest)
            entries.append(
                replace(entry, metadata_sha256=metadata_sha256, requires_python=requires_python)
            )
        else:
            entries.append(entry)
    files = consumer.consumer_files(target, entries)
    for filename, text in files.items():
        atomic.write_text(store / filename, text)
    manifest = replace(
        manifest,
        wheels=tuple(entries),
        consumer={f: sha256_bytes(t.encode()) for f, t in files.items()},
    )
    listed = outputs.artifacts(build_dir, name, manifest)
    static.write_index(store / "simple", build_dir / name / "simple", listed)
    atomic.write_json(path_in(store), manifest.to_json())
    outputs.activate(build_dir, name, store)
    return manifest
