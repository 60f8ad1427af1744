"""The GPUs a target must run on (``gpu-archs``) and its modules built for fewer (``gpu-specific``).

``target.toml``::

    gpu-archs = ["sm_90", "sm_100", "sm_120"]     # left out: DEFAULT_ARCHS

    [gpu-specific."vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"]
    archs = ["sm_90"]                             # the GPUs it is for (it must run on these)
    reason = "FlashAttention 3 is Hopper-only; vLLM uses another backend on other GPUs"

Every CUDA extension module of the target's wheels must run on every GPU of ``gpu-archs`` (SASS
for it, or PTX that compiles for it: patchwheel.gpuarch), except that a module listed under
``gpu-specific`` (by its path in the wheel) is held only to the GPUs it names, with the reason
recorded beside the build.

The default is Hopper and Blackwell, data-centre and workstation: sm_90 (H100, H200), sm_100
(B200, GB200; B300's sm_103 runs the same non-``a`` SASS) and sm_120 (RTX PRO 6000 Blackwell,
RTX 50; GB10's sm_121 likewise) — the GPUs the project's users train drafts on today. Ampere
and Ada (sm_80, sm_89) are left to the targets that say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from patchwheel.errors import ConfigError
from patchwheel.gpuarch import ArchError, device

__all__ = ["DEFAULT_ARCHS", "GpuSpec", "Specific", "parse_gpu"]

DEFAULT_ARCHS: tuple[str, ...] = ("sm_90", "sm_100", "sm_120")


@dataclass(frozen=True)
class Specific:
    """A module built for some GPUs only: its path in the wheel, those GPUs, and why."""

    module: str
    archs: tuple[str, ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        """``{"archs": [...], "reason": ...}``."""
        return {"archs": list(self.archs), "reason": self.reason}


@dataclass(frozen=True)
class GpuSpec:
    """What a target asks of its CUDA modules."""

    archs: tuple[str, ...] = DEFAULT_ARCHS
    specific: tuple[Specific, ...] = ()
    declared: bool = False  # whether target.toml says gpu-archs (else the default)

    def specific_to(self, module: str) -> Specific | None:
        """The ``gpu-specific`` entry of ``module``, if any."""
        return next((s for s in self.specific if s.module == module), None)

    def to_json(self) -> dict[str, Any]:
        """The JSON the manifest and ``patchwheel targets --json`` show."""
        return {
            "archs": list(self.archs),
            "declared": self.declared,
            "specific": {s.module: s.to_json() for s in self.specific},
        }


def parse_gpu(archs: object, specific: object, where: str) -> GpuSpec:
    """``gpu-archs`` and ``[gpu-specific]`` of a target.toml (either may be None: left out)."""
    declared = archs is not None
    names = _archs(archs, f"{where}: gpu-archs") if declared else DEFAULT_ARCHS
    if specific is None:
        specific = {}
    if not isinstance(specific, dict):
        raise ConfigError(f'{where}: gpu-specific must be a table of [gpu-specific."path"] tables')
    entries = []
    for module, data in specific.items():
        what = f'{where} [gpu-specific."{module}"]'
        if not module or module.startswith("/") or ".." in module.split("/") or "\\" in module:
            raise ConfigError(f"{what}: name a module by its path inside the wheel (a/b/c.so)")
        if not isinstance(data, dict) or set(data) != {"archs", "reason"}:
            raise ConfigError(
                f'{what}: needs exactly archs = ["sm_90", …] (the GPUs it is built for) and '
                'reason = "…" (why it is not built for the others)'
            )
        reason = data["reason"]
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigError(f"{what}: reason must say why the module is built for fewer GPUs")
        entries.append(Specific(module, _archs(data["archs"], f"{what} archs"), reason.strip()))
    return GpuSpec(names, tuple(entries), declared)


def _archs(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f'{where}: must be a non-empty list like ["sm_90", "sm_100"]')
    names: list[str] = []
    for item in value:
        try:
            name = device(item).name if isinstance(item, str) else None
        except ArchError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
        if name is None:
            raise ConfigError(f"{where}: {item!r} is not a string like 'sm_90'")
        if name in names:
            raise ConfigError(f"{where}: {name} is listed twice")
        names.append(name)
    return tuple(names)
