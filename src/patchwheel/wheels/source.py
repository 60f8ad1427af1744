"""Source builds: a PEP 517 build (pypa/build) of the patched vendor tree, then normalized.

Normalizing makes the wheel reproducible and honest whatever the backend did: the version is
the pinned one plus the local label, every member is rewritten in a fixed order with the pin's
timestamp, ``file://`` requirements (which some dev builds add) are dropped, extras are pinned
to the target's builds (wheels/extras.py), and a provenance file joins the dist-info.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import git

from patchwheel import console
from patchwheel.errors import BuildError
from patchwheel.wheels.extras import ExtrasRewrite, PinnedExtra, pin_extras
from patchwheel.wheels.names import (
    compose_version,
    find_dist_info,
    parse_wheel_name,
    wheel_filename,
)
from patchwheel.wheels.record import SIGNATURE_FILES
from patchwheel.wheels.writer import DateTime, WheelWriter, set_metadata_version

PROVENANCE = "patchwheel.json"
DIST_INFO_ORDER = ("METADATA", "WHEEL", "entry_points.txt", "top_level.txt")


@dataclass
class SourceResult:
    """The normalized wheel and what normalizing changed."""

    path: Path
    upstream_version: str
    dropped_requirements: list[str] = field(default_factory=list)
    extras: ExtrasRewrite = field(default_factory=lambda: ExtrasRewrite((), ()))


def export_tree(vendor_dir: Path, dest: Path) -> None:
    """Write the committed HEAD of a vendor tree to ``dest`` (no .git, no stray files)."""
    repo = git.Repo(vendor_dir)
    tar_path = dest.with_suffix(".tar")
    with tar_path.open("wb") as fh:
        repo.archive(fh, treeish="HEAD", format="tar")
    try:
        with tarfile.open(tar_path) as tar:
            tar.extractall(dest, filter="data")
    finally:
        tar_path.unlink(missing_ok=True)


def pep517_build(tree: Path, out_dir: Path, *, epoch: int, env: dict[str, str], what: str) -> Path:
    """Build a wheel from a source tree with pypa/build (isolated environment)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    build_env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch), **env}
    console.status(f"build {what}: PEP 517 wheel build")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out_dir), str(tree)],
        env=build_env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        raise BuildError(f"{what}: the PEP 517 build failed (exit {proc.returncode}):\n{tail}")
    wheels = sorted(out_dir.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"{what}: the build produced {len(wheels)} wheels, expected one")
    return wheels[0]


def normalize(
    built: Path,
    out_dir: Path,
    *,
    label: str,
    provenance: bytes,
    date_time: DateTime,
    extras: tuple[PinnedExtra, ...] = (),
    distributions: tuple[str, ...] = (),
) -> SourceResult:
    """Rewrite a freshly built wheel: labelled version, fixed order and timestamps, new RECORD.

    The label is composed with the version the backend wrote, so a git build's own version
    (``0.4.0.dev12+g1a2b3c4``) is kept and labelled.
    """
    name = parse_wheel_name(built.name)
    with zipfile.ZipFile(built) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        old_dist_info = find_dist_info((i.filename for i in infos), name.distribution)
        new_version = compose_version(name.version, label)
        new_dist_info = f"{name.distribution}-{new_version}.dist-info"
        metadata, dropped = _drop_file_requirements(zf.read(f"{old_dist_info}/METADATA"))
        metadata, rewrite = pin_extras(metadata, extras, distributions)
        metadata = set_metadata_version(metadata, new_version)
        payload = sorted(
            (i for i in infos if not i.filename.startswith(old_dist_info + "/")),
            key=lambda i: i.filename,
        )
        dist_files = {
            i.filename.split("/", 1)[1]: i
            for i in infos
            if i.filename.startswith(old_dist_info + "/")
        }
        filename = wheel_filename(name.distribution, new_version, name.tag_string)
        final = out_dir / filename
        tmp = out_dir / f".{filename}.tmp"
        try:
            with tmp.open("wb") as fh:
                writer = WheelWriter(fh)
                for info in payload:
                    data = zf.read(info)
                    writer.write(info.filename, data, date_time=date_time, mode=_mode(info))
                for rest in _dist_info_order(dist_files):
                    data = metadata if rest == "METADATA" else zf.read(dist_files[rest])
                    writer.write(f"{new_dist_info}/{rest}", data, date_time=date_time)
                writer.write(f"{new_dist_info}/{PROVENANCE}", provenance, date_time=date_time)
                writer.finish(new_dist_info, date_time=date_time)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
    return SourceResult(
        path=final,
        upstream_version=str(name.version),
        dropped_requirements=dropped,
        extras=rewrite,
    )


def _mode(info: zipfile.ZipInfo) -> int:
    mode = (info.external_attr >> 16) & 0o777
    return 0o755 if mode & 0o111 else 0o644


def _dist_info_order(files: dict[str, zipfile.ZipInfo]) -> list[str]:
    names = [n for n in files if n != "RECORD" and n not in SIGNATURE_FILES and n != PROVENANCE]
    first = [n for n in DIST_INFO_ORDER if n in names]
    return first + sorted(set(names) - set(first))


def _drop_file_requirements(metadata: bytes) -> tuple[bytes, list[str]]:
    """Remove ``Requires-Dist: x @ file://…`` lines: a local path means nothing to users."""
    kept: list[bytes] = []
    dropped: list[str] = []
    in_headers = True
    for line in metadata.split(b"\n"):
        if in_headers and not line.strip():
            in_headers = False
        if in_headers and line.startswith(b"Requires-Dist:") and b"file:" in line:
            dropped.append(line.decode("utf-8", "replace").split(":", 1)[1].strip())
            continue
        kept.append(line)
    return b"\n".join(kept), dropped
