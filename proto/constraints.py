"""The consumer constraints of one built target: every built distribution at its exact version.

``python constraints.py build/<target> [OUT] [--hashes]`` reads ``build/<target>/manifest.json``
and writes (default ``build/<target>/constraints.txt``) one line per built wheel::

    speculators==0.3.0+pwa1533c67                      (default)
    speculators==0.3.0+pwa1533c67 --hash=sha256:d3e8... (--hashes)

The local label is part of the version, so ``==`` admits the built wheel only (a public
``0.3.0`` or ``0.9.0`` is excluded; PyPI refuses uploads with a local label). Hash lines: uv
checks them for the constrained files only; pip (23.2 and 26.3 alike) turns any hash in a
constraints file into hash-checking mode for every requirement, which fails unless the whole
closure is pinned and hashed, so pip gets the file without hashes. Standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HEADER = (
    "# Built by patchwheel, target {target}: pin every built distribution to the built file.\n"
    "# Use with the target's index: pip install --extra-index-url URL -c constraints.txt ...\n"
)


def constraint_lines(manifest: dict[str, object], hashes: bool = False) -> list[str]:
    """`name==version [--hash=sha256:HEX]` for each wheel of the manifest, sorted by name."""
    wheels = manifest["wheels"]
    if not isinstance(wheels, list):
        raise ValueError("manifest.json: 'wheels' is not a list")
    lines = []
    for wheel in wheels:
        name, version, digest = wheel["distribution"], wheel["version"], wheel["sha256"]
        if not (isinstance(digest, str) and len(digest) == 64):
            raise ValueError(f"manifest.json: {name} has no sha256")
        lines.append(f"{name}=={version}" + (f" --hash=sha256:{digest}" if hashes else ""))
    return sorted(lines)


def write_constraints(build_dir: Path, out: Path | None = None, hashes: bool = False) -> Path:
    manifest = json.loads((build_dir / "manifest.json").read_text(encoding="utf-8"))
    out = out or build_dir / "constraints.txt"
    lines = constraint_lines(manifest, hashes)
    text = HEADER.format(target=manifest["target"]) + "\n".join(lines) + "\n"
    out.write_text(text, encoding="utf-8")
    return out


if __name__ == "__main__":
    argv = [a for a in sys.argv[1:] if a != "--hashes"]
    if len(argv) not in (1, 2):
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    out = Path(argv[1]) if len(argv) == 2 else None
    print(write_constraints(Path(argv[0]), out, hashes="--hashes" in sys.argv))
