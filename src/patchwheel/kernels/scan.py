"""The CUDA kernels of a wheel: per extension module, the architectures of its SASS and PTX.

Each shared object of the wheel is streamed out of the zip into a temp folder of the cache (a
vLLM wheel is 300-500 MB; only ``.so`` members are written, one at a time) and read by
cuobjdump. The result is cached by the wheel's sha256 (``kernels/<sha256>.json`` in the cache),
so an unchanged build reads nothing again (a wheel without shared objects is not recorded:
listing its members is all it costs).
"""

from __future__ import annotations

import json
import shutil
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from patchwheel import atomic, console
from patchwheel.errors import BuildError
from patchwheel.gpuarch import ArchError, parse
from patchwheel.kernels import cuobjdump
from patchwheel.upstream.cache import SHA256_RE, Cache

__all__ = ["SCHEMA", "Module", "WheelKernels", "is_shared_object", "scan_wheel"]

# 2: fat binaries outside the registered section read too (kernels/fatbin.py)
SCHEMA = 2
CHUNK = 1 << 20


@dataclass(frozen=True)
class Module:
    """One extension module with device code: its path in the wheel, SASS and PTX archs."""

    path: str
    sass: tuple[str, ...]
    ptx: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """``{"sass": [...], "ptx": [...]}``."""
        return {"sass": list(self.sass), "ptx": list(self.ptx)}


@dataclass(frozen=True)
class WheelKernels:
    """What cuobjdump read in one wheel: its modules with device code, and how many shared
    objects it read (those without device code are CPU code: counted, not listed)."""

    filename: str
    sha256: str
    modules: tuple[Module, ...]
    shared_objects: int
    scanner: str

    def to_json(self) -> dict[str, Any]:
        """The record the manifest and the cache hold."""
        return {
            "schema": SCHEMA,
            "filename": self.filename,
            "sha256": self.sha256,
            "scanner": self.scanner,
            "shared-objects": self.shared_objects,
            "modules": {m.path: m.to_json() for m in self.modules},
        }

    @classmethod
    def from_json(cls, data: object) -> WheelKernels:
        """The record ``to_json`` wrote; ValueError when it is not one."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError("not a kernels record of this schema")
        modules = data.get("modules")
        if not isinstance(modules, dict):
            raise ValueError("modules is not an object")
        parsed = []
        for path, entry in modules.items():
            if not isinstance(entry, dict):
                raise ValueError(f"{path}: not an object")
            sass, ptx = entry.get("sass"), entry.get("ptx")
            if not isinstance(sass, list) or not isinstance(ptx, list):
                raise ValueError(f"{path}: sass and ptx must be lists")
            try:
                names = [parse(str(a)).name for a in (*sass, *ptx)]
            except ArchError as exc:
                raise ValueError(f"{path}: {exc}") from exc
            parsed.append(Module(str(path), tuple(names[: len(sass)]), tuple(names[len(sass) :])))
        return cls(
            filename=str(data.get("filename", "")),
            sha256=str(data.get("sha256", "")),
            modules=tuple(parsed),
            shared_objects=int(data.get("shared-objects", 0)),
            scanner=str(data.get("scanner", "")),
        )


def is_shared_object(member: str) -> bool:
    """Whether a wheel member is a shared object (``x.so``, ``libx.so.12``)."""
    name = PurePosixPath(member).name
    return name.endswith(".so") or ".so." in name


def scan_wheel(wheel: Path, sha256: str, cache: Cache, *, filename: str = "") -> WheelKernels:
    """The kernels of the wheel at ``wheel`` whose sha256 is ``sha256`` (cached by it)."""
    if not SHA256_RE.match(sha256):
        raise BuildError(f"{wheel}: {sha256!r} is not a sha256")
    filename = filename or wheel.name
    record = cache.root / "kernels" / f"{sha256}.json"
    cached = _cached(record, sha256)
    if cached is not None:
        return WheelKernels(filename, sha256, cached.modules, cached.shared_objects, cached.scanner)
    start = time.monotonic()
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise BuildError(f"{wheel}: cannot read it as a wheel ({exc})") from exc
    with archive:
        members = [i for i in archive.infolist() if not i.is_dir() and is_shared_object(i.filename)]
        if not members:  # nothing to read: nothing worth caching
            return WheelKernels(filename, sha256, (), 0, "")
        console.status(f"reading the CUDA kernels of {filename}: {len(members)} shared objects")
        modules = []
        with cache.staging_dir("kernels") as work:
            for info in members:
                listing = _read_member(archive, info, work / "module.so")
                if listing is not None:
                    sass = tuple(a.name for a in listing.sass)
                    modules.append(Module(info.filename, sass, tuple(a.name for a in listing.ptx)))
    result = WheelKernels(filename, sha256, tuple(modules), len(members), cuobjdump.version())
    record.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(record, result.to_json())
    console.status(
        f"  {len(modules)} with CUDA code, {time.monotonic() - start:.1f} s (cached by sha256)"
    )
    return result


def _read_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path
) -> cuobjdump.Listing | None:
    try:
        with archive.open(info) as src, dest.open("wb") as out:
            shutil.copyfileobj(src, out, CHUNK)
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise BuildError(f"{info.filename}: cannot be read out of the wheel ({exc})") from exc
    try:
        return cuobjdump.list_code(dest, info.filename)
    finally:
        dest.unlink(missing_ok=True)


def _cached(record: Path, sha256: str) -> WheelKernels | None:
    """A cache entry of this sha256 and schema; None (scan again) for anything else."""
    try:
        result = WheelKernels.from_json(json.loads(record.read_text("utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    return result if result.sha256 == sha256 else None
