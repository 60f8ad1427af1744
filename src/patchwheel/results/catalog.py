"""The committed reports: found by globbing reports/, read, classified, and ordered.

Every JSON under ``reports/gpu/``, ``reports/cpu/``, ``reports/bench/``, ``reports/bisect/*/``
and ``reports/roll/*/`` is one report and gets one page; a new file there is picked up with no
change here. Which kind a file is comes from what it holds (a GPU report of the served
generation says ``"generation": "served"``), never from its name.

**Superseded.** A run measures stages (correctness, training, throughput, the user's job, …).
Reports of the same kind of run (generation, vLLM version, tensor parallel size) are compared
stage by stage: a report is *current* for a stage when no later report of its group measured
that stage, and *superseded* when it is current for none. Superseded reports keep their pages;
only current ones reach README.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchwheel.errors import ResultsError

KINDS = ("gpu", "cpu", "bench", "bisect", "roll")


@dataclass
class Report:
    """One committed report: where it is, what it is, and what its page is called."""

    kind: str  # gpu, cpu, bench, bisect or roll
    source: str  # the JSON's path relative to the checkout (posix)
    data: Any
    generation: str = ""  # generator or served (gpu, cpu)
    group: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    started: str = ""  # ISO time (or date) of its first run: the order within a group
    current_for: list[str] = field(default_factory=list)

    @property
    def stem(self) -> str:
        path = Path(self.source)
        # reports/bisect/<name>/bisect.json and reports/roll/<name>/roll.json: the folder names it
        return path.parent.name if self.kind in ("bisect", "roll") else path.stem

    @property
    def page(self) -> str:
        """The page's path under docs/results/ (posix)."""
        return f"{self.kind}/{self.stem}.md"

    @property
    def superseded(self) -> bool:
        return bool(self.stages) and not self.current_for


def _load(path: Path, root: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ResultsError(
            f"{path.relative_to(root).as_posix()}: not a readable JSON report ({exc}); "
            "restore it from git or remove it"
        ) from exc


def _version(packages: Any, name: str) -> str:
    for package in packages if isinstance(packages, list) else []:
        if isinstance(package, dict) and package.get("distribution") == name:
            return str(package.get("version"))
    return "?"


def _gpu(report: Report) -> None:
    data = report.data
    if not isinstance(data, dict):
        raise ResultsError(f"{report.source}: a GPU report is a JSON object")
    report.generation = "served" if data.get("generation") == "served" else "generator"
    runs = [r for r in data.get("runs") or [] if isinstance(r, dict)]
    if data.get("schema") == 1:  # one call: its stages are the sections it holds
        stages = [s for s in ("correctness", "throughput") if data.get(s)]
        tp = max(
            (c.get("tensor_parallel_size", 1) for c in data.get("correctness") or []), default=1
        )
        report.started = str(data.get("date", ""))
    else:
        stages = [s for r in runs for s in r.get("stages") or []]
        tp = data.get("tensor_parallel_size", 1)
        report.started = min((str(r.get("started")) for r in runs), default=str(data.get("date")))
    report.stages = tuple(sorted(set(stages)))
    report.group = ("gpu", report.generation, _version(data.get("packages"), "vllm"), f"tp{tp}")


def _cpu(report: Report) -> None:
    data = report.data
    if not isinstance(data, dict):
        raise ResultsError(f"{report.source}: a CPU report is a JSON object")
    report.generation = "served" if data.get("generation") == "served" else "generator"
    report.group = ("cpu", report.generation, str(data.get("target")))
    report.stages = ("verify",)
    report.started = str(data.get("started") or data.get("date") or report.stem)


def find_reports(root: Path) -> list[Report]:
    """Every committed report under ``root``/reports, classified, superseded ones marked;
    sorted by kind, then newest first."""
    base = root / "reports"
    globs = {
        "gpu": "gpu/*.json",
        "cpu": "cpu/*.json",
        "bench": "bench/*.json",
        "bisect": "bisect/*/bisect.json",
        "roll": "roll/*/roll.json",
    }
    reports: list[Report] = []
    for kind, pattern in globs.items():
        for path in sorted(base.glob(pattern)):
            report = Report(kind, path.relative_to(root).as_posix(), _load(path, root))
            if kind == "gpu":
                _gpu(report)
            elif kind == "cpu":
                _cpu(report)
            else:
                report.started = report.stem
            reports.append(report)
    _mark_current(reports)
    order = {kind: i for i, kind in enumerate(KINDS)}
    reports.sort(key=lambda r: (order[r.kind], _reverse(r.started), r.source))
    return reports


def _reverse(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)


def _mark_current(reports: list[Report]) -> None:
    groups: dict[tuple[str, ...], list[Report]] = {}
    for report in reports:
        if report.stages:
            groups.setdefault(report.group, []).append(report)
    for members in groups.values():
        members.sort(key=lambda r: (r.started, r.source))
        for i, report in enumerate(members):
            later = {s for other in members[i + 1 :] for s in other.stages}
            report.current_for = [s for s in report.stages if s not in later]
