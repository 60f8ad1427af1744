"""Verification of built wheels: speculators' hidden-state extraction vs its oracles.

Two generations (a target's ``generation`` in target.toml, recorded in the build's manifest)
on two machines:

==========  ======================================  ========================================
generation  CPU (``nox -s verify``)                 GPU (``python -m patchwheel.verify.gpu``)
==========  ======================================  ========================================
generator   ``generator/cpu.py``: extraction,       ``generator/gpu/``: correctness,
(0.3.0)     families, the user's path               training, throughput, the user's job
served      ``served/cpu.py``: ``vllm serve`` with  ``served/gpu/session.py``: the same on
(>= 0.5)    connectors, the user's path             a GPU, and its throughput
==========  ======================================  ========================================

Shared by all four cells: ``models/`` (tiny seeded models, tokenizers, conversations),
``oracles/`` (transformers' reference, the comparison), ``env/`` (the verify venv),
``payloads/`` (the scripts the wheels' own python runs; they import nothing from patchwheel),
and the GPU session ``gpu/`` (machine check, install, dispatch on the generation). The
reports: ``report.py`` (CPU, generator), ``served/report.py``, ``gpu/report.py``.

Other packages use only the names below (an import-linter contract); importing this package
imports nothing else (each name is loaded when first used), so neither torch nor the GPU
session's dependencies come with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchwheel.verify.env.consumer import extra_indexes_for
    from patchwheel.verify.env.installed import verify_install
    from patchwheel.verify.generator.cpu import verify_as_user, verify_cpu
    from patchwheel.verify.generator.family_check import CPU_FAMILIES
    from patchwheel.verify.gpu.options import add_arguments as add_gpu_arguments
    from patchwheel.verify.gpu.options import options_from as gpu_options_from
    from patchwheel.verify.gpu.session import run as run_gpu
    from patchwheel.verify.served.cpu import generator_files

__all__ = [
    "CPU_FAMILIES",
    "add_gpu_arguments",
    "extra_indexes_for",
    "generator_files",
    "gpu_options_from",
    "run_gpu",
    "verify_as_user",
    "verify_cpu",
    "verify_install",
]

_PUBLIC = {
    "CPU_FAMILIES": ("patchwheel.verify.generator.family_check", "CPU_FAMILIES"),
    "add_gpu_arguments": ("patchwheel.verify.gpu.options", "add_arguments"),
    "extra_indexes_for": ("patchwheel.verify.env.consumer", "extra_indexes_for"),
    "generator_files": ("patchwheel.verify.served.cpu", "generator_files"),
    "gpu_options_from": ("patchwheel.verify.gpu.options", "options_from"),
    "run_gpu": ("patchwheel.verify.gpu.session", "run"),
    "verify_as_user": ("patchwheel.verify.generator.cpu", "verify_as_user"),
    "verify_cpu": ("patchwheel.verify.generator.cpu", "verify_cpu"),
    "verify_install": ("patchwheel.verify.env.installed", "verify_install"),
}


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562)."""
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _PUBLIC[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value
