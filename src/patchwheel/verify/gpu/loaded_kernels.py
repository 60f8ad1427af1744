"""Which of the build's CUDA modules the session's runs loaded, and how each runs on this GPU.

The build records each CUDA module's SASS and PTX architectures (manifest.json ``gpu``); the
import trace records the packages' shared objects each run mapped (``libraries``). Their
intersection, judged for this GPU by the one rule (patchwheel.gpuarch), says which kernels the
verified path actually used: native code (``sass``), PTX compiled when it loaded (``ptx``), or a
module that ran although the build says it cannot (``MISSING``: the build's table is wrong).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from patchwheel import gpuarch, manifest
from patchwheel.verify.gpu.imports import Run

__all__ = ["loaded_kernels"]


def loaded_kernels(manifest_dir: Path, sm: str, runs: Sequence[Run]) -> dict[str, Any]:
    """The report's ``kernels``: this GPU, the build's CUDA modules, those the runs loaded."""
    try:
        built = manifest.read(manifest.path_in(manifest_dir))
    except (OSError, manifest.ManifestError) as exc:
        return {"device": sm, "error": f"the build's manifest cannot be read ({exc})"}
    recorded = (built.gpu or {}).get("modules") or []
    modules = {str(row["module"]): row for row in recorded if isinstance(row, dict)}
    try:
        gpu = gpuarch.device(sm)
    except gpuarch.ArchError as exc:
        return {"device": sm, "error": str(exc)}
    loaded = []
    for path in sorted({lib for run in runs for lib in run.libraries} & set(modules)):
        row = modules[path]
        sass = [gpuarch.parse(a) for a in row.get("sass", [])]
        ptx = [gpuarch.parse(a) for a in row.get("ptx", [])]
        loaded.append(
            {
                "module": path,
                "runs_as": gpuarch.coverage(sass, ptx, gpu) or "MISSING",
                "by": sorted(run.label for run in runs if path in run.libraries),
            }
        )
    return {
        "device": gpu.name,
        "capability": gpu.capability,
        "build_records_kernels": built.gpu is not None,
        "cuda_modules": len(modules),
        "loaded": loaded,
    }
