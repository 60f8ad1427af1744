"""The wheelhouse's CUDA kernels against the destination's GPUs.

Every wheel it carries (torch, the NVIDIA libraries, vLLM, …) is read like the build's own
(kernels/scan.py, cached by sha256) and each CUDA module is checked against the GPUs the
destination has (``--gpu-arch``, default the target's ``gpu-archs``), with the target's
``gpu-specific`` modules held only to their own GPUs. A module that cannot run on one of them
stops the wheelhouse before anything is written. Wheels the destination already has are not
carried, so not read: its own torch is its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from patchwheel import kernels
from patchwheel.config.gpu import GpuSpec
from patchwheel.upstream.cache import Cache
from patchwheel.wheelhouse.plan import Carried

__all__ = ["check_carried"]


def check_carried(
    carried: Sequence[Carried],
    archs: Sequence[str],
    spec: GpuSpec,
    cache: Cache,
    *,
    where: str,
    archs_from: str,
    specific_in: str,
) -> tuple[list[kernels.Row], dict[str, Any]]:
    """The architecture table of the carried wheels and the lock's ``gpu`` record; raises
    KernelArchError naming each module and GPU without a kernel image (``archs_from``: where
    the GPUs come from; ``specific_in``: the target.toml, for the fix)."""
    found = [
        kernels.scan_wheel(c.path, c.sha256, cache, filename=c.filename)
        for c in carried
        if c.path is not None
    ]
    table = kernels.rows(found, archs, spec)
    kernels.check(table, where, archs_from, specific_in)
    record = {
        "archs": list(archs),
        "wheels-read": len(found),
        "specific": {s.module: s.to_json() for s in spec.specific},
        "modules": [row.to_json() for row in table],
    }
    return table, record
