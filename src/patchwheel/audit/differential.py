"""Baseline versus new: keep what the new provider broke, set aside what was already broken.

The consumer is checked twice, once against the provider it was written for (the baseline) and
once against the new one. A provider error of the new run is *new* unless the baseline run has
the same error (file, code, normalized message) — lines are only used to pair duplicates, so
a patch that shifts code does not hide or invent drift. A new-run error that the baseline
already had is a *blind spot*: the audit cannot tell whether that call works at either version.
:func:`findings` and :func:`blind_spots` turn both into the report's entries, each new error
with its provider symbol's old and new signature.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from patchwheel.audit.engine import CheckResult, Diagnostic, Reference
from patchwheel.audit.findings import Classifier, Kind, MatchKey, ProviderError, match_keys
from patchwheel.audit.layout import Roots, relative, source_line
from patchwheel.audit.report import BlindSpot, Finding
from patchwheel.audit.signatures import changes, describe, relocations


@dataclass(frozen=True)
class Persistent:
    """A provider error present in both runs, with its baseline twin."""

    error: ProviderError
    baseline: Diagnostic


@dataclass(frozen=True)
class Differential:
    new: tuple[ProviderError, ...]
    persistent: tuple[Persistent, ...]


def provider_errors(result: CheckResult, provider_packages: Sequence[str]) -> list[ProviderError]:
    """The run's diagnostics that are provider drift, in file and line order."""
    classifier = Classifier(result.references, provider_packages)
    found = (classifier.classify(d) for d in result.diagnostics)
    return sorted(
        (e for e in found if e is not None),
        key=lambda e: (str(e.diagnostic.path), e.diagnostic.line, e.diagnostic.column),
    )


def compare(
    baseline: CheckResult, new: CheckResult, provider_packages: Sequence[str]
) -> Differential:
    """Split the new run's provider errors into new drift and errors the baseline shares."""
    pool: dict[MatchKey, list[Diagnostic]] = {}
    for diagnostic in baseline.diagnostics:
        for key in match_keys(diagnostic):
            pool.setdefault(key, []).append(diagnostic)
    fresh: list[ProviderError] = []
    persistent: list[Persistent] = []
    for error in provider_errors(new, provider_packages):
        twins = [_take(pool.get(key), error.diagnostic.line) for key in error.keys]
        unmatched = [key for key, twin in zip(error.keys, twins, strict=True) if twin is None]
        if not unmatched:
            persistent.append(Persistent(error, next(t for t in twins if t is not None)))
        elif len(unmatched) < len(error.keys):
            # Several missing arguments, some already missing at baseline: report the rest.
            names = [_argument(key) for key in unmatched]
            fresh.append(replace(error, detail=", ".join(names)))
        else:
            fresh.append(error)
    return Differential(tuple(fresh), tuple(persistent))


def _take(twins: list[Diagnostic] | None, line: int) -> Diagnostic | None:
    """Remove and return the baseline diagnostic nearest to `line`, if any is left."""
    if not twins:
        return None
    twin = min(twins, key=lambda d: abs(d.line - line))
    twins.remove(twin)
    return twin


def _argument(key: MatchKey) -> str:
    return key[2].split('"', 2)[1]


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


def findings(
    differential: Differential,
    baseline: CheckResult,
    roots: Roots,
    paths: Collection[Path] | None = None,
) -> list[Finding]:
    """The new errors (of the consumer files `paths`, default all) as findings."""
    out = []
    for error in differential.new:
        d = error.diagnostic
        if paths is not None and d.path not in paths:
            continue
        old_ref = _baseline_ref(error, baseline)
        old = describe(old_ref, old_ref.symbol, roots.baseline) if old_ref else None
        new_ref = None if error.kind is Kind.MISSING_MODULE else error.reference
        new = describe(new_ref, error.symbol, roots.provider)
        hints: tuple[str, ...] = ()
        if error.kind in (Kind.MISSING_MODULE, Kind.MISSING_NAME) and error.detail:
            hints = relocations(error.detail.split(", "), roots.provider_dirs, roots.provider)
        out.append(
            Finding(
                kind=error.kind,
                path=relative(d.path, roots.consumer),
                line=d.line,
                column=d.column,
                source=source_line(d.path, d.line),
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


def blind_spots(
    differential: Differential, roots: Roots, paths: Collection[Path] | None = None
) -> list[BlindSpot]:
    """The errors the baseline shared (of the consumer files `paths`) as blind spots."""
    return [
        BlindSpot(
            kind=p.error.kind,
            path=relative(p.error.diagnostic.path, roots.consumer),
            line=p.error.diagnostic.line,
            source=source_line(p.error.diagnostic.path, p.error.diagnostic.line),
            symbol=p.error.symbol,
            message=p.error.diagnostic.message,
            baseline_line=p.baseline.line,
        )
        for p in differential.persistent
        if paths is None or p.error.diagnostic.path in paths
    ]
