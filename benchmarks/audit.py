"""Benchmark: one API-drift audit per consumer, cold (empty engine cache) and warm.

    python benchmarks/audit.py [--case NAME ...] [--cores 2] [--warm 3] [--json out.json]
    python benchmarks/audit.py --consumer PIN --provider PIN [--baseline PIN]

Cases (default: all):

- ``speculators``: speculators 0.3.0 against vllm 0.16.0 (baseline vllm 0.11.0, the version
  it declares): calls into vLLM's engine internals;
- ``hs-connectors``: hs-connectors 0.9.0 against vllm 0.33.0 (baseline vllm 0.31.0, its
  release's): a plugin, subclasses of vLLM's connector classes with their overrides and
  classes named by string.

Source trees come from patchwheel's cache (fetched once, not timed). "cold" is the first audit
with a fresh engine cache: mypy analyses both vLLM trees; "warm" is the best of `--warm`
repeats with that cache (only the consumer is re-checked). The process is pinned to `--cores`
CPUs (the engine's worker processes inherit it). Goal: cold < 15 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from patchwheel.audit import AuditReport, MypyEngine, run_audit
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import source_tree

CASES = {
    "speculators": ("speculators==0.3.0", "vllm==0.16.0", "vllm==0.11.0"),
    "hs-connectors": ("hs-connectors==0.9.0", "vllm==0.33.0", "vllm==0.31.0"),
}
GOAL_S = 15.0


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the engine's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed_audit(trees: dict[str, Path], engine: MypyEngine) -> tuple[float, float, AuditReport]:
    """Wall and CPU seconds for one audit (CPU: what other load on the machine does not
    change), and its report."""
    start, cpu = time.perf_counter(), _cpu()
    report = run_audit(trees["consumer"], trees["provider"], trees["baseline"], engine=engine)
    return time.perf_counter() - start, _cpu() - cpu, report


def measure(pins: tuple[str, str, str], warm_runs: int, cache: Cache) -> dict[str, object]:
    consumer, provider, baseline = pins
    trees = {
        "consumer": source_tree(consumer, cache),
        "provider": source_tree(provider, cache),
        "baseline": source_tree(baseline, cache),
    }
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as scratch:
        engine = MypyEngine(cache_dir=Path(scratch))
        cold, cold_cpu, report = timed_audit(trees, engine)
        warm_runs_s = [timed_audit(trees, engine)[:2] for _ in range(max(1, warm_runs))]
        warm, warm_cpu = min(warm_runs_s)
    cov = report.coverage
    return {
        "consumer": consumer,
        "provider": provider,
        "baseline": baseline,
        "engine": f"{engine.name} {engine.version}",
        "cold_s": round(cold, 2),
        "warm_s": round(warm, 2),
        "cold_cpu_s": round(cold_cpu, 2),
        "warm_cpu_s": round(warm_cpu, 2),
        "findings": len(report.findings),
        "blind_spots": len(report.blind_spots),
        "private_api": len(report.private),
        "coverage": {
            "calls": cov.calls,
            "attributes": cov.attributes,
            "imports": cov.imports,
            "overrides": cov.overrides,
            "classes": cov.classes,
            "string_named": cov.named,
            "rpc": cov.rpc,
        },
        "goal_cold_s": GOAL_S,
        "cold_within_goal": cold < GOAL_S,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="default: all")
    parser.add_argument("--consumer", help="audit this pin instead of the cases")
    parser.add_argument("--provider", default="vllm==0.16.0")
    parser.add_argument("--baseline", help="default: the version the consumer declares")
    parser.add_argument("--cores", type=int, default=2, help="CPUs to pin to (0: all)")
    parser.add_argument("--warm", type=int, default=3, help="warm repeats (best is kept)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()

    available = sorted(os.sched_getaffinity(0))
    if args.cores:
        os.sched_setaffinity(0, available[: args.cores])
    cores = len(os.sched_getaffinity(0))
    load = os.getloadavg()

    if args.consumer:
        if not args.baseline:
            parser.error("--consumer needs --baseline")
        cases = [(args.consumer, args.provider, args.baseline)]
    else:
        cases = [CASES[name] for name in args.case or CASES]
    cache = Cache()
    results = []
    for pins in cases:
        figures = {**measure(pins, args.warm, cache), "cores": cores, "load_average": load}
        results.append(figures)
        cov = figures["coverage"]
        assert isinstance(cov, dict)
        cold = float(str(figures["cold_s"]))
        print(
            f"audit {pins[0]} vs {pins[1]} (baseline {pins[2]}) on {cores} core(s): "
            f"cold {cold:.2f} s ({figures['cold_cpu_s']} s CPU), warm {figures['warm_s']} s "
            f"({figures['warm_cpu_s']} s CPU); {figures['findings']} finding(s); "
            f"{cov['calls']} calls, {cov['overrides']} overrides in {cov['classes']} classes, "
            f"{cov['string_named']} string-named classes; "
            f"goal cold < {GOAL_S:.0f} s: {'met' if cold < GOAL_S else 'MISSED'}"
        )
    print(f"load average at the start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
