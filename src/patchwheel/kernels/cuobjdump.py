"""NVIDIA's ``cuobjdump``, from the ``nvidia-cuda-cuobjdump`` wheel (a patchwheel dependency).

It reads an extension module's embedded device code without a GPU: ``--list-elf`` names each
cubin (``<module>.<n>.sm_90a.cubin``: SASS for one architecture), ``--list-ptx`` each PTX file
(``<module>.<n>.sm_80.ptx``). The binary is found through the wheel's own RECORD (installed
files), so a layout change (``nvidia/cu13/bin/`` today) does not lose it.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from patchwheel.errors import BuildError
from patchwheel.gpuarch import Arch, ArchError, parse, sort_key
from patchwheel.kernels import fatbin

__all__ = ["DISTRIBUTION", "Listing", "ToolMissingError", "list_code", "locate", "version"]

DISTRIBUTION = "nvidia-cuda-cuobjdump"
ENV = "PATCHWHEEL_CUOBJDUMP"  # an explicit binary (tests, machines without the wheel)
_NO_DEVICE_CODE = "does not contain device code"
_ENTRY = re.compile(r"^(?:ELF|PTX) file\s+\d+:\s+(\S+)\.((?:sm|compute)_\d+[af]?)\.(?:cubin|ptx)$")
_TIMEOUT_S = 600


class ToolMissingError(BuildError):
    """cuobjdump is not installed where patchwheel looks for it."""


@dataclass(frozen=True)
class Listing:
    """The architectures of one module's SASS (cubins) and PTX, sorted."""

    sass: tuple[Arch, ...]
    ptx: tuple[Arch, ...]


@functools.cache
def locate() -> Path:
    """The cuobjdump binary: ``$PATCHWHEEL_CUOBJDUMP``, else the one the wheel installed."""
    explicit = os.environ.get(ENV)
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ToolMissingError(f"{ENV}={explicit}: not an executable file")
        return path
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise ToolMissingError(
            f"{DISTRIBUTION} is not installed: it reads the CUDA kernels of the wheels; "
            f"`pip install {DISTRIBUTION}` (patchwheel declares it: reinstall patchwheel, or "
            f"`nox -s build` installs it), or set {ENV} to a cuobjdump binary"
        ) from None
    for file in dist.files or ():
        if file.name == "cuobjdump" and file.parent.name == "bin":
            path = Path(str(dist.locate_file(file)))
            if path.is_file() and os.access(path, os.X_OK):
                return path
            raise ToolMissingError(
                f"{path}: {DISTRIBUTION}'s cuobjdump is missing or not executable"
            )
    raise ToolMissingError(
        f"{DISTRIBUTION} {dist.version} installs no bin/cuobjdump (its RECORD lists none): "
        f"reinstall it (`pip install --force-reinstall {DISTRIBUTION}`)"
    )


def version() -> str:
    """``cuobjdump`` and its release, as recorded beside what it read (``cuobjdump 13.5.37``)."""
    try:
        return f"cuobjdump {metadata.version(DISTRIBUTION)}"
    except metadata.PackageNotFoundError:
        return f"cuobjdump ({locate()})"


def list_code(module: Path, name: str) -> Listing | None:
    """The SASS and PTX architectures of the extension module at ``module`` (``name``: its path
    in the wheel, for messages); None when it holds no device code (a CPU-only module).

    What cuobjdump lists in the module's ``.nv_fatbin`` section, and what it lists in every fat
    binary the file holds elsewhere (kernels/fatbin.py: NVIDIA's libraries keep theirs there).
    """
    with module.open("rb") as fh:
        if fh.read(4) != b"\x7fELF":  # a linker script or data named .so: no code at all
            return None
    sass = _list(module, name, "--list-elf")
    ptx = _list(module, name, "--list-ptx") if sass is not None else None
    gathered = module.with_name(module.name + ".fatbins.elf")
    try:
        count = fatbin.gather(module, gathered)
        if count:
            what = f"{name} ({count} fat binaries gathered)"
            more_sass = _list(gathered, what, "--list-elf") or ()
            more_ptx = _list(gathered, what, "--list-ptx") or ()
            sass = tuple(sorted({*(sass or ()), *more_sass}, key=sort_key))
            ptx = tuple(sorted({*(ptx or ()), *more_ptx}, key=sort_key))
    finally:
        gathered.unlink(missing_ok=True)
    if sass is None:
        return None
    return Listing(sass, ptx or ())


def _list(module: Path, name: str, option: str) -> tuple[Arch, ...] | None:
    try:
        result = subprocess.run(
            [str(locate()), option, str(module)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"cuobjdump {option} on {name}: {exc}") from exc
    said = result.stdout + result.stderr
    if _NO_DEVICE_CODE in said:
        return None
    if result.returncode != 0:
        last = said.strip().splitlines()[-1:] or ["no output"]
        raise BuildError(f"cuobjdump {option} on {name} failed ({result.returncode}): {last[0]}")
    found: set[Arch] = set()
    for line in result.stdout.splitlines():
        match = _ENTRY.match(line.strip())
        if match is None:
            if line.startswith(("ELF file", "PTX file")):
                raise BuildError(
                    f"cuobjdump {option} on {name}: cannot read the architecture of {line!r}"
                )
            continue
        try:
            found.add(parse(match.group(2)))
        except ArchError as exc:  # pragma: no cover - the pattern admits only valid names
            raise BuildError(f"cuobjdump {option} on {name}: {exc}") from exc
    return tuple(sorted(found, key=sort_key))
