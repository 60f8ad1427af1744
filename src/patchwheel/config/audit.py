"""``[audit]`` in target.toml: which of the target's projects are audited against which.

::

    [audit]
    provider = "vllm"                              # the project whose API is checked
    consumers = ["speculators", "hs-connectors"]   # each audited against the provider
    baseline = "vllm==0.31.0"                      # optional: the provider they were written for

Left out, a target audits ``speculators`` against ``vllm`` with the baseline each consumer
declares (speculators 0.3.0: ``vllm==0.11.0``). A consumer that declares no exact provider
version (speculators 0.9.0 and hs-connectors 0.9.0 declare none: they talk to ``vllm serve``
or are loaded by it) needs ``baseline``: the audit reports only what the target's provider
breaks that the baseline did not, so the baseline is the vLLM the consumers were released
against. Every consumer is audited in each build; a finding in any stops the build. The
provider and each consumer are project names, held to the name rule (``workspace.check_name``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from patchwheel.config.pins import parse_pin
from patchwheel.errors import ConfigError, PinError
from patchwheel.workspace import check_name

KEYS = {"provider", "consumers", "baseline"}
DEFAULT_PROVIDER = "vllm"
DEFAULT_CONSUMERS = ("speculators",)


@dataclass(frozen=True)
class AuditSpec:
    """What a target's audit checks: each consumer against the provider, from a baseline."""

    provider: str = DEFAULT_PROVIDER
    consumers: tuple[str, ...] = DEFAULT_CONSUMERS
    baseline: str | None = None  # a pin; None: what each consumer declares
    declared: bool = False  # whether target.toml has an [audit] table


def parse_audit(data: Any, projects: list[str], where: str) -> AuditSpec:
    """The ``[audit]`` table (absent: the default), checked against the target's projects."""
    if data is None:
        return AuditSpec()
    where = f"{where} [audit]"
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a table (provider, consumers, baseline)")
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(KEYS)}")
    provider = data.get("provider", DEFAULT_PROVIDER)
    if isinstance(provider, str):
        check_name(provider, f"{where}: provider")
    if not isinstance(provider, str) or provider not in projects:
        raise ConfigError(
            f"{where}: provider {provider!r} is not a project of this target "
            f"(its projects: {', '.join(projects)})"
        )
    consumers = data.get("consumers", list(DEFAULT_CONSUMERS))
    if (
        not isinstance(consumers, list)
        or not consumers
        or not all(isinstance(c, str) for c in consumers)
    ):
        raise ConfigError(
            f'{where}: consumers must be a list of project names, e.g. ["speculators"]'
        )
    if len(set(consumers)) != len(consumers):
        raise ConfigError(f"{where}: consumers lists a project twice")
    for consumer in consumers:
        check_name(consumer, f"{where}: consumer")
        if consumer == provider:
            raise ConfigError(f"{where}: {consumer!r} cannot be audited against itself")
        if consumer not in projects:
            raise ConfigError(
                f"{where}: consumer {consumer!r} is not a project of this target "
                f"(its projects: {', '.join(projects)})"
            )
    baseline = data.get("baseline")
    if baseline is not None:
        if not isinstance(baseline, str):
            raise ConfigError(f'{where}: baseline must be a pin, e.g. "{provider}==0.31.0"')
        try:
            pin = parse_pin(baseline)
        except PinError as exc:
            raise ConfigError(f"{where}: baseline {baseline!r}: {exc}") from exc
        if pin.name.replace("_", "-").lower() != provider.replace("_", "-").lower():
            raise ConfigError(
                f"{where}: baseline {baseline!r} pins {pin.name}, not the provider {provider}"
            )
    return AuditSpec(provider, tuple(consumers), baseline, declared=True)
