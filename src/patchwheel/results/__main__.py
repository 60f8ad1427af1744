"""``python -m patchwheel.results [--check] [--root DIR]``: write (or check) docs/results/ and
README's status lines from the JSON reports under reports/."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from patchwheel.errors import PatchwheelError
from patchwheel.results.site import check, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m patchwheel.results",
        description="Write docs/results/ and README's results lines from reports/*.json.",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if any file differs"
    )
    parser.add_argument("--root", type=Path, default=Path(), help="the checkout (default: .)")
    args = parser.parse_args(argv)
    root = args.root
    if not (root / "reports").is_dir() or not (root / "README.md").is_file():
        print(f"error: {root} is no checkout (no reports/ or README.md)", file=sys.stderr)
        return 2
    try:
        if args.check:
            differ = check(root)
            for name in differ:
                print(f"differs from its JSON: {name}", file=sys.stderr)
            if differ:
                print("run: python -m patchwheel.results (then commit)", file=sys.stderr)
                return 1
            print("results: every page is what its JSON gives")
            return 0
        for name in write(root):
            print(f"wrote {name}")
    except PatchwheelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
