"""Benchmark: bisect time per step and in total, on the test fixture and on vLLM's real history.

    python benchmarks/bisect_speed.py [--real] [--mirror PATH] [--json out.json]

Fixture: the tests' vLLM-shaped repository (75 first-parent commits, a keyword removed at
step 41; ``tests/bisect/_history.py``) and a throw-away checkout whose target pins its first
commit. The bisect v0.1.0..v0.2.0 (70 commits) runs twice: cold (a fresh audit engine cache
and a new checkout) and warm (the same checkout path and engine cache, as a second bisect of
one target finds them).

``--real`` (when the neuralmagic mirror of vLLM exists, or ``--mirror PATH``): target
vllm-0.32's patched speculators against vLLM's history dcfebf93f4..2f41c894e3 (1333
first-parent commits), in this checkout with patchwheel's own cache, as `nox -s bisect` runs
it. Takes minutes. ``--json`` writes the figures (commit them under reports/bench/:
``python -m patchwheel.results`` publishes them).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from patchwheel.audit import MypyEngine
from patchwheel.bisect import BisectReport, bisect_target
from patchwheel.upstream.cache import Cache
from patchwheel.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
MIRROR = Path("/work/.mirror/neuralmagic+vllm/repo")


@dataclass(frozen=True)
class Figures:
    """One bisect: its range, its audit runs and their times."""

    label: str
    range: str
    commits: int
    audit_runs: int
    ends_s: list[float]  # good, bad (checkout + audit)
    steps_s: list[float]  # each later run, in order
    checkout_max_s: float
    total_s: float
    located: list[str]

    @classmethod
    def of(cls, label: str, report: BisectReport, wall: float) -> Figures:
        def cost(i: int) -> float:
            return round(report.runs[i].checkout_s + report.runs[i].audit_s, 2)

        return cls(
            label=label,
            range=f"{report.good.short}..{report.bad.short}",
            commits=report.steps,
            audit_runs=len(report.runs),
            ends_s=[cost(0), cost(1)],
            steps_s=[cost(i) for i in range(2, len(report.runs))],
            checkout_max_s=round(max(r.checkout_s for r in report.runs), 2),
            total_s=round(wall, 1),
            located=[
                f"{f.subject.key.detail} → {f.commit.short} {f.commit.subject} "
                f"({f.audit_runs} runs)"
                for f in report.flips
            ],
        )

    @property
    def median_s(self) -> float:
        return statistics.median(self.steps_s) if self.steps_s else 0.0

    def line(self) -> str:
        steps = ", ".join(f"{s:.1f}" for s in self.steps_s)
        return (
            f"{self.label}: {self.range} ({self.commits} commits): {self.audit_runs} audit runs "
            f"in {self.total_s:.1f} s; ends {self.ends_s[0]:.1f} + {self.ends_s[1]:.1f} s; "
            f"steps {steps} s (median {self.median_s:.1f} s; checkout ≤ "
            f"{self.checkout_max_s:.1f} s); {'; '.join(self.located)}"
        )

    def row(self) -> str:
        span = f"{min(self.steps_s):.1f} to {max(self.steps_s):.1f}" if self.steps_s else "-"
        return (
            f"| {self.label} `{self.range}` | {self.commits} | {self.audit_runs} | "
            f"{self.ends_s[0]:.1f} + {self.ends_s[1]:.1f} | {span} (median {self.median_s:.1f}) "
            f"| {self.total_s:.0f} s |"
        )


def fixture(scratch: Path) -> list[Figures]:
    """The tests' history: the same bisect cold, then warm."""
    sys.path.insert(0, str(ROOT))
    from tests.bisect import _history  # noqa: PLC0415 (the tests' fixture, only here)

    setup = _history.make_setup(scratch)
    _history.lock(setup)
    engine = MypyEngine(cache_dir=scratch / "audit")
    out = []
    for label in ("fixture, cold", "fixture, warm"):
        start = time.perf_counter()
        report = bisect_target(
            _history.workspace(setup),
            Cache(setup.cache),
            "old",
            good="v0.1.0",
            bad="v0.2.0",
            repo=setup.history.repo,
            engine=engine,
            console=Console(file=io.StringIO()),
        )
        out.append(Figures.of(label, report, time.perf_counter() - start))
    return out


def real(mirror: Path) -> Figures:
    """vllm-0.32's patched speculators over vLLM's history, as `nox -s bisect` runs it."""
    start = time.perf_counter()
    report = bisect_target(
        Workspace.at(ROOT),
        Cache(),
        "vllm-0.32",
        good="dcfebf93f4",
        bad="2f41c894e3",
        repo=mirror,
    )
    return Figures.of("vLLM history", report, time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", action="store_true", help="also bisect vLLM's real history")
    parser.add_argument("--mirror", type=Path, default=MIRROR, help="a clone of vLLM")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bisect-bench-") as scratch:
        results = fixture(Path(scratch))
    for figures in results:
        print(figures.line(), flush=True)
    if args.real:
        if args.mirror.is_dir():
            results.append(real(args.mirror))
            print(results[-1].line())
        else:
            print(f"vLLM history: skipped ({args.mirror} does not exist)")
    if args.json:
        args.json.write_text(json.dumps([asdict(f) for f in results], indent=2) + "\n")


if __name__ == "__main__":
    main()
