"""The audit report: findings, blind spots, private API and coverage; for people and as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from patchwheel import atomic
from patchwheel.audit.findings import Kind
from patchwheel.audit.signatures import ProviderSide, changed_names

SCHEMA = "patchwheel.audit/1"

#: What a static audit cannot see; printed with every report.
CANNOT_SEE = (
    "Behaviour drift: a call that keeps its signature but now returns another shape (one item "
    "instead of a list), a step that now needs a follow-up call, a default that flipped; an "
    "override the provider now calls at another moment, or expects another result from.",
    "Argument and return types: only the presence, names, kinds and arity of parameters are "
    "judged, for calls and overrides alike.",
    "Code the checker sees as Any: unannotated parameters, attributes mixed in at run time "
    "(what a worker extension reads from the worker), classes deriving from unresolved bases "
    "such as torch.nn.Module.",
    "Constructors of the consumer's subclasses of provider classes, except those the provider "
    "builds itself from a string (connectors named in a kv_transfer_config).",
    "Names built at run time: getattr with a computed name, a connector, class path or "
    "collective_rpc method that is not a string literal (each such site is listed as a blind "
    "spot), plugins registered through entry points.",
)
VERIFY_HINT = "Run `nox -s verify` (CPU extraction with the built wheels) to catch these."


@dataclass(frozen=True)
class Tree:
    """A source tree the audit read: its label (pin), root and packages."""

    label: str
    root: str
    packages: tuple[str, ...]


@dataclass(frozen=True)
class Finding:
    """New signature drift at one consumer site."""

    kind: Kind
    path: str  # relative to the consumer tree root
    line: int
    column: int
    source: str
    symbol: str
    detail: str | None
    message: str
    code: str
    new: ProviderSide
    old: ProviderSide | None
    changes: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    override: str | None = None  # the consumer's own definition (overrides)

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class BlindSpot:
    """A provider error the baseline already had, or a name the audit cannot resolve
    statically: either way the audit cannot judge this site."""

    kind: Kind
    path: str
    line: int
    source: str
    symbol: str
    message: str
    baseline_line: int

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class PrivateUse:
    """A private provider member (``_name``) the consumer overrides, calls or reads, as it
    already did at baseline: no contract covers it (a new one is a finding)."""

    path: str
    line: int
    source: str
    name: str
    symbol: str
    use: str  # override | call | read

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Coverage:
    """How much of the consumer's use of the provider the engine could resolve.

    `overrides`: methods of consumer classes that override a provider method at the new pin,
    in `classes` classes deriving from provider classes; `named`: classes (and module paths)
    named by string and resolved, `rpc`: methods named by string (``collective_rpc``).
    """

    files: int
    calls: int
    attributes: int
    imports: int
    unchecked: int
    overrides: int = 0
    classes: int = 0
    named: int = 0
    rpc: int = 0


@dataclass
class AuditReport:
    consumer: Tree
    provider: Tree
    baseline: Tree
    engine: str
    findings: list[Finding] = field(default_factory=list)
    blind_spots: list[BlindSpot] = field(default_factory=list)
    coverage: Coverage = field(default_factory=lambda: Coverage(0, 0, 0, 0, 0))
    private: list[PrivateUse] = field(default_factory=list)

    @property
    def exit_status(self) -> int:
        """1 when the new provider breaks the consumer, else 0."""
        return 1 if self.findings else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "consumer": asdict(self.consumer),
            "provider": asdict(self.provider),
            "baseline": asdict(self.baseline),
            "engine": self.engine,
            "findings": [_finding_dict(f) for f in self.findings],
            "blind_spots": [{**asdict(b), "location": b.location} for b in self.blind_spots],
            "private_api": [{**asdict(u), "location": u.location} for u in self.private],
            "coverage": asdict(self.coverage),
            "cannot_see": list(CANNOT_SEE),
            "verify": VERIFY_HINT,
            "exit_status": self.exit_status,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    def write_json(self, path: Path) -> None:
        """Write the JSON report beside `path`, then rename it into place."""
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, self.to_json())

    def summary(self) -> dict[str, Any]:
        """The few facts a build manifest records about the audit."""
        return {
            "engine": self.engine,
            "provider": self.provider.label,
            "baseline": self.baseline.label,
            "findings": len(self.findings),
            "blind_spots": len(self.blind_spots),
            "private_api": len(self.private),
            "symbols": sorted({f"{f.kind}:{f.symbol}" for f in self.findings}),
        }

    def render(self, console: Console) -> None:
        render(self, console)


def _side_dict(side: ProviderSide | None) -> dict[str, Any] | None:
    if side is None:
        return None
    sig = side.signature
    return {
        "symbol": side.symbol,
        "exists": side.exists,
        "location": side.location,
        "signature": side.render() if side.exists else None,
        "params": [asdict(p) for p in sig.params] if sig and sig.params is not None else None,
        "returns": sig.returns if sig else None,
    }


def _finding_dict(finding: Finding) -> dict[str, Any]:
    data = asdict(finding)
    data["kind"] = str(finding.kind)
    data["location"] = finding.location
    data["new"] = _side_dict(finding.new)
    data["old"] = _side_dict(finding.old)
    return data


def _by_file(items: Iterable[Finding]) -> Iterable[tuple[str, list[Finding]]]:
    ordered = sorted(items, key=lambda f: (f.path, f.line, f.column))
    for path, group in groupby(ordered, key=lambda f: f.path):
        yield path, list(group)


def _side(label: str, side: ProviderSide | None, keep: set[str]) -> str:
    if side is None:
        return f"    {label}: (not resolved)"
    where = f"  [dim]{escape(side.location)}[/dim]" if side.location else ""
    full = side.render()
    text = full if len(full) <= 160 else side.render(keep)
    return f"    {label}: {escape(text)}{where}"


def _focus(finding: Finding) -> set[str]:
    """Parameters worth showing in a long signature: the one at fault and those that changed."""
    named = {n.strip() for n in (finding.detail or "").split(",")}
    return named | changed_names(finding.old, finding.new)


def render(report: AuditReport, console: Console) -> None:
    """The human report: findings grouped by consumer file, then blind spots and limits."""
    console.print(
        f"[bold]API-drift audit[/bold] {escape(report.consumer.label)} against "
        f"{escape(report.provider.label)} (baseline {escape(report.baseline.label)}, "
        f"{escape(report.engine)})"
    )
    for path, findings in _by_file(report.findings):
        console.print(f"\n[bold underline]{escape(path)}[/bold underline]")
        for f in findings:
            console.print(
                f"  [red]{f.kind}[/red] [bold]{escape(f.location)}[/bold]  "
                f"{escape(f.symbol)}{escape(f' ({f.detail})') if f.detail else ''}"
            )
            console.print(f"    [dim]|[/dim] {escape(f.source)}")
            console.print(f"    {escape(f.message)}")
            if f.override is not None:
                console.print(f"    override: {escape(f.override)}")
            keep = _focus(f)
            console.print(_side("old", f.old, keep))
            console.print(_side("new", f.new, keep))
            for change in f.changes:
                console.print(f"    - {escape(change)}")
            for hint in f.hints:
                console.print(f"    now defined at {escape(hint)}")
    if report.blind_spots:
        console.print(
            f"\n[bold yellow]Blind spots[/bold yellow] ({len(report.blind_spots)}): these sites "
            "already fail the check at baseline, or name what the audit cannot resolve "
            "statically, so the audit cannot judge them"
        )
        for b in report.blind_spots:
            where = f"{b.kind} {escape(b.location)}  {escape(b.symbol)}"
            console.print(f"  {where}: {escape(b.message)}")
    if report.private:
        console.print(
            f"\n[bold yellow]Private provider API[/bold yellow] ({len(report.private)}), used "
            "as at baseline; no contract covers it"
        )
        for u in report.private:
            console.print(f"  {u.use} {escape(u.location)}  {escape(u.symbol)}")
    console.print("\n" + coverage_line(report))
    console.print("[bold]Not visible to this audit:[/bold]")
    for item in CANNOT_SEE:
        console.print(f"  - {escape(item)}")
    console.print(f"  {escape(VERIFY_HINT)}")
    verdict = (
        f"[red]{len(report.findings)} finding(s)[/red]"
        if report.findings
        else "[green]no signature drift[/green]"
    )
    console.print(f"\nResult: {verdict}, {len(report.blind_spots)} blind spot(s).")


def coverage_line(report: AuditReport) -> str:
    """``Checked N calls, M attribute reads, …``: what the engine resolved and judged."""
    cov = report.coverage
    named = f"{cov.named} string-named class{'es' if cov.named != 1 else ''}"
    parts = [
        f"{cov.calls} calls",
        f"{cov.attributes} attribute reads",
        f"{cov.imports} imports",
        f"{cov.overrides} overrides (in {cov.classes} subclasses of provider classes)",
        named,
        f"{cov.rpc} methods named by string (collective_rpc)",
    ]
    text = (
        f"Checked {', '.join(parts[:-1])} and {parts[-1]} of "
        f"{', '.join(report.provider.packages)} in {cov.files} files"
    )
    return text + (f"; {cov.unchecked} could not be checked (Any-typed)." if cov.unchecked else ".")
