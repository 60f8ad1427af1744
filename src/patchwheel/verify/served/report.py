"""The served generation's ``verify-cpu.json`` and its summary for people.

The same file name, and the same contract the rest of patchwheel reads (``target``,
``inputs``, ``status``, ``packages`` with the sha256 of every built file installed: what
``publish --require-verified`` checks), as the generator generation's report
(``verify.report``); its body is the served path's (``generation: "served"``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from patchwheel import atomic
from patchwheel.errors import VerifyError
from patchwheel.verify.oracles.compare import TensorCheck
from patchwheel.verify.report import PackageRecord
from patchwheel.verify.served.results import ServedResult

GENERATION = "served"


@dataclass
class ServedReport:
    """One CPU verification of a served target."""

    target: str
    status: str  # "passed", "mismatch" or "crashed"
    inputs: str | None = None
    packages: list[PackageRecord] = field(default_factory=list)
    install: dict[str, Any] | None = None
    served: ServedResult | None = None
    cross_generation: str | None = None  # why the generator comparison did not run
    error: str | None = None
    wall_s: float | None = None

    @property
    def checks(self) -> list[TensorCheck]:
        return self.served.checks if self.served else []

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "generation": GENERATION,
            "inputs": self.inputs,
            "status": self.status,
            "packages": [asdict(p) for p in self.packages],
            "install": self.install,
            "served": self.served.to_json() if self.served else None,
            "cross_generation": self.cross_generation,
            "error": self.error,
            "wall_s": self.wall_s,
        }


REPORT_KEYS = frozenset(ServedReport("t", "crashed").to_json())


def write_report(report: ServedReport, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, report.to_json())


def read_served_report(path: Path) -> dict[str, Any]:
    """A served verify-cpu.json as the code wrote it; VerifyError for anything else."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise VerifyError(f"{path}: not a readable verify report ({exc})") from exc
    if not isinstance(data, dict) or data.get("generation") != GENERATION:
        raise VerifyError(f"{path} is not a report of the served generation")
    if set(data) != REPORT_KEYS:
        raise VerifyError(
            f"{path} is not a report as verify writes it (keys differ): run it again instead "
            "of editing its report"
        )
    return data


def print_summary(report: ServedReport, console: Console) -> None:
    """Packages, each server's run and checks, then the verdict."""
    packages = Table(title=f"verify-cpu {report.target} (served): installed")
    for column in ("distribution", "version", "sha256", "files re-hashed"):
        packages.add_column(column)
    for p in report.packages:
        packages.add_row(
            p.distribution,
            p.version,
            (p.sha256 or "")[:16],
            "" if p.files_checked is None else str(p.files_checked),
        )
    console.print(packages)
    served = report.served
    if served is not None:
        runs = Table(title=f"vllm serve runs (layer ids {served.layer_ids}, {served.dtype})")
        for column in ("connector", "ready s", "generate s", "files", "stored", "checks", "failed"):
            runs.add_column(column)
        for run in served.connectors:
            runs.add_row(
                f"{run.name} ({run.kv_transfer_config.get('kv_connector')})",
                "" if run.ready_s is None else f"{run.ready_s:.1f}",
                "" if run.generate_s is None else f"{run.generate_s:.1f}",
                str(run.files),
                run.stored or "",
                str(len(run.checks)),
                str(sum(not c.ok for c in run.checks)),
            )
        console.print(runs)
        stages = ", ".join(f"{k} {v:.1f} s" for k, v in served.stage_seconds.items())
        console.print(f"user's served path {served.status}: {stages}")
        if served.generator is not None:
            gen = served.generator
            console.print(
                f"vs the generator generation: {gen['samples']} samples, {gen['checks']} "
                f"checks, {len(gen['failed'])} failed"
            )
    if report.cross_generation:
        console.print(f"vs the generator generation: {report.cross_generation}")
    if report.status == "passed":
        console.print("[bold green]verify-cpu passed[/] (served generation)")
    else:
        console.print(f"[bold red]verify-cpu {report.status}[/]: {report.error}")
