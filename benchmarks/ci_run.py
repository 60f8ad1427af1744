"""Benchmark: CI as CI runs it, `.ci/run` on a fresh clone of the committed HEAD (CI=true).

    python benchmarks/ci_run.py [--json out.json] [--log ci.log]

Clones the repository's HEAD into a temporary folder (nothing of this checkout's .nox, build/
or caches travels), runs `.ci/run` there with CI=true and a fresh PATCHWHEEL_CACHE, shows its
output as it comes, and prints the figures: the wall time, the lint verdict, pytest's counts
and the reasons of every skipped test. `--json` writes them (commit them under reports/bench/:
`python -m patchwheel.results` publishes them). Exit status: `.ci/run`'s. Goal: < 90 min.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL_MIN = 90
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")
SUMMARY = re.compile(r"^=+ (.*\d+ (?:passed|failed).*) in ([\d.]+)s")
SKIP = re.compile(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$")


def figures(output: str) -> dict[str, Any]:
    """pytest's last summary line, the skip reasons of its -ra report and lint's verdict."""
    counts: dict[str, int] = {}
    pytest_s: float | None = None
    skips: list[str] = []
    for line in output.splitlines():
        found = SUMMARY.match(line.strip())
        if found:
            counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
                      for n, kind in COUNT.findall(found.group(1))}  # fmt: skip
            pytest_s = float(found.group(2))
        skipped = SKIP.match(line.strip())
        if skipped:
            skips.append(f"{skipped.group(1)} x {skipped.group(2)}")
    return {
        "lint_passed": "Session lint was successful" in output,
        "counts": counts,
        "tests": sum(counts.values()),
        "pytest_s": pytest_s,
        "skipped_reasons": skips,
    }


def run_in_fresh_clone(
    argv: Callable[[Path], list[str]], env: dict[str, str], what: str
) -> tuple[str, str, int, float, tuple[float, float, float]]:
    """Run ``argv(clone)`` in a fresh clone of HEAD with a fresh cache, its output shown as it
    comes: (commit, output, exit status, wall seconds, load average at the start)."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="pw-bench-") as tmp:
        clone = Path(tmp) / "patchwheel"
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True)
        full_env = {**os.environ, **env, "PATCHWHEEL_CACHE": str(Path(tmp) / "cache")}
        load = os.getloadavg()
        print(f"{what} in {clone} at {commit[:7]}, load average {load[0]:.1f}", flush=True)
        started = time.monotonic()
        proc = subprocess.Popen(
            argv(clone), cwd=clone, env=full_env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        assert proc.stdout is not None
        output = []
        for line in proc.stdout:
            sys.stdout.write(line)
            output.append(line)
        returncode = proc.wait()
        wall = time.monotonic() - started
    return commit, "".join(output), returncode, wall, load


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--log", type=Path, help="keep .ci/run's whole output here")
    args = parser.parse_args()
    commit, text, returncode, wall, load = run_in_fresh_clone(
        lambda clone: [str(clone / ".ci" / "run")], {"CI": "true"}, ".ci/run"
    )
    if args.log:
        args.log.write_text(text, "utf-8")
    result: dict[str, Any] = {
        "commit": commit,
        "date": datetime.date.today().isoformat(),
        "returncode": returncode,
        "wall_s": round(wall, 1),
        "cores": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load],
        **figures(text),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    return returncode


if __name__ == "__main__":
    raise SystemExit(main())
