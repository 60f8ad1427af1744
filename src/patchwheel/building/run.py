"""The build of one target: lock → fetch → vendor trees → wheels → build/<target> + build/simple.

Each buildable *unit* (a source project, or one variant of an overlay project) has a build key:
the sha256 of its pins, its patch bytes and its build settings. The local label is ``pw`` + the
key's first 8 hex digits, and the same key names its wheel in the cache — so changing any byte of
a pin or patch rebuilds, and an unchanged target rebuilds nothing.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.utils import parse_sdist_filename

from patchwheel import __version__, console
from patchwheel.config.lock import LockedPin, locked_pins
from patchwheel.config.pins import GitPin
from patchwheel.config.targets import PinSpec, Project, Target, load_target
from patchwheel.errors import BuildError, PatchError
from patchwheel.index import outputs, static
from patchwheel.patching import vendor
from patchwheel.patching.patches import Patch, missing_fields, read_series
from patchwheel.upstream import gitsrc
from patchwheel.upstream.cache import Cache, sha256_bytes, sha256_file
from patchwheel.upstream.sources import archive_epoch, artifact_path, source_tree_of
from patchwheel.wheels import overlay, source
from patchwheel.wheels.names import compose_version, parse_wheel_name
from patchwheel.wheels.writer import epoch_date_time
from patchwheel.workspace import INDEX_NAME, Workspace

BUILD_FORMAT = 1
Action = Literal["built", "cached", "copied"]


@dataclass(frozen=True)
class Unit:
    """One thing to build: a source project, or one variant of an overlay project."""

    project: Project
    variant: str | None
    distribution: str
    key: str
    entries: dict[str, LockedPin]
    patches: tuple[Patch, ...]

    @property
    def label(self) -> str:
        """The local version label this unit's wheel carries."""
        return "pw" + self.key[:8]

    @property
    def name(self) -> str:
        """``project`` or ``project:variant``."""
        return self.project.name + (f":{self.variant}" if self.variant else "")


@dataclass
class Output:
    """One artifact of a build."""

    unit: Unit
    path: Path
    action: Action
    version: str
    sha256: str
    patched: bool
    details: dict[str, Any] = field(default_factory=dict)
    filename: str = ""

    def __post_init__(self) -> None:
        self.filename = self.filename or self.path.name


@dataclass
class BuildReport:
    """What a build did; ``manifest`` is what build/<target>/manifest.json holds."""

    target: str
    up_to_date: bool
    outputs: list[Output]
    manifest: dict[str, Any]
    seconds: float


AuditHook = Callable[[Target, dict[str, Path]], dict[str, Any]]


def plan(target: Target, lock: dict[str, LockedPin]) -> list[Unit]:
    """The units of a target, with their build keys (no network, no file written)."""
    units: list[Unit] = []
    for project in target.projects:
        patches = tuple(read_series(project.series_dir))
        if project.build == "source":
            entries = {project.source.key: lock[project.source.key]}
            units.append(_unit(project, None, project.source.pin.name, entries, patches))
        for variant in project.variants:
            entries = {
                project.source.key: lock[project.source.key],
                variant.spec.key: lock[variant.spec.key],
            }
            units.append(_unit(project, variant.name, variant.distribution, entries, patches))
    return units


def _unit(
    project: Project,
    variant: str | None,
    distribution: str,
    entries: dict[str, LockedPin],
    patches: tuple[Patch, ...],
) -> Unit:
    material = {
        "format": BUILD_FORMAT,
        "patchwheel": __version__,
        "project": project.name,
        "variant": variant,
        "build": project.build,
        "pins": {key: [e.pin, e.identity] for key, e in sorted(entries.items())},
        "patches": [[p.name, p.sha256] for p in patches],
        "settings": {"wheel-root": project.wheel_root, "build-env": project.build_env},
    }
    key = sha256_bytes(json.dumps(material, sort_keys=True).encode())
    return Unit(project, variant, distribution, key, entries, patches)


def inputs_key(units: list[Unit]) -> str:
    """The hash of a whole target's inputs: equal keys mean nothing to rebuild."""
    return sha256_bytes(json.dumps([[u.name, u.key] for u in units]).encode())


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
    _warn_headers(units)
    with workspace.locked(target.name):
        existing = _up_to_date(workspace.build, target.name, key)
        if existing is not None:
            outputs.collect(workspace.build, target.name)
            console.status(
                f"[green]{target.name} is up to date[/] (inputs {key[:12]}): nothing rebuilt"
            )
            _refresh_union_index(workspace)
            return BuildReport(target.name, True, [], existing, time.monotonic() - start)
        trees = _prepare_vendor_trees(target, lock, units, workspace, cache)
        audit_result = audit(target, trees) if audit else None
        results = [_build_unit(unit, trees, cache) for unit in units]
        manifest = _manifest(target, key, units, results, audit_result)
        _publish(workspace.build, target.name, key, results, manifest)
    _refresh_union_index(workspace)
    return BuildReport(target.name, False, results, manifest, time.monotonic() - start)


def vendor_trees(target_name: str, workspace: Workspace, cache: Cache) -> dict[str, Path]:
    """Bring a target's vendor trees to upstream + series (no wheel built); by project."""
    target = load_target(workspace.patches, target_name)
    lock = locked_pins(target)
    units = plan(target, lock)
    with workspace.locked(target.name):
        return _prepare_vendor_trees(target, lock, units, workspace, cache)


def _warn_headers(units: list[Unit]) -> None:
    seen: set[str] = set()
    for unit in units:
        for patch in unit.patches:
            missing = missing_fields(patch)
            if missing and patch.name not in seen:
                seen.add(patch.name)
                console.status(
                    f"[yellow]warning:[/] patch {patch.name} lacks DEP-3 field(s) "
                    f"{', '.join(missing)}"
                )


def _up_to_date(build_dir: Path, name: str, key: str) -> dict[str, Any] | None:
    store = outputs.current(build_dir, name)
    if store is None or not (store / "manifest.json").is_file():
        return None
    manifest: dict[str, Any] = json.loads((store / "manifest.json").read_text("utf-8"))
    if manifest.get("inputs") != key:
        return None
    for wheel in manifest.get("wheels", []):
        path = store / "wheels" / wheel["filename"]
        if not path.is_file() or sha256_file(path) != wheel["sha256"]:
            return None
    return manifest


def _prepare_vendor_trees(
    target: Target,
    lock: dict[str, LockedPin],
    units: list[Unit],
    workspace: Workspace,
    cache: Cache,
) -> dict[str, Path]:
    """Bring every project's vendor tree to upstream + series; all or nothing per project."""
    trees: dict[str, Path] = {}
    series = {u.project.name: u.patches for u in units}
    for project in target.projects:
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


def upstream_of(spec: PinSpec, entry: LockedPin, cache: Cache) -> vendor.Upstream:
    """What a vendor tree's ``upstream`` branch holds for a locked source pin."""
    tree = source_tree_of(spec, entry, cache)
    git_dir = None
    if isinstance(spec.pin, GitPin):
        git_dir = str(gitsrc.mirror(spec.pin, entry.commit or "", cache).git_dir)
    return vendor.Upstream(
        identity=entry.identity,
        description=f"{spec.pin.text} ({entry.kind} {entry.identity[:12]})",
        epoch=tree.epoch,
        tree=None if git_dir else tree.path,
        git_dir=git_dir,
    )


def _build_unit(unit: Unit, trees: dict[str, Path], cache: Cache) -> Output:
    if not unit.patches and _has_artifact(unit):
        return _copy_upstream(unit, cache)
    cached = _cached_wheel(cache, unit)
    if cached is not None:
        path, meta = cached
        return Output(unit, path, "cached", meta["version"], meta["sha256"], True, meta["details"])
    with cache.staging_dir("build") as staging:
        if unit.variant is None:
            output = _source_build(unit, trees[unit.project.name], staging)
        else:
            output = _overlay_build(unit, staging, cache)
        return _store_wheel(cache, unit, output)


def _copy_upstream(unit: Unit, cache: Cache) -> Output:
    spec = _spec_of(unit)
    entry = unit.entries[spec.key]
    path = artifact_path(spec, entry, cache)
    assert entry.sha256 is not None and entry.filename is not None
    if entry.filename.endswith(".whl"):
        version = parse_wheel_name(entry.filename).version
    else:
        version = parse_sdist_filename(entry.filename)[1]
    console.status(f"{unit.name}: empty series, upstream {entry.filename} copied unchanged")
    return Output(unit, path, "copied", str(version), entry.sha256, False, filename=entry.filename)


def _has_artifact(unit: Unit) -> bool:
    """Whether the unit's upstream is a file that can be served as is (not a git tree)."""
    return unit.entries[_spec_of(unit).key].kind in ("sdist", "wheel")


def _spec_of(unit: Unit) -> PinSpec:
    """The pin whose artifact the unit starts from: the source, or the variant's wheel."""
    if unit.variant is None:
        return unit.project.source
    return next(v.spec for v in unit.project.variants if v.name == unit.variant)


def _provenance(unit: Unit) -> bytes:
    data = {
        "patchwheel": __version__,
        "build-format": BUILD_FORMAT,
        "project": unit.project.name,
        "variant": unit.variant,
        "build": unit.project.build,
        "label": unit.label,
        "build-key": unit.key,
        "pins": {
            key: {k: v for k, v in vars(e).items() if v is not None and k != "key"}
            for key, e in sorted(unit.entries.items())
        },
        "patches": [
            {"name": p.name, "sha256": p.sha256, "subject": p.subject} for p in unit.patches
        ],
    }
    return (json.dumps(data, indent=2) + "\n").encode()


def _source_build(unit: Unit, vendor_dir: Path, staging: Path) -> tuple[Path, dict[str, Any]]:
    tree = staging / "tree"
    source.export_tree(vendor_dir, tree)
    epoch = _vendor_epoch(vendor_dir)
    built = source.pep517_build(
        tree, staging / "dist", epoch=epoch, env=unit.project.build_env, what=unit.name
    )
    out = staging / "out"
    out.mkdir()
    result = source.normalize(
        built,
        out,
        label=unit.label,
        provenance=_provenance(unit),
        date_time=epoch_date_time(epoch),
    )
    details = {
        "upstream-version": result.upstream_version,
        "dropped-requirements": result.dropped_requirements,
    }
    return result.path, details


def _vendor_epoch(vendor_dir: Path) -> int:
    import git

    return int(git.Repo(vendor_dir).commit(vendor.UPSTREAM).committed_date)


def _overlay_build(unit: Unit, staging: Path, cache: Cache) -> tuple[Path, dict[str, Any]]:
    spec = _spec_of(unit)
    entry = unit.entries[spec.key]
    wheel = artifact_path(spec, entry, cache)
    assert entry.filename is not None
    upstream = parse_wheel_name(entry.filename)
    version = compose_version(upstream.version, unit.label)
    console.status(f"overlay {entry.filename} → {version}")
    out = staging / "out"
    out.mkdir()
    result = overlay.build_overlay(
        wheel,
        unit.patches,
        out,
        new_version=version,
        provenance=_provenance(unit),
        date_time=epoch_date_time(archive_epoch(wheel)),
        root=unit.project.wheel_root,
        filename=entry.filename,
    )
    details = {
        "upstream-wheel": entry.filename,
        "replaced": result.replaced,
        "added": result.added,
        "deleted": result.deleted,
        "not-in-wheel": result.skipped,
        "offsets": [str(o) for o in result.offsets],
    }
    return result.path, details


def _cached_wheel(cache: Cache, unit: Unit) -> tuple[Path, dict[str, Any]] | None:
    meta_path = cache.wheel_dir(unit.key) / "meta.json"
    if not meta_path.is_file():
        return None
    meta: dict[str, Any] = json.loads(meta_path.read_text("utf-8"))
    path = meta_path.parent / meta["filename"]
    if not path.is_file() or sha256_file(path) != meta["sha256"]:
        return None
    console.status(f"{unit.name}: {meta['filename']} reused from the cache")
    return path, meta


def _store_wheel(cache: Cache, unit: Unit, built: tuple[Path, dict[str, Any]]) -> Output:
    path, details = built
    digest = sha256_file(path)
    version = str(parse_wheel_name(path.name).version)
    final_dir = cache.wheel_dir(unit.key)
    with cache.staging_dir("wheel") as tmp:
        path.rename(tmp / path.name)
        meta = {"filename": path.name, "sha256": digest, "version": version, "details": details}
        outputs.write_json(tmp / "meta.json", meta)
        final_dir.parent.mkdir(parents=True, exist_ok=True)
        if final_dir.exists():
            shutil.rmtree(final_dir)
        tmp.rename(final_dir)
        tmp.mkdir()  # staging_dir removes it again
    console.status(f"[green]built[/] {path.name}")
    return Output(unit, final_dir / path.name, "built", version, digest, True, details)


def _manifest(
    target: Target,
    key: str,
    units: list[Unit],
    results: list[Output],
    audit_result: dict[str, Any] | None,
) -> dict[str, Any]:
    lock = {k: e for u in units for k, e in u.entries.items()}
    return {
        "schema": 1,
        "target": target.name,
        "description": target.description,
        "patchwheel": __version__,
        "inputs": key,
        "pins": {
            k: {f: v for f, v in vars(e).items() if v is not None and f != "key"}
            for k, e in lock.items()
        },
        "projects": {
            p.name: {
                "build": p.build,
                "patches": [
                    {"name": x.name, "sha256": x.sha256, "subject": x.subject, "fields": x.fields}
                    for x in next(u.patches for u in units if u.project is p)
                ],
            }
            for p in target.projects
        },
        "wheels": [
            {
                "project": r.unit.project.name,
                "variant": r.unit.variant,
                "distribution": r.unit.distribution,
                "version": r.version,
                "filename": r.filename,
                "sha256": r.sha256,
                "size": r.path.stat().st_size,
                "patched": r.patched,
                "label": r.unit.label if r.patched else None,
                "build-key": r.unit.key,
                "action": r.action,
                **({"details": r.details} if r.details else {}),
            }
            for r in results
        ],
        "audit": audit_result,
    }


def _publish(
    build_dir: Path, name: str, key: str, results: list[Output], manifest: dict[str, Any]
) -> None:
    store = outputs.new_store(build_dir, name, key)
    wheels = store / "wheels"
    wheels.mkdir()
    for result, entry in zip(results, manifest["wheels"], strict=True):
        dest = wheels / result.filename
        outputs.place(result.path, dest)
        if sha256_file(dest) != result.sha256:
            raise BuildError(f"{dest}: sha256 changed while placing it; re-run the build")
        if dest.name.endswith(".whl"):
            entry["metadata-sha256"], entry["requires-python"] = static.write_metadata_file(dest)
    artifacts = _artifacts(build_dir, name, manifest)
    static.write_index(store / "simple", build_dir / name / "simple", artifacts)
    outputs.write_json(store / "manifest.json", manifest)
    outputs.publish(build_dir, name, store)


def _artifacts(build_dir: Path, name: str, manifest: dict[str, Any]) -> list[static.Artifact]:
    return [
        static.Artifact(
            path=build_dir / name / "wheels" / wheel["filename"],
            project=wheel["distribution"],
            sha256=wheel["sha256"],
            metadata_sha256=wheel.get("metadata-sha256"),
            requires_python=wheel.get("requires-python"),
            size=wheel.get("size"),
        )
        for wheel in manifest.get("wheels", [])
    ]


def _refresh_union_index(workspace: Workspace) -> None:
    """Rebuild build/simple from every target's manifest (serialized by its own lock)."""
    build_dir = workspace.build
    with workspace.locked(INDEX_NAME):
        artifacts = [
            artifact
            for target_name, manifest in outputs.manifests(build_dir).items()
            for artifact in _artifacts(build_dir, target_name, manifest)
        ]
        key = sha256_bytes(json.dumps(sorted(str(a) for a in artifacts)).encode())
        now = outputs.current(build_dir, INDEX_NAME)
        if now is not None and now.name.startswith(f"{INDEX_NAME}.{key[:16]}."):
            return
        store = outputs.new_store(build_dir, INDEX_NAME, key)
        static.write_index(store, build_dir / INDEX_NAME, artifacts)
        outputs.publish(build_dir, INDEX_NAME, store)
