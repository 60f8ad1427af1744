"""Benchmark: one API-drift audit, cold (empty engine cache) and warm.

    python benchmarks/audit.py [--provider vllm==0.16.0] [--cores 2] [--warm 3] [--json out.json]

Audits speculators 0.3.0 against the provider (baseline: vllm==0.11.0, the version it
declares). Source trees come from patchwheel's cache (fetched once, not timed). "cold" is the
first audit with a fresh engine cache: mypy analyses both vLLM trees; "warm" is the best of
`--warm` repeats with that cache (only the consumer is re-checked). The process is pinned to
`--cores` CPUs (the engine's worker processes inherit it). Goal: cold < 15 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from patchwheel.audit import MypyEngine, run_audit
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import source_tree

CONSUMER = "speculators==0.3.0"
BASELINE = "vllm==0.11.0"


def timed_audit(trees: dict[str, str | Path], engine: MypyEngine) -> tuple[float, int]:
    """Seconds for one audit, and its number of findings."""
    start = time.perf_counter()
    report = run_audit(
        Path(trees["consumer"]),
        Path(trees["provider"]),
        Path(trees["baseline"]),
        engine=engine,
    )
    return time.perf_counter() - start, len(report.findings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", default="vllm==0.16.0")
    parser.add_argument("--cores", type=int, default=2, help="CPUs to pin to (0: all)")
    parser.add_argument("--warm", type=int, default=3, help="warm repeats (best is kept)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()

    available = sorted(os.sched_getaffinity(0))
    if args.cores:
        os.sched_setaffinity(0, available[: args.cores])
    cores = len(os.sched_getaffinity(0))

    cache = Cache()
    trees: dict[str, str | Path] = {
        "consumer": source_tree(CONSUMER, cache),
        "provider": source_tree(args.provider, cache),
        "baseline": source_tree(BASELINE, cache),
    }
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as scratch:
        engine = MypyEngine(cache_dir=Path(scratch))
        cold, findings = timed_audit(trees, engine)
        warm = min(timed_audit(trees, engine)[0] for _ in range(max(1, args.warm)))

    figures = {
        "consumer": CONSUMER,
        "provider": args.provider,
        "baseline": BASELINE,
        "engine": f"{engine.name} {engine.version}",
        "cores": cores,
        "cold_s": round(cold, 2),
        "warm_s": round(warm, 2),
        "findings": findings,
        "goal_cold_s": 15.0,
        "cold_within_goal": cold < 15.0,
    }
    print(
        f"audit {CONSUMER} vs {args.provider} (baseline {BASELINE}) on {cores} core(s): "
        f"cold {cold:.2f} s, warm {warm:.2f} s, {findings} finding(s); "
        f"goal cold < 15 s: {'met' if cold < 15.0 else 'MISSED'}"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
