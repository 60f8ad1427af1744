"""Overlay builds: an upstream binary wheel with its patched files replaced, nothing recompiled.

The series is applied to the wheel's *own* copy of each file (a CPU wheel's platform detection
differs from the sdist's), strictly, in memory. Members the series does not change are copied
byte for byte without recompressing; the dist-info is renamed to the new version, METADATA's
version rewritten, RECORD regenerated, WHEEL tags kept.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from patchwheel.errors import BuildError, PatchError
from patchwheel.patching.apply import apply_patch
from patchwheel.patching.patches import Offset, Patch
from patchwheel.wheels.extras import ExtrasRewrite, PinnedExtra, pin_extras
from patchwheel.wheels.names import find_dist_info, parse_wheel_name, wheel_filename
from patchwheel.wheels.record import SIGNATURE_FILES, read_record, record_hash
from patchwheel.wheels.writer import DateTime, WheelWriter, set_metadata_version

COMPILED_DIRS = ("csrc/",)
COMPILED_NAMES = ("CMakeLists.txt",)
COMPILED_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hip")
PROVENANCE = "patchwheel.json"


@dataclass
class OverlayResult:
    """The overlay wheel and what went into it."""

    path: Path
    replaced: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # patched paths the wheel does not ship
    offsets: list[Offset] = field(default_factory=list)
    extras: ExtrasRewrite = field(default_factory=lambda: ExtrasRewrite((), ()))


class WheelTree:
    """A :class:`patchwheel.patching.patches.Tree` over a wheel's members (changes in memory)."""

    def __init__(self, zf: zipfile.ZipFile, root: str) -> None:
        self._zf = zf
        self._root = root
        self._members = {i.filename: i for i in zf.infolist() if not i.is_dir()}
        self.changes: dict[str, bytes | None] = {}
        self.modes: dict[str, int] = {}

    def member(self, path: str) -> str:
        """The wheel member name of a source-tree path."""
        if not self._root:
            return path
        return str(PurePosixPath(path).relative_to(self._root))

    def read(self, path: str) -> bytes | None:
        """A member's current bytes (after earlier patches), or None."""
        name = self.member(path)
        if name in self.changes:
            return self.changes[name]
        info = self._members.get(name)
        return self._zf.read(info) if info else None

    def write(self, path: str, data: bytes, *, executable: bool | None) -> None:
        """Record a new version of a member."""
        name = self.member(path)
        self.changes[name] = data
        if executable is not None:
            self.modes[name] = 0o755 if executable else 0o644

    def delete(self, path: str) -> None:
        """Record a deleted member."""
        self.changes[self.member(path)] = None

    def through_symlink(self, path: str) -> bool:
        """Wheel members are never symlinks."""
        del path
        return False

    def original(self, name: str) -> bytes | None:
        """A member's bytes in the upstream wheel."""
        info = self._members.get(name)
        return self._zf.read(info) if info else None


def check_overlayable(patches: Sequence[Patch]) -> None:
    """Refuse patches that touch compiled sources: an overlay cannot rebuild kernels."""
    for patch in patches:
        for path in sorted(patch.paths()):
            if is_compiled_source(path):
                raise BuildError(
                    f"patch {patch.name} touches compiled source {path}; an overlay build reuses "
                    "upstream's compiled kernels and cannot apply it — this needs a source build "
                    '(build = "source") of the project'
                )


def is_compiled_source(path: str) -> bool:
    """Whether a path is a compiled source (kernels, C/C++, CMake)."""
    name = PurePosixPath(path).name
    return (
        path.startswith(COMPILED_DIRS)
        or "/csrc/" in path
        or name in COMPILED_NAMES
        or name.endswith(COMPILED_SUFFIXES)
    )


def shipped_paths(
    patches: Sequence[Patch], members: set[str], root: str
) -> tuple[set[str], set[str]]:
    """Split the series' paths into those the wheel ships (or adds to a shipped package) and not."""
    top_level = {name.split("/", 1)[0] for name in members}
    top_level = {t for t in top_level if not t.endswith((".dist-info", ".data"))}
    shipped: set[str] = set()
    skipped: set[str] = set()
    for patch in patches:
        for path in patch.paths():
            posix = PurePosixPath(path)
            if root and not posix.is_relative_to(root):
                skipped.add(path)
                continue
            rel = posix.relative_to(root) if root else posix
            if str(rel) in members or (rel.parts[0] in top_level and len(rel.parts) > 1):
                shipped.add(path)
            else:
                skipped.add(path)
    return shipped, skipped


def build_overlay(
    wheel: Path,
    patches: Sequence[Patch],
    out_dir: Path,
    *,
    new_version: str,
    provenance: bytes,
    date_time: DateTime,
    root: str = "",
    filename: str | None = None,
    extras: tuple[PinnedExtra, ...] = (),
    distributions: tuple[str, ...] = (),
) -> OverlayResult:
    """Write the overlay of ``wheel`` with ``patches`` into ``out_dir``.

    ``filename`` is the upstream wheel's name when ``wheel`` lies in the cache under its hash;
    ``extras`` are pinned to the target's ``distributions`` (wheels/extras.py).
    """
    check_overlayable(patches)
    upstream_name = filename or wheel.name
    name = parse_wheel_name(upstream_name)
    with wheel.open("rb") as raw, zipfile.ZipFile(raw) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        members = {i.filename for i in infos}
        shipped, skipped = shipped_paths(patches, members, root)
        tree = WheelTree(zf, root)
        result = OverlayResult(path=out_dir, skipped=sorted(skipped))
        for patch in patches:
            try:
                outcome = apply_patch(patch, tree, only=shipped)
            except PatchError as exc:
                raise PatchError(f"{exc} (applying to wheel {upstream_name})") from exc
            result.offsets.extend(outcome.offsets)
        changes = {
            member: data
            for member, data in tree.changes.items()
            if data != tree.original(member) or member in tree.modes
        }
        old_dist_info = find_dist_info(members, name.distribution)
        new_dist_info = f"{name.distribution}-{new_version}.dist-info"
        old_data_dir = old_dist_info.replace(".dist-info", ".data")
        new_data_dir = new_dist_info.replace(".dist-info", ".data")
        filename = wheel_filename(name.distribution, new_version, name.tag_string)
        record = read_record(zf.read(f"{old_dist_info}/RECORD"))

        def edit_metadata(metadata: bytes) -> bytes:
            metadata, result.extras = pin_extras(
                set_metadata_version(metadata, new_version), extras, distributions
            )
            return metadata

        tmp = out_dir / f".{filename}.tmp"
        try:
            with tmp.open("wb") as fh:
                writer = WheelWriter(fh)
                for info in infos:
                    member = info.filename
                    top = member.split("/", 1)[0]
                    if top in (old_dist_info, old_data_dir):
                        continue
                    if member in changes:
                        data = changes[member]
                        if data is None:
                            result.deleted.append(member)
                            continue
                        mode = tree.modes.get(member, (info.external_attr >> 16) & 0o777 or 0o644)
                        writer.write(member, data, date_time=info.date_time, mode=mode)
                        result.replaced.append(member)
                    else:
                        writer.copy_raw(raw, info, _record_of(zf, info, record))
                for member in sorted(set(changes) - members):
                    data = changes[member]
                    if data is None:
                        continue
                    writer.write(
                        member, data, date_time=date_time, mode=tree.modes.get(member, 0o644)
                    )
                    result.added.append(member)
                _write_dist_info(
                    writer,
                    raw,
                    zf,
                    infos,
                    record,
                    dirs=(old_dist_info, old_data_dir, new_dist_info, new_data_dir),
                    edit_metadata=edit_metadata,
                    provenance=provenance,
                    date_time=date_time,
                )
            final = out_dir / filename
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
    result.path = final
    return result


def write_patched_sources(
    wheel: Path,
    patches: Sequence[Patch],
    dest: Path,
    *,
    root: str = "",
    filename: str | None = None,
    suffixes: tuple[str, ...] = (".py", ".pyi"),
) -> list[Offset]:
    """Write the wheel's Python sources under ``dest`` with the series applied exactly as an
    overlay build applies it (the wheel's own copy of each file, strictly): the sources the
    audit reads for a variant whose wheel is of another release than the project's source."""
    check_overlayable(patches)
    upstream_name = filename or wheel.name
    offsets: list[Offset] = []
    with wheel.open("rb") as raw, zipfile.ZipFile(raw) as zf:
        members = {i.filename for i in zf.infolist() if not i.is_dir()}
        shipped, _skipped = shipped_paths(patches, members, root)
        tree = WheelTree(zf, root)
        for patch in patches:
            try:
                offsets.extend(apply_patch(patch, tree, only=shipped).offsets)
            except PatchError as exc:
                raise PatchError(f"{exc} (applying to wheel {upstream_name})") from exc
        for member in sorted(members | set(tree.changes)):
            top = member.split("/", 1)[0]
            if top.endswith((".dist-info", ".data")) or not member.endswith(suffixes):
                continue
            data = tree.changes[member] if member in tree.changes else zf.read(member)
            if data is None:
                continue
            parts = PurePosixPath(member).parts
            if member.startswith("/") or ".." in parts or "\\" in member:
                raise BuildError(f"wheel {upstream_name} holds an unsafe member {member!r}")
            path = dest.joinpath(*parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return offsets


def _record_of(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, record: dict[str, tuple[str, str]]
) -> tuple[str, str]:
    """A member's (hash, size): from the upstream RECORD, or computed when it lacks one."""
    entry = record.get(info.filename)
    if entry and entry[0] and entry[1]:
        return entry
    data = zf.read(info)
    return (record_hash(data), str(len(data)))


def _write_dist_info(
    writer: WheelWriter,
    raw: BinaryIO,
    zf: zipfile.ZipFile,
    infos: list[zipfile.ZipInfo],
    record: dict[str, tuple[str, str]],
    *,
    dirs: tuple[str, str, str, str],
    edit_metadata: Callable[[bytes], bytes],
    provenance: bytes,
    date_time: DateTime,
) -> None:
    old_dist_info, old_data_dir, new_dist_info, new_data_dir = dirs
    for info in infos:
        top, _, rest = info.filename.partition("/")
        if top == old_data_dir:
            writer.copy_raw(raw, info, _record_of(zf, info, record), f"{new_data_dir}/{rest}")
    for info in infos:
        top, _, rest = info.filename.partition("/")
        if top != old_dist_info or rest == "RECORD" or rest in SIGNATURE_FILES:
            continue
        new_name = f"{new_dist_info}/{rest}"
        if rest == "METADATA":
            data = edit_metadata(zf.read(info))
            writer.write(new_name, data, date_time=info.date_time)
        else:
            writer.copy_raw(raw, info, _record_of(zf, info, record), new_name)
    writer.write(f"{new_dist_info}/{PROVENANCE}", provenance, date_time=date_time)
    writer.finish(new_dist_info, date_time=date_time)
