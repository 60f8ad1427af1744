"""The audit of a target: its patched consumer against its (patched) provider.

`build` calls `build_hook(...)` once the vendor trees hold upstream + series; `nox -s audit`
calls `audit_trees` on the same trees. The baseline is the provider version the consumer
declares, resolved with `patchwheel.upstream.sources.source_tree`.
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
        entry = {**report.summary(), "allowed": bool(report.findings) and allow_findings}
        if report.findings and not allow_findings:
            listed = "; ".join(f"{f.kind} {f.symbol} at {f.location}" for f in report.findings)
            raise BuildError(
                f"target {target.name}: the patched {CONSUMER} still has "
                f"{len(report.findings)} signature drift(s) against {PROVIDER}: {listed}. "
                f"Add patches to patches/{target.name}/{CONSUMER}/ (see `patchwheel audit`), "
                "or build anyway with --allow-audit-findings"
            )
        return entry

    return hook
