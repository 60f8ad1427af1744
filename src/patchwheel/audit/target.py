"""The audit of a target: its patched consumers against its (patched) provider.

`build` calls `build_hook(...)` once the vendor trees hold upstream + series; `nox -s audit`
calls `audit_trees` (one consumer) or `audit_target` (several: speculators and hs-connectors
against one vLLM) on the same trees. A consumer's baseline is the one the target gives it, else
the provider version it declares, resolved with `patchwheel.upstream.sources.source_tree`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel.audit.engine import Engine
from patchwheel.audit.report import AuditReport
from patchwheel.audit.run import Consumer, audit_consumers
from patchwheel.building.hooks import AuditHook
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
    (report,) = audit_target(
        trees,
        consumers=(consumer,),
        provider=provider,
        baseline=baseline,
        cache=cache,
        engine=engine,
        progress=progress,
    )
    return report


def audit_target(
    trees: Mapping[str, Path],
    *,
    consumers: Sequence[str] = (CONSUMER,),
    provider: str = PROVIDER,
    baseline: str | Path | None = None,
    baselines: Mapping[str, str | Path] | None = None,
    cache: Cache | None = None,
    engine: Engine | None = None,
    progress: Console | None = None,
) -> list[AuditReport]:
    """Audit each of `consumers` (projects of the target) against ``trees[provider]``.

    A consumer's baseline is ``baselines[name]``, else `baseline`, else the provider version it
    declares; consumers with the same baseline are checked in one engine run (each sees the
    others' types: speculators' use of hs-connectors' classes). One report per consumer, in
    the order of `consumers`.
    """
    missing = [name for name in (*consumers, provider) if name not in trees]
    if missing or not consumers:
        raise AuditError(
            f"the target has no {' or '.join(missing) or 'consumer'} project to audit (it "
            f"has: {', '.join(sorted(trees)) or 'none'}); build with --no-audit"
        )
    chosen = baselines or {}
    return audit_consumers(
        [Consumer(trees[name], label=f"{name} (patched)") for name in consumers],
        trees[provider],
        baseline,
        baselines=[chosen.get(name) for name in consumers],
        provider_label=f"{provider} (patched)",
        cache=cache,
        engine=engine,
        progress=progress,
    )


def manifest_entry(reports: Sequence[AuditReport], allowed: bool) -> dict[str, Any]:
    """The manifest's ``audit`` entry: one report's summary, or several consumers' together
    (their counts summed, each summary under ``consumers``)."""
    if len(reports) == 1:
        return {**reports[0].summary(), "allowed": allowed}
    summaries = [{"consumer": r.consumer.label, **r.summary()} for r in reports]
    return {
        "engine": reports[0].engine,
        "provider": reports[0].provider.label,
        "findings": sum(s["findings"] for s in summaries),
        "blind_spots": sum(s["blind_spots"] for s in summaries),
        "private_api": sum(s["private_api"] for s in summaries),
        "symbols": sorted({x for s in summaries for x in s["symbols"]}),
        "consumers": summaries,
        "allowed": allowed,
    }


def build_hook(
    allow_findings: bool,
    *,
    consumers: Sequence[str] = (CONSUMER,),
    baseline: str | Path | None = None,
    baselines: Mapping[str, str | Path] | None = None,
    cache: Cache | None = None,
    engine: Engine | None = None,
    console: Console | None = None,
) -> AuditHook:
    """The audit step of ``build``: returns the manifest's ``audit`` entry, or refuses.

    Every project of `consumers` the target builds is audited against its provider (baselines
    as in :func:`audit_target`). With findings the build stops (BuildError naming each one)
    unless `allow_findings`; then the manifest records ``"allowed": true`` beside the
    findings. A target that builds no consumer or not the provider is not audited
    (``"skipped"``).
    """
    out = console or Console(stderr=True, soft_wrap=True)

    def hook(target: Target, trees: dict[str, Path]) -> dict[str, Any]:
        present = [name for name in consumers if name in trees]
        if not present or PROVIDER not in trees:
            if len(consumers) == 1:
                return {"skipped": f"the target does not build both {consumers[0]} and {PROVIDER}"}
            wanted = ", ".join(consumers)
            return {"skipped": f"the target does not build {PROVIDER} and one of {wanted}"}
        reports = audit_target(
            trees,
            consumers=present,
            baseline=baseline,
            baselines=baselines,
            cache=cache,
            engine=engine,
            progress=out,
        )
        for report in reports:
            report.render(out)
        findings = [(name, f) for name, r in zip(present, reports, strict=True) for f in r.findings]
        entry = manifest_entry(reports, bool(findings) and allow_findings)
        if findings and not allow_findings:
            listed = "; ".join(f"{f.kind} {f.symbol} at {f.location}" for _, f in findings)
            where = ", ".join(dict.fromkeys(f"patches/{target.name}/{n}/" for n, _ in findings))
            raise BuildError(
                f"target {target.name}: the patched {' and '.join(present)} still "
                f"{'has' if len(present) == 1 else 'have'} {len(findings)} API drift(s) "
                f"against {PROVIDER}: {listed}. Add patches to {where} (see `patchwheel "
                "audit`), or build anyway with --allow-audit-findings"
            )
        return entry

    return hook
