"""Files split into size-limited parts and joined again, every byte checked by sha256.

For transfers that accept only files up to some size (64 MiB on some GPU machines). A split
folder holds ``NAME.001``, ``NAME.002`` … for each large file and ``parts.json``, which records
the sha256 and size of each part and of the whole file.

This module uses the standard library only: patchwheel copies it into every wheelhouse as
``join.py``, so the destination needs nothing but Python to reassemble and check the files::

    python3 join.py            # join the parts beside it, check every sha256, drop the parts
    python3 join.py --check    # only check the files listed in SHA256SUMS

Where Python is missing, ``cat NAME.[0-9][0-9][0-9] > NAME`` joins a file and
``sha256sum -c SHA256SUMS`` checks it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

MANIFEST = "parts.json"
SUMS = "SHA256SUMS"
SCHEMA = 1
CHUNK = 1 << 20
DEFAULT_PART_SIZE = 60 * 1024 * 1024
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
}


class PartsError(Exception):
    """A part or a joined file is missing or does not match its recorded sha256."""


def parse_size(text: str) -> int:
    """``60MiB`` → 62914560; ``64MB``, ``500k``, ``1GiB`` and plain byte counts work too."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (examples: 60MiB, 64MB, 1GiB, 1048576)")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size < 1:
        raise ValueError(f"size {text!r} must be at least one byte")
    return size


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def part_name(name: str, index: int) -> str:
    """The name of part ``index`` (1-based) of ``name``: ``NAME.001``."""
    return f"{name}.{index:03d}"


def split_file(path: Path, out_dir: Path, part_size: int) -> dict[str, Any]:
    """Write ``path``'s parts into ``out_dir``; return its ``parts.json`` entry.

    Each part is written to a temporary name and renamed when complete.
    """
    whole = hashlib.sha256()
    parts: list[dict[str, Any]] = []
    with path.open("rb") as src:
        index = 1
        while True:
            name = part_name(path.name, index)
            size, digest = _copy_part(src, out_dir / name, part_size, whole)
            if size == 0:
                (out_dir / f".{name}.tmp").unlink(missing_ok=True)
                break
            parts.append({"name": name, "size": size, "sha256": digest})
            index += 1
    return {
        "name": path.name,
        "size": path.stat().st_size,
        "sha256": whole.hexdigest(),
        "parts": parts,
    }


def _copy_part(src: BinaryIO, dest: Path, limit: int, whole: hashlib._Hash) -> tuple[int, str]:
    digest = hashlib.sha256()
    tmp = dest.with_name(f".{dest.name}.tmp")
    written = 0
    with tmp.open("wb") as out:
        while written < limit:
            chunk = src.read(min(CHUNK, limit - written))
            if not chunk:
                break
            digest.update(chunk)
            whole.update(chunk)
            out.write(chunk)
            written += len(chunk)
    if written:
        os.replace(tmp, dest)
    return written, digest.hexdigest()


def split_dir(directory: Path, part_size: int, *, names: list[str] | None = None) -> list[str]:
    """Split every file in ``directory`` larger than ``part_size`` (or only ``names``).

    The whole files are removed once their parts are written; ``parts.json`` and this module
    (as ``join.py``) are written beside them. Returns the names of the split files.
    """
    entries: list[dict[str, Any]] = _read_manifest(directory)["files"]
    done = {str(e["name"]) for e in entries}
    candidates = sorted(p for p in directory.iterdir() if p.is_file() and not p.is_symlink())
    split: list[str] = []
    for path in candidates:
        wanted = path.name in names if names is not None else True
        if not wanted or path.name in done or path.stat().st_size <= part_size:
            continue
        if path.name in (MANIFEST, SUMS, "join.py"):
            continue
        entries.append(split_file(path, directory, part_size))
        path.unlink()
        split.append(path.name)
    if split or names is not None:
        write_manifest(directory, entries, part_size)
        install_join_script(directory)
    return split


def write_manifest(directory: Path, entries: list[dict[str, Any]], part_size: int) -> None:
    """Write ``parts.json`` atomically."""
    data = {"schema": SCHEMA, "part-size": part_size, "files": entries}
    tmp = directory / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    os.replace(tmp, directory / MANIFEST)


def install_join_script(directory: Path) -> Path:
    """Copy this module into ``directory`` as ``join.py`` (stdlib only, runs anywhere)."""
    dest = directory / "join.py"
    tmp = directory / ".join.py.tmp"
    tmp.write_bytes(Path(__file__).read_bytes())
    tmp.chmod(0o755)
    os.replace(tmp, dest)
    return dest


def _read_manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST
    if not path.is_file():
        return {"files": []}
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    if data.get("schema") != SCHEMA:
        raise PartsError(f"{path}: unknown schema {data.get('schema')!r} (expected {SCHEMA})")
    return data


def join_dir(
    directory: Path, *, keep_parts: bool = False, log: Callable[[str], object] | None = None
) -> list[str]:
    """Reassemble every split file in ``directory``; each part and whole is sha256-checked.

    A whole file already present and intact is left alone. Returns the names joined.
    """
    say = log or _quiet
    joined: list[str] = []
    for entry in _read_manifest(directory)["files"]:
        name, sha, parts = entry["name"], entry["sha256"], entry["parts"]
        dest = directory / name
        if dest.is_file() and sha256_of(dest) == sha:
            say(f"ok      {name} (already joined)")
        else:
            _join_one(directory, name, sha, parts)
            joined.append(name)
            say(f"joined  {name} from {len(parts)} parts")
        if not keep_parts:
            for part in parts:
                (directory / part["name"]).unlink(missing_ok=True)
    return joined


def _join_one(directory: Path, name: str, sha: str, parts: list[dict[str, Any]]) -> None:
    tmp = directory / f".{name}.joining"
    whole = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for part in parts:
                path = directory / str(part["name"])
                if not path.is_file():
                    raise PartsError(f"{path}: part {part['name']} of {name} is missing; copy it")
                digest = hashlib.sha256()
                with path.open("rb") as src:
                    while chunk := src.read(CHUNK):
                        digest.update(chunk)
                        whole.update(chunk)
                        out.write(chunk)
                if digest.hexdigest() != part["sha256"]:
                    raise PartsError(
                        f"{path}: sha256 {digest.hexdigest()} but parts.json records "
                        f"{part['sha256']}; the part was damaged in transfer: copy it again"
                    )
        if whole.hexdigest() != sha:
            raise PartsError(
                f"{name}: the joined parts have sha256 {whole.hexdigest()}, "
                f"parts.json records {sha}; copy the parts again"
            )
        os.replace(tmp, directory / name)
    finally:
        tmp.unlink(missing_ok=True)


def check_sums(directory: Path, *, log: Callable[[str], object] | None = None) -> list[str]:
    """Check every file listed in ``SHA256SUMS``; return the problems (empty: all good)."""
    say = log or _quiet
    path = directory / SUMS
    if not path.is_file():
        return [f"{path} is missing"]
    problems: list[str] = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip():
            continue
        digest, _, name = line.partition("  ")
        target = directory / name.strip()
        if not target.is_file():
            problems.append(f"{target}: missing")
        elif sha256_of(target) != digest:
            problems.append(f"{target}: sha256 differs from SHA256SUMS (damaged; copy it again)")
        else:
            say(f"ok      {name.strip()}")
    return problems


def write_sums(directory: Path, files: list[tuple[str, str]]) -> None:
    """Write ``SHA256SUMS`` (``sha256sum -c`` format) for ``(name, sha256)`` pairs."""
    lines = "".join(f"{sha}  {name}\n" for name, sha in sorted(files))
    tmp = directory / f".{SUMS}.tmp"
    tmp.write_text(lines, "utf-8")
    os.replace(tmp, directory / SUMS)


def _quiet(message: str) -> object:
    del message
    return None


def main(argv: list[str] | None = None) -> int:
    """``join.py [DIR] [--check] [--keep-parts]``: join parts, then check SHA256SUMS."""
    parser = argparse.ArgumentParser(prog="join.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", type=Path, default=Path(__file__).parent)
    parser.add_argument("--check", action="store_true", help="only check SHA256SUMS")
    parser.add_argument("--keep-parts", action="store_true", help="keep the parts after joining")
    args = parser.parse_args(argv)
    directory = args.directory.resolve()
    try:
        if not args.check:
            join_dir(directory, keep_parts=args.keep_parts, log=print)
        problems = check_sums(directory, log=print) if (directory / SUMS).is_file() else []
    except PartsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not problems:
        print(f"all files in {directory} match their sha256")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
