"""Benchmark: overlay build of the vllm 0.32.0 CUDA wheel vs a plain copy of that file.

    python benchmarks/overlay.py [--repeat 3] [--json out.json]

Fetches the wheel through the configured index (cached), makes a test patch to
``vllm/v1/request.py`` from the wheel's own copy, then times (best of N, warm page cache):
the overlay build, and ``shutil.copyfile`` of the same wheel. Goal: overlay <= 3x the copy.
"""

from __future__ import annotations

import argparse
import difflib
import json
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from patchwheel.patching.patches import parse_patch
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.fetch import fetch_index_file
from patchwheel.wheels.overlay import build_overlay

WHEEL = "vllm-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"
SHA256 = "5e2ecdc5b0baf72921c288486417ca82778456a448e4fe60b62ee43c0dfc8611"
PATCHED = "vllm/v1/request.py"


def test_patch(wheel: Path) -> bytes:
    """A format-patch that edits one line of the wheel's own request.py."""
    with zipfile.ZipFile(wheel) as zf:
        original = zf.read(PATCHED).decode()
    edited = original.replace("import enum\n", "import enum  # benchmark\n", 1)
    diff = difflib.unified_diff(
        original.splitlines(keepends=True),
        edited.splitlines(keepends=True),
        f"a/{PATCHED}",
        f"b/{PATCHED}",
    )
    header = (
        "From: bench <bench@example.com>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n"
        "Subject: [PATCH] benchmark\n\nOrigin: benchmark\n---\n"
        f"diff --git a/{PATCHED} b/{PATCHED}\n"
    )
    return (header + "".join(diff)).encode()


def best_of(repeat: int, action: object) -> float:
    """The fastest of ``repeat`` timed runs of ``action()``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()

    wheel = fetch_index_file("vllm", WHEEL, SHA256, Cache(), what="vllm==0.32.0 (cuda wheel)")
    patch = parse_patch("0001-benchmark.patch", test_patch(wheel))
    with tempfile.TemporaryDirectory(dir=Cache().root) as tmp:
        out = Path(tmp)

        def overlay() -> None:
            build_overlay(
                wheel,
                [patch],
                out,
                new_version="0.32.0+pwbench000",
                provenance=b"{}\n",
                date_time=(2026, 10, 18, 10, 3, 52),
                filename=WHEEL,
            )

        def copy() -> None:
            shutil.copyfile(wheel, out / "copy.whl")

        copy()  # warm the page cache for both
        overlay_s = best_of(args.repeat, overlay)
        copy_s = best_of(args.repeat, copy)
    figures = {
        "wheel": WHEEL,
        "wheel_mb": round(wheel.stat().st_size / 1e6, 1),
        "overlay_s": round(overlay_s, 3),
        "copy_s": round(copy_s, 3),
        "ratio": round(overlay_s / copy_s, 2),
        "goal_ratio": 3.0,
    }
    print(f"wheel          {WHEEL} ({figures['wheel_mb']} MB)")
    print(f"overlay build  {overlay_s:.3f} s")
    print(f"file copy      {copy_s:.3f} s")
    print(f"ratio          {figures['ratio']}x (goal <= 3x)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
