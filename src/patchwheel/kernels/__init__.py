"""CUDA kernel architectures of wheels: read them (cuobjdump), check them against the GPUs a
target or a destination names (the rule: patchwheel.gpuarch), show them."""

from __future__ import annotations

from patchwheel.kernels.check import KernelArchError, Row, check, failures, rows, unused_specific
from patchwheel.kernels.cuobjdump import ToolMissingError
from patchwheel.kernels.scan import Module, WheelKernels, scan_wheel
from patchwheel.kernels.table import render

__all__ = [
    "KernelArchError",
    "Module",
    "Row",
    "ToolMissingError",
    "WheelKernels",
    "check",
    "failures",
    "render",
    "rows",
    "scan_wheel",
    "unused_specific",
]
