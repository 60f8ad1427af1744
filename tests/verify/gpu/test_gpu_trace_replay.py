"""The drop list of the GPU target, replayed against the import trace the H200 recorded.

reports/gpu/2026-12-03-h200-vllm-0.26-user-job.json holds every run's imports and every module
a run looked for in vain (speculators' own scripts and both throughput sides). Today's
patches/vllm-0.26/wheelhouse.toml must hold against it: a requirement the wheelhouse drops is
never imported there, and looked for only by a package listed as running without it. (That
run failed this check on `tilelang`, which vLLM's JIT monitor probes inside `except
Exception`; the fix is the `tolerated-by` entry, and this test fails without it.)
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from patchwheel.verify.gpu.imports import DroppedRequirement, check_dropped, earlier_runs
from patchwheel.wheelhouse.settings import parse_drop

ROOT = Path(__file__).resolve().parents[3]
REPORT = ROOT / "reports" / "gpu" / "2026-12-03-h200-vllm-0.26-user-job.json"


def _dropped(target: str) -> list[DroppedRequirement]:
    path = ROOT / "patches" / target / "wheelhouse.toml"
    table = tomllib.loads(path.read_text("utf-8"))["drop"]
    return [
        DroppedRequirement(str(d.name), d.imports, d.tolerated_by, d.why)
        for d in parse_drop(table, path).values()
    ]


def test_the_recorded_trace_covers_the_users_runs() -> None:
    runs = earlier_runs(json.loads(REPORT.read_text("utf-8"))["imports"])
    labels = {run.label for run in runs}
    assert {"data_generation_offline.py", "train.py", "speed.py vllm"} <= labels, labels
    assert any("tilelang" in run.missing for run in runs)  # the probe the fix is about


def test_todays_drop_lists_hold_against_the_h200_trace() -> None:
    runs = earlier_runs(json.loads(REPORT.read_text("utf-8"))["imports"])
    for target in ("vllm-0.26", "spec-0.9-vllm-0.26"):
        assert check_dropped(runs, _dropped(target)) == [], target


def test_an_untolerated_probe_still_fails() -> None:
    runs = earlier_runs(json.loads(REPORT.read_text("utf-8"))["imports"])
    strict = [DroppedRequirement("tilelang", ("tilelang",))]
    problems = check_dropped(runs, strict)
    assert problems and "vllm.utils.jit_monitor" in problems[0]
