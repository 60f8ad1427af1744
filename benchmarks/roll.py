"""Benchmark: roll a target onto nightlies of a vLLM-shaped channel served on loopback.

    python benchmarks/roll.py [--json out.json]

The world of the roll tests (``tests/roll_world.py``: a vLLM-shaped git repository whose
nightlies are published like https://wheels.vllm.ai, a tiny speculators-shaped consumer, a
target pinned to the first nightly with a two-patch series). Times each step of
``patchwheel roll`` (discover, rebase, build with its audit, verify with the install check) for:

* clean      — onto the next nightly (every patch applies);
* drop-when  — onto the nightly where one patch's Drop-When holds (dropped);
* conflict   — onto a nightly that conflicts: stopped, resolved by hand, ``--continue``;
* remembered — the same conflict on a further nightly, resolved from the remembered resolution;
* checks     — the target's own nightly, never rolled: no rebase, its build and verification;
* up-to-date — the same nightly again (discovery, and the green report of that build).

Each roll starts from the same built target (``--new-target``), so the figures are comparable.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' world builders

from tests.roll_world import make_world, write_target

from patchwheel import roll
from patchwheel.building.run import build_target
from patchwheel.config.targets import load_target
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.resolve import lock_target
from patchwheel.workspace import Workspace

STEPS = ("discover", "rebase", "build", "verify", "total")


def resolve_by_hand(vendor: Path) -> None:
    """The resolution a person would write for P1 against N4's engine.py, staged."""
    path = vendor / "vllm" / "engine.py"
    text = path.read_text()
    start, end = text.index("<<<<<<<"), text.index(">>>>>>>")
    end = text.index("\n", end) + 1
    path.write_text(text[:start] + '        self.mode = "compiled-cudagraph"\n' + text[end:])
    subprocess.run(["git", "-C", str(vendor), "add", "vllm/engine.py"], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="roll-bench-") as tmp, make_world(Path(tmp)) as world:
        root = Path(tmp) / "checkout"
        write_target(world, root)
        workspace = Workspace.at(root)
        cache = Cache(world.cache)
        lock_target(load_target(workspace.patches, "nightly"), cache)
        build_target("nightly", workspace, cache)

        def run(name: str, dev: int, output: str | None) -> roll.RollOutcome:
            began = time.perf_counter()
            outcome = roll.start(
                workspace,
                cache,
                "nightly",
                to=world.build(dev).version,
                new_target=output,
                verify="install",
            )
            if outcome.status == "needs-person" and outcome.report.get("stop"):
                resolve_by_hand(root / "vendor" / (output or "nightly") / "vllm")
                outcome = roll.resume(workspace, cache, "nightly")
            wall = time.perf_counter() - began
            rows[name] = {
                "status": outcome.status,
                **{s: outcome.report["timings"].get(s) for s in STEPS},
                "wall": round(wall, 2),
            }
            return outcome

        run("clean", 2, "b-clean")
        run("drop-when", 3, "b-drop")
        run("conflict", 4, "b-conflict")
        run("remembered", 5, "b-remembered")
        run("checks", 1, None)  # at its pins, never rolled: built, audited, verified there
        run("up-to-date", 1, None)
    print(f"{'roll':<12} {'status':<11}" + "".join(f"{s:>10}" for s in (*STEPS, "wall")))
    for name, row in rows.items():
        cells = "".join(
            f"{row[s]:>9.2f}s" if isinstance(row[s], float) else f"{'-':>10}"
            for s in (*STEPS, "wall")
        )
        print(f"{name:<12} {row['status']:<11}{cells}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["status"] in ("green", "up-to-date") for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
