"""The bisect report: ``build/<target>/bisect.json`` (machines) and ``bisect.md`` (people)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from patchwheel.bisect.history import Revision
from patchwheel.bisect.probe import FindingKey, StepRecord

SCHEMA = "patchwheel.bisect/1"


@dataclass(frozen=True)
class Subject:
    """The finding a result is about: where the consumer uses what, and the patch there."""

    key: FindingKey
    symbol: str
    location: str
    source: str
    message: str
    patch: str | None = None  # the series patch that wrote the consumer line

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "key": str(self.key), **{"kind": self.key.kind}}


@dataclass(frozen=True)
class FlipResult:
    """The first step of the range where a finding's status is bad's."""

    subject: Subject
    change: str  # "appears" (the consumer breaks) or "disappears" (what a patch answers)
    commit: Revision
    parent: Revision
    position: int  # the commit's step: 1 … steps
    old: str  # the moving side at the parent, in one line
    new: str  # … and at the commit
    changes: tuple[str, ...]
    audit_runs: int
    probes: tuple[str, ...]  # the revisions whose runs narrowed it, in order

    def to_dict(self) -> dict[str, Any]:
        return {
            "finding": self.subject.to_dict(),
            "change": self.change,
            "commit": self.commit.to_dict(),
            "parent": self.parent.to_dict(),
            "position": self.position,
            "signature": {"old": self.old, "new": self.new, "changes": list(self.changes)},
            "audit_runs": self.audit_runs,
            "probes": list(self.probes),
        }


@dataclass
class BisectReport:
    """What a bisect found, with everything needed to redo it."""

    target: str
    consumer_target: str
    project: str
    moving: str  # "provider" or "consumer": whose history was bisected
    mode: str  # "git" (commits) or "releases" (sdists from the index)
    good: Revision
    bad: Revision
    steps: int  # revisions after good, bad included
    consumer: str
    provider: str
    baseline: str
    source: dict[str, Any]
    engine: str
    at_good: list[Subject]
    at_bad: list[Subject]
    flips: list[FlipResult] = field(default_factory=list)
    unchanged: list[Subject] = field(default_factory=list)  # present at both ends
    runs: list[StepRecord] = field(default_factory=list)
    seconds: float = 0.0
    command: str | None = None

    @property
    def history_ends_at_bad(self) -> bool:
        """Whether the source holds nothing after bad on bad's line (git: main line)."""
        return bool(self.source.get("later_on_main_line", 1) == 0)

    def unchanged_note(self) -> str:
        """What a finding present at both ends means, for this range and this source."""
        where = (
            f"before {self.good.short} or after {self.bad.short}: the history available in "
            f"this {'repository' if self.mode == 'git' else 'index'} ends at {self.bad.short} "
            f"({self.bad.date[:10]}), so a change after it lies beyond the available history"
            if self.history_ends_at_bad
            else f"before {self.good.short} or after {self.bad.short}: widen the range"
        )
        return (
            f"present at both ends of the range, so no {self.unit} inside it changes their status; "
            f"each is absent at the baseline ({self.baseline}). The change lies {where}."
        )

    @property
    def unit(self) -> str:
        return "commit" if self.mode == "git" else "release"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "command": self.command,
            "target": self.target,
            "consumer_target": self.consumer_target,
            "project": self.project,
            "moving": self.moving,
            "mode": self.mode,
            "good": self.good.to_dict(),
            "bad": self.bad.to_dict(),
            "steps": self.steps,
            "consumer": self.consumer,
            "provider": self.provider,
            "baseline": self.baseline,
            "source": self.source,
            "engine": self.engine,
            "findings_at_good": [s.to_dict() for s in self.at_good],
            "findings_at_bad": [s.to_dict() for s in self.at_bad],
            "flips": [f.to_dict() for f in self.flips],
            "unchanged": [s.to_dict() for s in self.unchanged],
            "unchanged_note": self.unchanged_note() if self.unchanged else None,
            "audit_runs": len(self.runs),
            "runs": [r.to_dict() for r in self.runs],
            "seconds": round(self.seconds, 2),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def to_markdown(self) -> str:
        return "\n".join(_markdown(self)) + "\n"


def _short(revision_id: str) -> str:
    return Revision(revision_id, "", "").short


def _pr(revision: Revision) -> str:
    return f"#{revision.pr}" if revision.pr else "—"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown(r: BisectReport) -> list[str]:
    lines = [
        f"# Bisect of {r.project} {r.good.short}..{r.bad.short} (target {r.target})",
        "",
    ]
    if r.command:
        lines += [f"Command: `{r.command}`", ""]
    unit = r.unit
    lines += [
        f"- Consumer: {r.consumer}",
        f"- Provider: {r.provider}",
        f"- Baseline: {r.baseline}",
        f"- Range: {r.steps} {unit}s after good `{r.good.id}` ({r.good.date}) up to bad "
        f"`{r.bad.id}` ({r.bad.date})" + (", first-parent chain" if r.mode == "git" else ""),
        f"- Source: {_source(r)}",
        f"- Engine: {r.engine}",
        f"- Findings: {len(r.at_good)} at good, {len(r.at_bad)} at bad; {len(r.flips)} change "
        f"inside the range, {len(r.unchanged)} present at both ends",
        f"- Audit runs: {len(r.runs)} (the two ends and {len(r.runs) - 2} steps), "
        f"{r.seconds:.0f} s in total",
        "",
    ]
    if r.flips:
        lines += [
            f"## First {unit} of each change",
            "",
            f"| finding | patch | change | {unit} | date | PR | audit runs |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for f in r.flips:
            lines.append(
                f"| {_cell(str(f.subject.key))} | {f.subject.patch or '—'} | {f.change} | "
                f"`{f.commit.short}` {_cell(f.commit.subject)} | {f.commit.date} | "
                f"{_pr(f.commit)} | {f.audit_runs} |"
            )
        for f in r.flips:
            lines += [
                "",
                f"### {_cell(str(f.subject.key))}",
                "",
                f"- Consumer: `{f.subject.location}` `{f.subject.source}`",
                f"- Symbol: `{f.subject.symbol}`"
                + (f" (patch {f.subject.patch})" if f.subject.patch else ""),
                f"- {f.change.capitalize()} at {unit} {f.position} of {r.steps}: `{f.commit.id}` "
                f'{f.commit.date} "{f.commit.subject}"'
                + (f" (PR #{f.commit.pr})" if f.commit.pr else ""),
                f'- Before it: `{f.parent.id}` {f.parent.date} "{f.parent.subject}"',
                f"- Old: `{f.old}`",
                f"- New: `{f.new}`",
            ]
            lines += [f"  - {c}" for c in f.changes]
            lines.append(f"- Audit runs: {f.audit_runs} (" + ", ".join(map(_short, f.probes)) + ")")
    if r.unchanged:
        lines += ["", "## Present at both ends", "", f"These findings are {r.unchanged_note()}", ""]
        lines += [
            f"- {_cell(str(s.key))}: `{s.symbol}`"
            + (f" (patch {s.patch})" if s.patch else "")
            + f" — `{s.source}`"
            for s in r.unchanged
        ]
    if not r.flips and not r.unchanged:
        lines += ["No finding at either end: nothing to bisect.", ""]
    lines += [
        "",
        "## Audit runs",
        "",
        f"| run | step | {unit} | {'checkout' if r.mode == 'git' else 'sdist'} s | audit s | "
        "findings |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for n, run in enumerate(r.runs, 1):
        lines.append(
            f"| {n} | {run.step} | `{_short(run.revision)}` | {run.checkout_s:.1f} | "
            f"{run.audit_s:.1f} | "
            f"{run.findings} |"
        )
    return lines


def _source(r: BisectReport) -> str:
    s = r.source
    if r.mode != "git":
        return f"releases of {r.project} on {', '.join(s.get('indexes', []))}" + (
            f"; newest release there {s['newest']}" if s.get("newest") else ""
        )
    text = f"`{s.get('path')}` ({s.get('refs')} refs"
    newest = s.get("newest_commit")
    if isinstance(newest, dict):
        text += f"; newest commit of any branch {str(newest['id'])[:10]} {newest['date']}"
    text += ")"
    later = s.get("later_on_main_line")
    if later == 0:
        text += (
            f"; no commit after bad on bad's first-parent line: the history ends at {r.bad.short}"
        )
    elif later:
        text += f"; {later} later commits on bad's line ({s.get('later_through')})"
    return text
