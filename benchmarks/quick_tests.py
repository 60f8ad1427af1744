"""Benchmark: the everyday loop, `nox -s quick` on a fresh clone of the committed HEAD.

    python benchmarks/quick_tests.py [--json out.json] [--log quick.log]

Clones the repository's HEAD into a temporary folder (nothing of this checkout's .nox, build/
or caches travels: the session makes its venv, from pip's own cache where it has the wheels),
runs `nox -s quick` there with a fresh PATCHWHEEL_CACHE, shows its output as it comes and
prints the figures: the wall time (venv included), pytest's counts and time, the cores and the
load average at the start. Exit status: the session's. Goal: < 5 min on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
from pathlib import Path
from typing import Any

from ci_run import COUNT, run_in_fresh_clone

GOAL_S = 300
# pytest's last line; -q prints it bare: "479 passed, 2 warnings in 325.81s (0:05:25)"
SUMMARY = re.compile(r"^=*\s*(.*\d+ (?:passed|failed).*) in ([\d.]+)s")


def figures(output: str) -> dict[str, Any]:
    """pytest's counts and seconds, from its last summary line."""
    counts: dict[str, int] = {}
    pytest_s: float | None = None
    for line in output.splitlines():
        found = SUMMARY.match(line.strip())
        if found:
            counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
                      for n, kind in COUNT.findall(found.group(1))}  # fmt: skip
            pytest_s = float(found.group(2))
    return {"counts": counts, "tests": sum(counts.values()), "pytest_s": pytest_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--log", type=Path, help="keep the session's whole output here")
    args = parser.parse_args()
    commit, text, returncode, wall, load = run_in_fresh_clone(
        lambda _clone: ["nox", "-s", "quick"], {}, "quick_tests: nox -s quick"
    )
    if args.log:
        args.log.write_text(text, "utf-8")
    found = figures(text)
    result: dict[str, Any] = {
        "commit": commit,
        "date": datetime.date.today().isoformat(),
        "returncode": returncode,
        "wall_s": round(wall, 1),
        "goal_s": GOAL_S,
        "within_goal": wall < GOAL_S,
        "cores": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load],
        "counts": found["counts"],
        "tests": found["tests"],
        "pytest_s": found["pytest_s"],
        "setup_s": None if found["pytest_s"] is None else round(wall - found["pytest_s"], 1),
    }
    print(json.dumps(result, indent=2))
    minutes, seconds = divmod(round(wall), 60)
    verdict = "within" if wall < GOAL_S else "OVER"
    print(f"nox -s quick on a fresh clone: {minutes} min {seconds} s ({verdict} the 5 min goal)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    return returncode


if __name__ == "__main__":
    raise SystemExit(main())
