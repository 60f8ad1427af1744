"""The build's kernel architectures: each wheel's CUDA modules read, checked against the
target's ``gpu-archs`` (config/gpu.py) before anything is written, and recorded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from patchwheel import console, kernels
from patchwheel.building.unit import Output
from patchwheel.config.targets import TARGET_FILE, Target
from patchwheel.kernels.scan import SCHEMA
from patchwheel.manifest import Manifest, WheelEntry
from patchwheel.upstream.cache import Cache

__all__ = ["check_target", "from_manifest", "gpu_record", "recorded", "scan_outputs"]


def scan_outputs(results: Sequence[Output], cache: Cache) -> list[kernels.WheelKernels | None]:
    """Each artifact's kernels (None for an sdist: no compiled code to read)."""
    return [
        kernels.scan_wheel(r.path, r.sha256, cache, filename=r.filename)
        if r.filename.endswith(".whl")
        else None
        for r in results
    ]


def check_target(
    target: Target, records: Sequence[kernels.WheelKernels | None]
) -> list[kernels.Row]:
    """The architecture table of the target's wheels; KernelArchError when a module cannot run
    on a GPU of ``gpu-archs``; a note for each ``gpu-specific`` entry that names no module."""
    found = [r for r in records if r is not None]
    table = kernels.rows(found, target.gpu.archs, target.gpu)
    for stale in kernels.unused_specific(found, target.gpu):
        console.status(
            f"[yellow]note:[/] gpu-specific {stale.module!r} in {target.name}/{TARGET_FILE} "
            "names no CUDA module of the built wheels (gone upstream?): remove it"
        )
    toml = f"patches/{target.name}/{TARGET_FILE}"
    kernels.check(table, f"target {target.name}", f"gpu-archs in {toml}", toml)
    return table


def gpu_record(target: Target, table: Sequence[kernels.Row]) -> dict[str, Any]:
    """The manifest's ``gpu``: the GPUs required, the exceptions, each module's row."""
    return {**target.gpu.to_json(), "modules": [row.to_json() for row in table]}


def recorded(existing: Manifest, target: Target) -> bool:
    """Whether a manifest records the kernels of every wheel (as this patchwheel reads them)
    and this target's GPU demands
    (else the up-to-date build writes its outputs again: from the caches, nothing rebuilt)."""
    if existing.gpu is None or any(
        w.kernels is None or w.kernels.get("schema") != SCHEMA
        for w in existing.wheels
        if w.filename.endswith(".whl")
    ):
        return False
    demanded = {k: v for k, v in existing.gpu.items() if k != "modules"}
    return demanded == target.gpu.to_json()


def from_manifest(wheels: Sequence[WheelEntry]) -> list[kernels.WheelKernels | None]:
    """The kernels a manifest recorded, per wheel."""
    return [
        kernels.WheelKernels.from_json(w.kernels) if w.kernels is not None else None for w in wheels
    ]
