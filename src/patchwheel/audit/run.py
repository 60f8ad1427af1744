"""Run an audit: two engine checks, the differentials, and the reports with their explanations.

One engine check per provider tree (baseline and new) covers every consumer of the audit, so
several consumers of one target (speculators and hs-connectors against one vLLM) are checked
together: each sees the other's types, and each gets its own report. Three differentials
follow: the calls (:mod:`~patchwheel.audit.differential`), the plugin contract
(:mod:`~patchwheel.audit.contract`: overrides, abstract methods, private API) and the names
given as strings (:mod:`~patchwheel.audit.named_report`).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from patchwheel.audit import differential
from patchwheel.audit.contract import judge
from patchwheel.audit.engine import CheckRequest, CheckResult, Engine, MypyEngine
from patchwheel.audit.layout import (
    Roots,
    consumer_modules,
    declared_pin,
    project_name,
    top_level_packages,
)
from patchwheel.audit.named import NamingRules, Resolver, rules_for, scan
from patchwheel.audit.named_report import NamedResult, judge_named, side
from patchwheel.audit.report import AuditReport, Coverage, Tree
from patchwheel.audit.signatures import ProviderSide, describe, describe_member
from patchwheel.errors import AuditError
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import source_tree

Site = tuple[Path, int, int]


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
    named: dict[Site, ProviderSide] = field(default_factory=dict)

    def side(
        self, path: str, line: int, column: int, *, symbol: str, name: str | None
    ) -> ProviderSide:
        """The provider side at consumer site ``path:line:column`` (path relative to its root).

        The reference is the one the engine resolved there with the same symbol, else with
        the same written `name` (an attribute or import that moved to another class or
        module), else the only call there. A site without one may be a method of a consumer
        class (the provider method it overrides there), a class (an abstract method of its
        bases) or a name given as a string (what it resolves to); none of these means the
        site uses nothing the engine could resolve, and the symbol is reported absent.
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
        if ref is None:
            found = self._contract_side(where, line, short) or self.named.get((where, line, column))
            if found is not None:
                return found
        return describe(ref, ref.symbol if ref else symbol, self.provider_root)

    def _contract_side(self, where: Path, line: int, short: str) -> ProviderSide | None:
        for record in self.resolved.classes:
            if record.path != where:
                continue
            for method in record.methods:
                if method.line == line and method.name == short:
                    base = method.base
                    symbol = base.symbol if base else method.own.symbol
                    return describe_member(base, symbol, self.provider_root)
            if record.line == line:
                member = next((m for m in record.missing_abstract if m.name == short), None)
                if member is not None:
                    return describe_member(member, member.symbol, self.provider_root)
        return None


@dataclass(frozen=True)
class Consumer:
    """One consumer of an audit: its source tree, its packages (default: those the tree
    declares) and its label in the report (default: the tree's path)."""

    root: Path
    packages: tuple[str, ...] | None = None
    label: str | None = None


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
    rules: NamingRules | None = None,
) -> AuditReport:
    """Audit the consumer tree against `provider_root`, relative to `baseline_root`.

    Roots are source trees (an extracted sdist, a checkout, a vendor tree); packages default to
    what each tree declares. `labels` name the three trees in the report (their pins).
    `progress` shows a spinner on that console while the engine runs; `rules` say how the
    provider resolves names given as strings (default: vLLM's for vLLM, else none).
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
        rules=rules,
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
    rules: NamingRules | None = None,
) -> AuditRun:
    """:func:`run_audit`, keeping the engine's resolutions of the new run (:class:`AuditRun`).

    `reuse`: an earlier run whose baseline check is taken as it is when this run's baseline
    request is the same (same consumer modules, same baseline packages) — a bisect audits one
    consumer against many providers. The consumer's files must not have changed since.
    """
    consumer_label, provider_label, baseline_label = labels or (
        str(consumer_root),
        str(provider_root),
        str(baseline_root),
    )
    packages = tuple(consumer_packages) if consumer_packages else None
    (run,) = audit_runs(
        [Consumer(consumer_root, packages, consumer_label)],
        provider_root,
        baseline_root,
        provider_packages=provider_packages,
        provider_label=provider_label,
        baseline_label=baseline_label,
        engine=engine,
        progress=progress,
        reuse=reuse,
        rules=rules,
    )
    return run


def audit_runs(
    consumers: Sequence[Consumer],
    provider_root: Path,
    baseline_root: Path,
    *,
    provider_packages: Sequence[str] | None = None,
    provider_label: str | None = None,
    baseline_label: str | None = None,
    engine: Engine | None = None,
    progress: Console | None = None,
    reuse: AuditRun | None = None,
    rules: NamingRules | None = None,
) -> list[AuditRun]:
    """Audit several consumers against one provider and one baseline: one run (and report)
    per consumer, in order, from one engine check per provider tree."""
    engine = engine or MypyEngine()
    consumer_dirs = [top_level_packages(c.root, c.packages) for c in consumers]
    provider_dirs = top_level_packages(provider_root, provider_packages)
    names = tuple(d.name for d in provider_dirs)
    baseline_dirs = top_level_packages(baseline_root, names)
    own = [consumer_modules(dirs) for dirs in consumer_dirs]
    modules = tuple(m for group in own for m in group)
    requests = [CheckRequest(modules, baseline_dirs), CheckRequest(modules, provider_dirs)]
    if reuse is not None and reuse.baseline_request == requests[0] and reuse.baseline_result:
        with _status(progress, f"checking {len(modules)} modules against the provider"):
            baseline, (new,) = reuse.baseline_result, engine.check(requests[1:])
    else:
        with _status(progress, f"checking {len(modules)} modules against two provider trees"):
            baseline, new = engine.check(requests)
    calls = differential.compare(baseline, new, names)
    rules = rules or rules_for(names)
    sites = scan(modules, rules)
    every_dir = [d for dirs in consumer_dirs for d in dirs]
    old_names = Resolver(every_dir, baseline_dirs, sites, rules)
    new_names = Resolver(every_dir, provider_dirs, sites, rules)
    every_roots = [Roots(c.root, provider_root, baseline_root, provider_dirs) for c in consumers]
    every_paths = [frozenset(m.path for m in group) for group in own]
    every_named = [
        judge_named(sites, old_names, new_names, roots, paths)
        for roots, paths in zip(every_roots, every_paths, strict=True)
    ]
    # A class the provider builds from a string may be named in another consumer's file.
    instantiated = {name for named in every_named for name in named.instantiated}
    runs = []
    for consumer, dirs, roots, paths, named in zip(
        consumers, consumer_dirs, every_roots, every_paths, every_named, strict=True
    ):
        contract = judge(baseline, new, roots, instantiated, paths)
        report = AuditReport(
            consumer=Tree(
                consumer.label or str(consumer.root),
                str(consumer.root),
                tuple(d.name for d in dirs),
            ),
            provider=Tree(provider_label or str(provider_root), str(provider_root), names),
            baseline=Tree(baseline_label or str(baseline_root), str(baseline_root), names),
            engine=f"{engine.name} {engine.version}",
            findings=[
                *differential.findings(calls, baseline, roots, paths),
                *contract.findings,
                *named.findings,
            ],
            blind_spots=[
                *differential.blind_spots(calls, roots, paths),
                *contract.blind_spots,
                *named.blind_spots,
            ],
            coverage=_coverage(new, paths, contract.overrides, contract.classes, named),
            private=contract.private,
        )
        sides = {
            (s.path, s.line, s.column): found
            for s in sites
            if s.path in paths and s.value is not None
            for found in [side(new_names.resolve(s), s.value, provider_root, consumer.root)]
            if found is not None and found.exists
        }
        runs.append(
            AuditRun(report, new, consumer.root, provider_root, requests[0], baseline, sides)
        )
    return runs


@contextlib.contextmanager
def _status(console: Console | None, text: str) -> Iterator[None]:
    if console is None:
        yield
        return
    with console.status(text):
        yield


def _coverage(
    result: CheckResult, paths: Collection[Path], overrides: int, classes: int, named: NamedResult
) -> Coverage:
    refs = [r for r in result.references if r.path in paths]
    roles = Counter(r.role for r in refs if r.checked)
    return Coverage(
        files=len(paths),
        calls=roles["call"],
        attributes=roles["attribute"] + roles["module-attribute"],
        imports=roles["import"],
        unchecked=sum(1 for r in refs if not r.checked),
        overrides=overrides,
        classes=classes,
        named=named.named,
        rpc=named.rpc,
    )


def _tree(pin: str | Path, cache: Cache | None) -> Path:
    """A pin's source tree; a directory (a Path, or a string naming one) is used as it is."""
    if isinstance(pin, Path) or Path(pin).is_dir():
        return Path(pin)
    return source_tree(pin, cache)


def _baseline_of(consumer_root: Path, provider_root: Path) -> str:
    name = project_name(provider_root) or top_level_packages(provider_root)[0].name
    return declared_pin(consumer_root, name)


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
        baseline = _baseline_of(consumer_root, provider_root)
    baseline_root = _tree(baseline, cache)
    return run_audit(
        consumer_root,
        provider_root,
        baseline_root,
        labels=(*(names or (str(consumer), str(provider))), str(baseline)),
        engine=engine,
        progress=progress,
    )


def audit_consumers(
    consumers: Sequence[str | Path | Consumer],
    provider: str | Path,
    baseline: str | Path | None = None,
    *,
    baselines: Sequence[str | Path | None] | None = None,
    provider_label: str | None = None,
    cache: Cache | None = None,
    engine: Engine | None = None,
    progress: Console | None = None,
) -> list[AuditReport]:
    """Audit several consumers (pins, directories or :class:`Consumer`) against one provider.

    Each consumer's baseline is ``baselines[i]`` when given, else `baseline`, else the provider
    version the consumer declares; consumers with the same baseline are checked together (one
    engine check per provider tree, each seeing the others' types). One report per consumer,
    in the order given.
    """
    provider_root = _tree(provider, cache)
    given = [
        c if isinstance(c, Consumer) else Consumer(_tree(c, cache), label=str(c)) for c in consumers
    ]
    chosen = list(baselines) if baselines is not None else [None] * len(given)
    if len(chosen) != len(given):
        raise AuditError(f"{len(chosen)} baselines for {len(given)} consumers")
    pins = [
        pick or baseline or _baseline_of(c.root, provider_root)
        for c, pick in zip(given, chosen, strict=True)
    ]
    reports: dict[int, AuditReport] = {}
    for pin in dict.fromkeys(pins):
        indices = [i for i, p in enumerate(pins) if p == pin]
        runs = audit_runs(
            [given[i] for i in indices],
            provider_root,
            _tree(pin, cache),
            provider_label=provider_label or str(provider),
            baseline_label=str(pin),
            engine=engine,
            progress=progress,
        )
        reports.update((i, run.report) for i, run in zip(indices, runs, strict=True))
    return [reports[i] for i in range(len(given))]
