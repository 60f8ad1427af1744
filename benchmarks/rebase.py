"""Benchmark: rebase a 30-patch series on real vLLM sources from one release to another.

    python benchmarks/rebase.py [--old 0.32.0] [--new 0.31.0] [--patches 30] [--json out.json]

Makes a throw-away checkout whose target pins the vLLM sdist ``--old`` (cached; fetched through
the configured index the first time), builds its vendor tree, commits ``--patches`` one-line
edits to as many files there and turns them into a series with ``patchwheel export``. Two
thirds of the files differ between the two releases (offsets, 3-way merges, drops), a third do
not. Then it times ``patchwheel rebase --onto vllm==NEW`` end to end: the new sources imported
into the vendor repo, the replay and classification, the rewritten series applied strictly
again, the target and lock rewritten, the report written. Goal: under 30 s.
A conflict (rare by construction) is skipped and counted; its time is included.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from patchwheel.config.targets import load_target
from patchwheel.patching import vendor
from patchwheel.patching.export import export_project
from patchwheel.rebase import skip, start
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.resolve import lock_target
from patchwheel.upstream.sources import archive_epoch, artifact_path, source_tree
from patchwheel.workspace import Workspace

MESSAGE = """bench: tag {path}

A one-line change made by benchmarks/rebase.py.

Origin: patchwheel
Forwarded: not-needed
Drop-When: never
"""


def pick_edits(old: Path, new: Path, count: int, seed: int) -> list[tuple[str, int]]:
    """(file, line) pairs: a line whose neighbours are unique in the old file and still present
    in the new one, so the 3-way merge can place the edit (no conflict by construction)."""
    rng = random.Random(seed)
    files = sorted(str(p.relative_to(old)) for p in (old / "vllm").rglob("*.py"))
    both = [f for f in files if (new / f).is_file()]
    differ = [f for f in both if (old / f).read_bytes() != (new / f).read_bytes()]
    same = [f for f in both if f not in set(differ)]
    rng.shuffle(differ)
    rng.shuffle(same)
    wanted = count - count // 3
    chosen: list[tuple[str, int]] = []
    for pool, limit in ((differ, wanted), (same, count)):
        for rel in pool:
            if len(chosen) >= limit:
                break
            line = _stable_line(old / rel, new / rel)
            if line is not None:
                chosen.append((rel, line))
    return chosen[:count]


def _stable_line(old: Path, new: Path) -> int | None:
    a = old.read_text("utf-8", "replace").splitlines()
    b = new.read_text("utf-8", "replace").splitlines()
    triples_b = Counter(tuple(b[i : i + 3]) for i in range(len(b) - 2))
    triples_a = Counter(tuple(a[i : i + 3]) for i in range(len(a) - 2))
    for i in range(len(a) // 2, len(a) - 2):
        triple = tuple(a[i : i + 3])
        if a[i + 1].strip() and triples_a[triple] == 1 and triples_b[triple] == 1:
            return i + 2  # 1-based number of the middle line
    return None


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="0.32.0")
    parser.add_argument("--new", default="0.31.0")
    parser.add_argument("--patches", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    cache = Cache()
    old_tree = source_tree(f"vllm=={args.old}", cache)
    new_tree = source_tree(f"vllm=={args.new}", cache)
    with tempfile.TemporaryDirectory(prefix="rebase-bench-") as tmp:
        root = Path(tmp)
        workspace = Workspace.at(root)
        target_dir = workspace.patches / "bench"
        target_dir.mkdir(parents=True)
        (target_dir / "target.toml").write_text(
            f'description = "rebase benchmark"\ndefault = true\n\n'
            f'[projects.vllm]\nbuild = "source"\npin = "vllm=={args.old}"\n'
        )
        (target_dir / "vllm").mkdir()
        (target_dir / "vllm" / "series").write_text("# benchmark series\n")
        target = load_target(workspace.patches, "bench")
        lock = lock_target(target, cache)

        t0 = time.perf_counter()
        vendor_dir = workspace.vendor / "bench" / "vllm"
        upstream = vendor.Upstream(
            identity=lock["vllm"].identity,
            description=f"vllm=={args.old} (sdist {lock['vllm'].identity[:12]})",
            epoch=0,
            tree=old_tree,
        )

        upstream = vendor.Upstream(
            upstream.identity,
            upstream.description,
            archive_epoch(artifact_path(target.projects[0].source, lock["vllm"], cache)),
            tree=old_tree,
        )
        vendor.prepare(vendor_dir, upstream, [])
        edits = pick_edits(old_tree, new_tree, args.patches, args.seed)
        for number, (rel, line) in enumerate(edits, start=1):
            path = vendor_dir / rel
            lines = path.read_text("utf-8").splitlines(keepends=True)
            lines[line - 1] = lines[line - 1].rstrip("\n") + f"  # patchwheel bench {number}\n"
            path.write_text("".join(lines), "utf-8")
            git(vendor_dir, "commit", "-q", "-a", "-m", MESSAGE.format(path=rel))
        exported = export_project(workspace, "bench", "vllm")
        setup = time.perf_counter() - t0

        t1 = time.perf_counter()
        outcome = start(workspace, cache, "bench", [f"vllm=={args.new}"], audit=None)
        skipped = 0
        while outcome.status == "stopped":
            skipped += 1
            outcome = skip(workspace, cache, "bench", audit=None)
        seconds = time.perf_counter() - t1

        classes = Counter(row["class"] for p in outcome.report["projects"] for row in p["patches"])
        result = {
            "old": args.old,
            "new": args.new,
            "patches": len(exported.names),
            "files-differing-between-releases": sum(
                (old_tree / rel).read_bytes() != (new_tree / rel).read_bytes() for rel, _ in edits
            ),
            "classes": dict(classes),
            "conflicts-skipped": skipped,
            "rebase-seconds": round(seconds, 2),
            "setup-seconds": round(setup, 2),
            "goal-seconds": 30,
        }
    print(
        f"rebase of {result['patches']} patches, vllm {args.old} -> {args.new}: "
        f"{seconds:.1f} s (goal < 30 s); classes {dict(classes)}; "
        f"setup (vendor import + commits + export) {setup:.1f} s"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if seconds < 30 else 1


if __name__ == "__main__":
    sys.exit(main())
