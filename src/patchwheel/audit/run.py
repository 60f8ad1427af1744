"""Run an audit: two engine checks, the differential, and the report with its explanations."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from patchwheel.audit.differential import Differential, compare
from patchwheel.audit.engine import CheckRequest, CheckResult, Engine, MypyEngine, Reference
from patchwheel.audit.findings import Kind, ProviderError
from patchwheel.audit.layout import consumer_modules, declared_pin, project_name, top_level_packages
from patchwheel.audit.report import AuditReport, BlindSpot, Coverage, Finding, Tree
from patchwheel.audit.signatures import ProviderSide, changes, describe, relocations
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import source_tree


@dataclass(frozen=True)
class AuditRun:
    """An audit's report, with what the engine resolved at each consumer site of the new run.

    :meth:`side` describes the provider symbol a consumer site uses at the audited provider,
    for sites without a finding (a finding carries its own ``new`` side). It reads the
    provider's source files as they are on disk *now*: call it while `provider_root` still
    holds the audited sources (a reused checkout moves on).
    """

    report: AuditReport
    resolved: CheckResult
    consumer_root: Path
    provider_root: Path
    baseline_request: CheckRequest | None = None
    baseline_result: CheckResult | None = None

    def side(
        self, path: str, line: int, column: int, *, symbol: str, name: str | None
    ) -> ProviderSide:
        """The provider side at consumer site ``path:line:column`` (path relative to its root).

        The reference is the one the engine resolved there with the same symbol, else with
        the same written `name` (an attribute or import that moved to another class or
        module), else the only call there; none at all means the site uses nothing the
        engine could resolve, and the symbol is reported absent.
        """
        where = (self.consumer_root / path).resolve()
        here = [
            r
            for r in self.resolved.references
            if (r.path, r.line, r.column) == (where, line, column)
        ]
        short = symbol.rsplit(".", 1)[-1]
        ref = next((r for r in here if r.symbol == symbol), None)
        ref = ref or next((r for r in here if name is not None and r.name == name), None)
        ref = ref or next((r for r in here if r.role == "call" and r.name == short), None)
        calls = [r for r in here if r.role == "call"]
        if ref is None and len(calls) == 1:
            ref = calls[0]
        return describe(ref, ref.symbol if ref else symbol, self.provider_root)


def run_audit(
    consumer_root: Path,
    provider_root: Path,
    baseline_root: Path,
    *,
    consumer_packages: Sequence[str] | None = None,
    provider_packages: Sequence[str] | None = None,
    labels: tuple[str, str, str] | None = None,
    engine: Engine | None = None,
    progress: Console | None = None,
) -> AuditReport:
    """Audit the consumer tree against `provider_root`, relative to `baseline_root`.

    Roots are source trees (an extracted sdist, a checkout, a vendor tree); packages default to
    what each tree declares. `labels` name the three trees in the report (their pins).
    `progress` shows a spinner on that console while the engine runs.
    """
    return audit_run(
        consumer_root,
        provider_root,
        baseline_root,
        consumer_packages=consumer_packages,
        provider_packages=provider_packages,
        labels=labels,
        engine=engine,
        progress=progress,
    ).report


def audit_run(
    consumer_root: Path,
    provider_root: Path,
    baseline_root: Path,
    *,
    consumer_packages: Sequence[str] | None = None,
    provider_packages: Sequence[str] | None = None,
    labels: tuple[str, str, str] | None = None,
    engine: Engine | None = None,
    progress: Console | None = None,
    reuse: AuditRun | None = None,
) -> AuditRun:
    """:func:`run_audit`, keeping the engine's resolutions of the new run (:class:`AuditRun`).

    `reuse`: an earlier run whose baseline check is taken as it is when this run's baseline
    request is the same (same consumer modules, same baseline packages) — a bisect audits one
    consumer against many providers. The consumer's files must not have changed since.
    """
    engine = engine or MypyEngine()
    consumer_dirs = top_level_packages(consumer_root, consumer_packages)
    provider_dirs = top_level_packages(provider_root, provider_packages)
    names = tuple(d.name for d in provider_dirs)
    baseline_dirs = top_level_packages(baseline_root, names)
    modules = consumer_modules(consumer_dirs)
    requests = [CheckRequest(modules, baseline_dirs), CheckRequest(modules, provider_dirs)]
    if reuse is not None and reuse.baseline_request == requests[0] and reuse.baseline_result:
        with _status(progress, f"checking {len(modules)} modules against the provider"):
            baseline, (new,) = reuse.baseline_result, engine.check(requests[1:])
    else:
        with _status(progress, f"checking {len(modules)} modules against two provider trees"):
            baseline, new = engine.check(requests)
    consumer_label, provider_label, baseline_label = labels or (
        str(consumer_root),
        str(provider_root),
        str(baseline_root),
    )
    differential = compare(baseline, new, names)
    report = AuditReport(
        consumer=Tree(consumer_label, str(consumer_root), tuple(d.name for d in consumer_dirs)),
        provider=Tree(provider_label, str(provider_root), names),
        baseline=Tree(baseline_label, str(baseline_root), names),
        engine=f"{engine.name} {engine.version}",
        findings=_findings(
            differential, baseline, consumer_root, provider_root, baseline_root, provider_dirs
        ),
        blind_spots=_blind_spots(differential, consumer_root),
        coverage=_coverage(new, len(modules)),
    )
    return AuditRun(report, new, consumer_root, provider_root, requests[0], baseline)


@contextlib.contextmanager
def _status(console: Console | None, text: str) -> Iterator[None]:
    if console is None:
        yield
        return
    with console.status(text):
        yield


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _source_line(path: Path, line: int) -> str:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _baseline_ref(error: ProviderError, baseline: CheckResult) -> Reference | None:
    """The baseline's resolution of the same consumer site (same text, same position)."""
    ref = error.reference
    site = (error.diagnostic.path, error.diagnostic.line, error.diagnostic.column)
    candidates = [r for r in baseline.references if (r.path, r.line, r.column) == site]
    if ref is not None:
        same = [r for r in candidates if r.role == ref.role and r.name == ref.name]
        if same:
            return same[0]
    same = [r for r in candidates if r.symbol == error.symbol]
    return same[0] if same else None


def _findings(
    differential: Differential,
    baseline: CheckResult,
    consumer_root: Path,
    provider_root: Path,
    baseline_root: Path,
    provider_dirs: Sequence[Path],
) -> list[Finding]:
    out = []
    for error in differential.new:
        old_ref = _baseline_ref(error, baseline)
        old = describe(old_ref, old_ref.symbol, baseline_root) if old_ref else None
        new_ref = None if error.kind is Kind.MISSING_MODULE else error.reference
        new = describe(new_ref, error.symbol, provider_root)
        hints: tuple[str, ...] = ()
        if error.kind in (Kind.MISSING_MODULE, Kind.MISSING_NAME) and error.detail:
            hints = relocations(error.detail.split(", "), provider_dirs, provider_root)
        d = error.diagnostic
        out.append(
            Finding(
                kind=error.kind,
                path=_relative(d.path, consumer_root),
                line=d.line,
                column=d.column,
                source=_source_line(d.path, d.line),
                symbol=error.symbol,
                detail=error.detail,
                message=d.message,
                code=d.code,
                new=new,
                old=old,
                changes=changes(old, new),
                hints=hints,
            )
        )
    return out


def _blind_spots(differential: Differential, consumer_root: Path) -> list[BlindSpot]:
    return [
        BlindSpot(
            kind=p.error.kind,
            path=_relative(p.error.diagnostic.path, consumer_root),
            line=p.error.diagnostic.line,
            source=_source_line(p.error.diagnostic.path, p.error.diagnostic.line),
            symbol=p.error.symbol,
            message=p.error.diagnostic.message,
            baseline_line=p.baseline.line,
        )
        for p in differential.persistent
    ]


def _coverage(result: CheckResult, files: int) -> Coverage:
    roles = Counter(r.role for r in result.references if r.checked)
    return Coverage(
        files=files,
        calls=roles["call"],
        attributes=roles["attribute"] + roles["module-attribute"],
        imports=roles["import"],
        unchecked=sum(1 for r in result.references if not r.checked),
    )


def _tree(pin: str | Path, cache: Cache | None) -> Path:
    """A pin's source tree; a directory (a Path, or a string naming one) is used as it is."""
    if isinstance(pin, Path) or Path(pin).is_dir():
        return Path(pin)
    return source_tree(pin, cache)


def audit_pins(
    consumer: str | Path,
    provider: str | Path,
    baseline: str | Path | None = None,
    *,
    names: tuple[str, str] | None = None,
    cache: Cache | None = None,
    engine: Engine | None = None,
    progress: Console | None = None,
) -> AuditReport:
    """Audit by pin (``speculators==0.3.0``, ``vllm==0.16.0``, git or path) or by directory.

    `baseline` defaults to the exact provider version the consumer declares
    (speculators 0.3.0: ``vllm==0.11.0``). Pins resolve through `cache` (patchwheel's);
    `names` label the consumer and provider in the report (default: their pins).
    """
    consumer_root = _tree(consumer, cache)
    provider_root = _tree(provider, cache)
    if baseline is None:
        name = project_name(provider_root) or top_level_packages(provider_root)[0].name
        baseline = declared_pin(consumer_root, name)
    baseline_root = _tree(baseline, cache)
    return run_audit(
        consumer_root,
        provider_root,
        baseline_root,
        labels=(*(names or (str(consumer), str(provider))), str(baseline)),
        engine=engine,
        progress=progress,
    )
