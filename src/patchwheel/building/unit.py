"""One unit's artifact: upstream copied unchanged (empty series, no pinned extras, not
``always-build``), a wheel reused from the cache, or built (PEP 517 source build, or overlay)
and stored in the cache under its build key.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import git
from packaging.utils import parse_sdist_filename

from patchwheel import __version__, atomic, console
from patchwheel.building.plan import BUILD_FORMAT, Unit, start_pin
from patchwheel.patching import vendor
from patchwheel.upstream.cache import Cache, sha256_file
from patchwheel.upstream.sources import archive_epoch, artifact_path
from patchwheel.wheels import overlay, source
from patchwheel.wheels.names import compose_version, parse_wheel_name
from patchwheel.wheels.writer import epoch_date_time

Action = Literal["built", "cached", "copied"]


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


def build_unit(unit: Unit, trees: dict[str, Path], cache: Cache) -> Output:
    """The unit's artifact: upstream copied (empty series, no pinned extras), the cached wheel,
    or a new build (pinned extras rewrite the METADATA even with an empty series; a project
    that says ``always-build`` is built from its sources all the same)."""
    if (
        not unit.patches
        and not unit.extras
        and not unit.project.always_build
        and _has_artifact(unit)
    ):
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
    spec = start_pin(unit)
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
    return unit.entries[start_pin(unit).key].kind in ("sdist", "wheel")


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
    if unit.extras:
        data["extras"] = {e.name: list(e.requires) for e in unit.extras}
    return (json.dumps(data, indent=2) + "\n").encode()


def _source_build(unit: Unit, vendor_dir: Path, staging: Path) -> tuple[Path, dict[str, Any]]:
    tree = staging / _tree_name(unit)
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
        extras=unit.extras,
        distributions=unit.distributions,
    )
    details: dict[str, Any] = {
        "upstream-version": result.upstream_version,
        "dropped-requirements": result.dropped_requirements,
    }
    if unit.extras:
        details["extras"] = result.extras.record()
    return result.path, details


def _tree_name(unit: Unit) -> str:
    """The folder a source build runs in: an sdist's own root, ``<name>-<version>`` (as pip
    extracts it), else ``tree``. Build scripts read it: speculators' and hs-connectors'
    ``setup.py`` keep the release version of their sdist only in a folder named that way, and
    otherwise rewrite it from git tags the sdist does not have (a nightly version and
    requirement)."""
    entry = unit.entries[unit.project.source.key]
    if entry.kind == "sdist" and entry.filename:
        for suffix in (".tar.gz", ".zip"):
            if entry.filename.endswith(suffix):
                return entry.filename[: -len(suffix)]
    return "tree"


def _vendor_epoch(vendor_dir: Path) -> int:
    return int(git.Repo(vendor_dir).commit(vendor.UPSTREAM).committed_date)


def _overlay_build(unit: Unit, staging: Path, cache: Cache) -> tuple[Path, dict[str, Any]]:
    spec = start_pin(unit)
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
        extras=unit.extras,
        distributions=unit.distributions,
    )
    details: dict[str, Any] = {
        "upstream-wheel": entry.filename,
        "replaced": result.replaced,
        "added": result.added,
        "deleted": result.deleted,
        "not-in-wheel": result.skipped,
        "offsets": [str(o) for o in result.offsets],
    }
    if unit.extras:
        details["extras"] = result.extras.record()
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
        atomic.write_json(tmp / "meta.json", meta)
        final_dir.parent.mkdir(parents=True, exist_ok=True)
        if final_dir.exists():
            shutil.rmtree(final_dir)
        tmp.rename(final_dir)
        tmp.mkdir()  # staging_dir removes it again
    console.status(f"[green]built[/] {path.name}")
    return Output(unit, final_dir / path.name, "built", version, digest, True, details)
