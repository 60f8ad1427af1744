"""The audit of a target: each of its patched consumers against its (patched) provider.

Which projects are consumers and which is the provider is the target's ``[audit]`` table
(config/audit.py; default: speculators against vllm). `build` calls `build_hook(...)` once the
vendor trees hold upstream + series; `nox -s audit --target T` calls `audit_target` on the same
trees. The baseline is ``[audit] baseline``, else the provider version each consumer declares,
resolved with `patchwheel.upstream.sources.source_tree`. What the audit checks of each consumer
(calls, attribute reads, imports; the plugin contract where the engine sees it) is the audit
run's; this module only says which pairs are audited and how their results stop a build.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel.audit.engine import Engine
from patchwheel.audit.report import AuditReport
from patchwheel.audit.run import audit_pins
from patchwheel.building.hooks import AuditHook
from patchwheel.config.audit import AuditSpec
from patchwheel.config.targets import Target
from patchwheel.errors import AuditError, BuildError
from patchwheel.upstream.cache import Cache

CONSUMER = "speculators"
PROVIDER = "vllm"


def audit_trees(
    trees: Mapping[str, Path],
    *,
    consumer: str = CONSUMER,
    provider: str = PROVIDER,
    baseline: str | Path | None = None,
    cache: Cache | None = None,
    engine: Engine | None = None,
    progress: Console | None = None,
) -> AuditReport:
    """Audit ``trees[consumer]`` against ``trees[provider]`` (a target's vendor trees)."""
    missing = [name for name in (consumer, provider) if name not in trees]
    if missing:
        raise AuditError(
            f"the target has no {' or '.join(missing)} project to audit (it has: "
            f"{', '.join(sorted(trees)) or 'none'}); build with --no-audit"
        )
    return audit_pins(
        trees[consumer],
        trees[provider],
        baseline,
        names=(f"{consumer} (patched)", f"{provider} (patched)"),
        cache=cache,
        engine=engine,
        progress=progress,
    )


def audit_target(
    spec: AuditSpec,
    trees: Mapping[str, Path],
    *,
    baseline: str | Path | None = None,
    cache: Cache | None = None,
    engine: Engine | None = None,
    progress: Console | None = None,
) -> dict[str, AuditReport]:
    """Audit each consumer of ``spec`` against its provider in ``trees``; by consumer.

    ``baseline`` (a command line's ``--baseline``) overrides ``spec.baseline``; with neither,
    each consumer's declared provider version is its baseline.
    """
    chosen = baseline if baseline is not None else spec.baseline
    return {
        consumer: audit_trees(
            trees,
            consumer=consumer,
            provider=spec.provider,
            baseline=chosen,
            cache=cache,
            engine=engine,
            progress=progress,
        )
        for consumer in spec.consumers
    }


def manifest_entry(reports: Mapping[str, AuditReport], *, allowed: bool) -> dict[str, Any]:
    """The manifest's ``audit`` entry: one consumer's summary as it always was; several, the
    totals (findings, blind spots, symbols) with each consumer's summary under ``consumers``."""
    summaries = {name: report.summary() for name, report in reports.items()}
    findings = sum(len(r.findings) for r in reports.values())
    if len(summaries) == 1:
        (only,) = summaries.values()
        return {**only, "allowed": bool(findings) and allowed}
    first = next(iter(summaries.values()))
    return {
        "engine": first["engine"],
        "provider": first["provider"],
        "baseline": first["baseline"],
        "findings": findings,
        "blind_spots": sum(int(s["blind_spots"]) for s in summaries.values()),
        "symbols": sorted({sym for s in summaries.values() for sym in s["symbols"]}),
        "consumers": summaries,
        "allowed": bool(findings) and allowed,
    }


def build_hook(
    allow_findings: bool,
    *,
    baseline: str | Path | None = None,
    cache: Cache | None = None,
    engine: Engine | None = None,
    console: Console | None = None,
) -> AuditHook:
    """The audit step of ``build``: returns the manifest's ``audit`` entry, or refuses.

    Every consumer of the target's ``[audit]`` is audited against its provider. With findings
    in any, the build stops (BuildError naming each one) unless `allow_findings`; then the
    manifest records ``"allowed": true`` beside the findings. A target that does not build
    the provider and every consumer is not audited (``"skipped"``). `baseline` defaults to the
    target's ``[audit] baseline``, else the provider version each consumer declares.
    """
    out = console or Console(stderr=True, soft_wrap=True)

    def hook(target: Target, trees: dict[str, Path]) -> dict[str, Any]:
        spec = target.audit
        missing = [p for p in (spec.provider, *spec.consumers) if p not in trees]
        if missing:
            names = [*spec.consumers, spec.provider]
            listed = ("both " if len(names) == 2 else "") + ", ".join(names[:-1])
            return {"skipped": f"the target does not build {listed} and {names[-1]}"}
        reports = audit_target(
            spec, trees, baseline=baseline, cache=cache, engine=engine, progress=out
        )
        for report in reports.values():
            report.render(out)
        entry = manifest_entry(reports, allowed=allow_findings)
        drifted = {name: r for name, r in reports.items() if r.findings}
        if drifted and not allow_findings:
            parts = []
            for name, report in drifted.items():
                listed = "; ".join(f"{f.kind} {f.symbol} at {f.location}" for f in report.findings)
                parts.append(
                    f"the patched {name} still has {len(report.findings)} signature drift(s) "
                    f"against {spec.provider}: {listed}"
                )
            where = ", ".join(f"patches/{target.name}/{name}/" for name in drifted)
            raise BuildError(
                f"target {target.name}: " + ". ".join(parts) + f". Add patches to {where} "
                "(see `patchwheel audit`), or build anyway with --allow-audit-findings"
            )
        return entry

    return hook
