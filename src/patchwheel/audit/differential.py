"""Baseline versus new: keep what the new provider broke, set aside what was already broken.

The consumer is checked twice, once against the provider it was written for (the baseline) and
once against the new one. A provider error of the new run is *new* unless the baseline run has
the same error (file, code, normalized message) — lines are only used to pair duplicates, so
a patch that shifts code does not hide or invent drift. A new-run error that the baseline
already had is a *blind spot*: the audit cannot tell whether that call works at either version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from patchwheel.audit.engine import CheckResult, Diagnostic
from patchwheel.audit.findings import Classifier, MatchKey, ProviderError, match_keys


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
