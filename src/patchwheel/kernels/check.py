"""Every CUDA module against the GPUs it must run on (the rule: patchwheel.gpuarch).

A module runs on a GPU through its SASS or through PTX the driver compiles; one that has
neither fails the check, naming the module, the GPU and the ways out — unless the target lists
it under ``gpu-specific`` as built for other GPUs (config/gpu.py), which holds it only to those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from patchwheel.config.gpu import GpuSpec, Specific
from patchwheel.errors import BuildError
from patchwheel.gpuarch import coverage, device, parse
from patchwheel.kernels.scan import Module, WheelKernels

__all__ = ["Cell", "KernelArchError", "Row", "check", "failures", "rows", "unused_specific"]

# how a module runs on one GPU: native code, PTX compiled at load, not required of it
# (gpu-specific), or not at all
Cell = Literal["sass", "ptx", "not for it", "MISSING"]


class KernelArchError(BuildError):
    """A CUDA module has no code that runs on a GPU that is required of it."""


@dataclass(frozen=True)
class Row:
    """One module of one wheel, and how it runs on each required GPU."""

    wheel: str
    module: Module
    cells: dict[str, Cell]
    specific: Specific | None

    @property
    def missing(self) -> list[str]:
        """The required GPUs it cannot run on."""
        return [arch for arch, cell in self.cells.items() if cell == "MISSING"]

    def to_json(self) -> dict[str, Any]:
        """The row as the manifest and ``--json`` show it."""
        data: dict[str, Any] = {
            "wheel": self.wheel,
            "module": self.module.path,
            **self.module.to_json(),
            "gpus": dict(self.cells),
        }
        if self.specific is not None:
            data["specific"] = self.specific.to_json()
        return data


def rows(wheels: Sequence[WheelKernels], archs: Sequence[str], spec: GpuSpec) -> list[Row]:
    """Each module of each wheel against each of ``archs`` (GPU names, e.g. ``sm_90``)."""
    gpus = [device(a) for a in archs]
    out = []
    for wheel in wheels:
        for module in wheel.modules:
            specific = spec.specific_to(module.path)
            sass = [parse(a) for a in module.sass]
            ptx = [parse(a) for a in module.ptx]
            cells: dict[str, Cell] = {}
            for gpu in gpus:
                how = coverage(sass, ptx, gpu)
                if how is not None:
                    cells[gpu.name] = how
                elif specific is not None and gpu.name not in specific.archs:
                    cells[gpu.name] = "not for it"
                else:
                    cells[gpu.name] = "MISSING"
            out.append(Row(wheel.filename, module, cells, specific))
    return out


def unused_specific(wheels: Sequence[WheelKernels], spec: GpuSpec) -> list[Specific]:
    """``gpu-specific`` entries that name no module of these wheels although they name a
    package these wheels have modules in (stale after a roll). An entry for another package
    (a library only a wheelhouse carries, say) is not these wheels' business."""
    paths = {m.path for w in wheels for m in w.modules}
    packages = {p.partition("/")[0] for p in paths}
    return [
        s for s in spec.specific if s.module not in paths and s.module.partition("/")[0] in packages
    ]


def failures(table: Sequence[Row]) -> list[str]:
    """One line per module and GPU it cannot run on."""
    lines = []
    for row in table:
        for arch in row.missing:
            sass = ", ".join(row.module.sass) or "none"
            ptx = ", ".join(row.module.ptx) or "none"
            lines.append(
                f"{row.module.path} ({row.wheel}) cannot run on {arch}: no SASS for it and no "
                f"PTX that compiles for it (SASS: {sass}; PTX: {ptx})"
            )
    return lines


def check(table: Sequence[Row], where: str, archs_from: str, specific_in: str) -> None:
    """Raise KernelArchError listing every module that cannot run on a required GPU.

    ``where`` names what was checked (a target, a wheelhouse); ``archs_from`` where the GPUs
    are required and ``specific_in`` the target.toml of ``gpu-specific``, for the fix.
    """
    lines = failures(table)
    if not lines:
        return
    first = next(r for r in table if r.missing)
    body = "\n".join(f"  - {line}" for line in lines)
    raise KernelArchError(
        f"{where}: {len(lines)} CUDA module/GPU pair(s) without a kernel image:\n{body}\n"
        "Fix: use wheels built for those GPUs (upstream's CUDA arch list), or stop requiring "
        f"the GPU ({archs_from}), or, where a module is meant only for other GPUs, say so in "
        f'{specific_in}: [gpu-specific."{first.module.path}"] archs = [...] reason = "…"'
    )
