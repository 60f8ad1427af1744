"""CUDA architectures and the one rule of which code runs on which GPU.

A GPU is a compute capability, written as its SASS name: ``sm_90`` (H100, H200), ``sm_100``
(B200, GB200), ``sm_103`` (B300), ``sm_120`` (RTX PRO 6000 Blackwell, RTX 50). Code in an
extension module is either SASS (a cubin, native machine code for one architecture) or PTX
(virtual code the driver JIT-compiles when the module loads). The rule (CUDA C Programming
Guide, "Binary Compatibility" and "PTX Compatibility"; the "Feature Set Compiler Targets" for
the ``a`` and ``f`` suffixes):

- SASS ``sm_XY`` runs on a GPU of the same major version X whose minor is >= Y (``sm_80`` on
  ``sm_86``; never across majors: ``sm_90`` SASS does not run on ``sm_100``).
- SASS ``sm_XYf`` (family-specific) runs on the same family: same major, minor >= Y.
- SASS ``sm_XYa`` (architecture-specific: Hopper's wgmma, Blackwell's tcgen05) runs on
  exactly X.Y and nothing else.
- PTX ``XY`` can be compiled for any GPU of compute capability >= X.Y, across majors; PTX
  ``XYf`` only within its family, PTX ``XYa`` only for exactly X.Y.

Standard library only: the build, the wheelhouse check and the GPU session share it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Arch",
    "ArchError",
    "Coverage",
    "coverage",
    "device",
    "parse",
    "ptx_compiles_for",
    "sass_runs_on",
    "sort_key",
]

_NAME = re.compile(r"(?:sm|compute)_(\d{2,3})([af]?)")
Coverage = Literal["sass", "ptx"]


class ArchError(ValueError):
    """A string that is not a CUDA architecture name (``sm_90``, ``sm_90a``, ``sm_100f``)."""


@dataclass(frozen=True)
class Arch:
    """One architecture: compute capability ``major.minor`` and its suffix ("", "a" or "f")."""

    major: int
    minor: int
    suffix: str = ""

    @property
    def name(self) -> str:
        """``sm_90a``."""
        return f"sm_{self.major}{self.minor}{self.suffix}"

    @property
    def capability(self) -> str:
        """``9.0``."""
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        return self.name


def parse(text: str) -> Arch:
    """``sm_90a`` (or ``compute_90a``) as an Arch; ArchError for anything else."""
    match = _NAME.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ArchError(
            f"{text!r} is not a CUDA architecture: write sm_ and the compute capability without "
            "its dot, e.g. sm_90 (Hopper), sm_100 (Blackwell data-centre), sm_120 (Blackwell "
            "workstation), optionally with the suffix a or f"
        )
    digits, suffix = match.groups()
    return Arch(int(digits[:-1]), int(digits[-1]), suffix)


def device(text: str) -> Arch:
    """A GPU, as a target or a destination names one: a plain ``sm_XY`` (no suffix: ``a`` and
    ``f`` name code built for a GPU, not a GPU)."""
    arch = parse(text)
    if arch.suffix:
        raise ArchError(
            f"{text!r} names code, not a GPU: the GPU that runs {arch.name} code is "
            f"sm_{arch.major}{arch.minor} (compute capability {arch.capability})"
        )
    return arch


def sort_key(arch: Arch) -> tuple[int, int, str]:
    """Order by compute capability, the plain name before its ``a`` and ``f`` variants."""
    return arch.major, arch.minor, arch.suffix


def sass_runs_on(sass: Arch, gpu: Arch) -> bool:
    """Whether SASS built for ``sass`` runs on the GPU ``gpu``."""
    if sass.suffix == "a":
        return (sass.major, sass.minor) == (gpu.major, gpu.minor)
    return sass.major == gpu.major and gpu.minor >= sass.minor


def ptx_compiles_for(ptx: Arch, gpu: Arch) -> bool:
    """Whether PTX written for ``ptx`` can be JIT-compiled for the GPU ``gpu``."""
    if ptx.suffix == "a":
        return (ptx.major, ptx.minor) == (gpu.major, gpu.minor)
    if ptx.suffix == "f":
        return ptx.major == gpu.major and gpu.minor >= ptx.minor
    return (gpu.major, gpu.minor) >= (ptx.major, ptx.minor)


def coverage(sass: Iterable[Arch], ptx: Iterable[Arch], gpu: Arch) -> Coverage | None:
    """How a module with this SASS and PTX runs on ``gpu``: "sass" (native code), "ptx"
    (compiled when it loads: slower start, no arch-specific instructions), or None (it cannot:
    "no kernel image is available for execution on the device")."""
    if any(sass_runs_on(a, gpu) for a in sass):
        return "sass"
    if any(ptx_compiles_for(a, gpu) for a in ptx):
        return "ptx"
    return None
