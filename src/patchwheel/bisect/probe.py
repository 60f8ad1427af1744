"""One probe of the search: bring the moving tree to a step, audit, and name what the audit found.

The moving side is the provider (the usual case: the consumer is a target's patched vendor tree,
the provider's history moves) or the consumer (its own history moves against a fixed provider).
A finding is known across steps by its key: the consumer site (path, line, column) when the
consumer stands still, the provider symbol when the consumer moves (its lines shift); with the
kind and the one name at fault (a finding that names several missing arguments, or an override
that no longer accepts several of its base's parameters, gives one key per parameter, so each is
bisected on its own). Override findings sit on the consumer's ``def`` line; the moving side of
one is the provider base method there (see :meth:`AuditRun.side`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from rich.console import Console

from patchwheel.audit.engine import Engine
from patchwheel.audit.findings import Kind
from patchwheel.audit.report import Finding
from patchwheel.audit.run import AuditRun, audit_run
from patchwheel.audit.signatures import ProviderSide
from patchwheel.bisect.history import Revision
from patchwheel.errors import BisectError, PatchwheelError

Side = Literal["provider", "consumer"]
_NAMED = (Kind.MISSING_NAME, Kind.MISSING_ATTRIBUTE)
# Findings naming several parameters: each parameter may flip at its own commit.
_PER_PARAMETER = (Kind.MISSING_ARGUMENT, Kind.OVERRIDE_SIGNATURE)


@dataclass(frozen=True, order=True)
class FindingKey:
    """How one finding is recognised at every step."""

    kind: str
    detail: str
    anchor: str  # "path:line:column" in the consumer, or the provider symbol

    def __str__(self) -> str:
        return (
            f"{self.kind} {self.detail} at {self.anchor}"
            if self.detail
            else (f"{self.kind} at {self.anchor}")
        )


def keys_of(finding: Finding, moving: Side) -> Iterator[FindingKey]:
    """The keys of one finding (one per argument for several missing arguments)."""
    anchor = (
        f"{finding.path}:{finding.line}:{finding.column}"
        if moving == "provider"
        else finding.symbol
    )
    details = (
        (finding.detail or "").split(", ")
        if finding.kind in _PER_PARAMETER
        else [finding.detail or ""]
    )
    for detail in details:
        yield FindingKey(str(finding.kind), detail, anchor)


class Trees(Protocol):
    """The moving side's source trees, one per step."""

    revisions: list[Revision]

    def tree(self, step: int) -> Path:
        """The tree of `step`, on disk (a reused checkout moves there)."""
        ...

    def provenance(self) -> dict[str, object]:
        """Where the steps come from, and how far the source reaches after bad."""
        ...


@dataclass(frozen=True)
class StepRecord:
    """One audit run of the search, for the report and the benchmark.

    `checkout_s` is what bringing the moving tree to the step took: a git checkout in the
    reused tree, or fetching and extracting a release's sdist (cached after the first time).
    """

    step: int
    revision: str
    checkout_s: float
    audit_s: float
    findings: int

    def to_dict(self) -> dict[str, object]:
        return {
            "step": self.step,
            "revision": self.revision,
            "checkout_s": round(self.checkout_s, 3),
            "audit_s": round(self.audit_s, 3),
            "findings": self.findings,
        }


class Prober:
    """Audits the consumer against the provider at each step; remembers every run."""

    def __init__(
        self,
        trees: Trees,
        *,
        moving: Side,
        fixed: Path,
        baseline: Path,
        packages: tuple[str, ...],
        engine: Engine,
        console: Console,
        label: str,
    ) -> None:
        self.trees = trees
        self.moving = moving
        self.fixed = fixed
        self.baseline = baseline
        self.packages = packages
        self.engine = engine
        self.console = console
        self.label = label
        self.runs: dict[int, AuditRun] = {}
        self.records: list[StepRecord] = []

    def __call__(self, step: int) -> set[FindingKey]:
        revision = self.trees.revisions[step]
        number = len(self.records) + 1
        total = len(self.trees.revisions) - 1
        where = "good" if step == 0 else "bad" if step == total else f"{step}/{total}"
        self.console.print(
            f"bisect {self.label} run {number}: {revision.short} ({where}, {revision.date[:10]}) "
            f"{revision.subject[:70]}"
        )
        start = time.perf_counter()
        try:
            tree = self.trees.tree(step)
            checkout_s = time.perf_counter() - start
            run = self._audit(tree)
        except PatchwheelError as exc:
            raise BisectError(
                f"the audit at {revision.id} ({revision.subject}) could not run: {exc}"
            ) from exc
        audit_s = time.perf_counter() - start - checkout_s
        self.runs[step] = run
        keys = {k for f in run.report.findings for k in keys_of(f, self.moving)}
        self.records.append(StepRecord(step, revision.id, checkout_s, audit_s, len(keys)))
        self.console.print(
            f"  {len(keys)} finding(s); checkout {checkout_s:.1f} s, audit {audit_s:.1f} s"
        )
        return keys

    def _audit(self, tree: Path) -> AuditRun:
        consumer, provider = (self.fixed, tree) if self.moving == "provider" else (tree, self.fixed)
        return audit_run(
            consumer,
            provider,
            self.baseline,
            consumer_packages=self.packages if self.moving == "consumer" else None,
            provider_packages=self.packages if self.moving == "provider" else None,
            engine=self.engine,
            # The consumer and baseline stand still while the provider moves: check them once.
            reuse=next(iter(self.runs.values()), None) if self.moving == "provider" else None,
        )

    def finding(self, step: int, key: FindingKey) -> Finding | None:
        """The finding `key` names in the run of `step` (None: absent there)."""
        for finding in self.runs[step].report.findings:
            if key in set(keys_of(finding, self.moving)):
                return finding
        return None

    def side(self, step: int, key: FindingKey, like: Finding) -> View:
        """What the moving side shows of `key` at `step` (moves the tree there if needed).

        Provider moves: the provider symbol's signature (or that it is absent), read from the
        step's own sources. Consumer moves: the consumer's source line at fault, or that no
        such use is left.
        """
        found = self.finding(step, key)
        if self.moving == "consumer":
            if found is None:
                return View(f"(no {like.kind} use of {like.symbol} left in the consumer)")
            return View(f"{found.location}: {found.source}")
        if found is not None:
            return View(found.new.render(), found.new)
        self.trees.tree(step)
        name = like.detail if like.kind in _NAMED else None
        side = self.runs[step].side(
            like.path, like.line, like.column, symbol=like.symbol, name=name
        )
        return View(side.render(), side)


@dataclass(frozen=True)
class View:
    """One side of a flip in words, with the provider symbol's description where it has one."""

    text: str
    provider: ProviderSide | None = None
