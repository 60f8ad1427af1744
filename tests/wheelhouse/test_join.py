"""Files split into parts and joined again by the shipped join.py (and the split/join commands)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchwheel.wheelhouse import join
from tests import support


def test_parse_size() -> None:
    assert join.parse_size("60MiB") == 60 * 1024 * 1024
    assert join.parse_size("64MB") == 64_000_000
    assert join.parse_size("1.5k") == 1500
    assert join.parse_size("4096") == 4096
    for bad in ("", "0", "60 parsecs", "-1MiB"):
        with pytest.raises(ValueError, match="size"):
            join.parse_size(bad)


def _random_file(path: Path, size: int) -> str:
    data = os.urandom(size)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def test_split_join_round_trip_with_the_shipped_script(tmp_path: Path) -> None:
    folder = tmp_path / "transfer"
    folder.mkdir()
    big = _random_file(folder / "big.whl", 2_500_000)
    exact = _random_file(folder / "exact.bin", 1_000_000)
    small = _random_file(folder / "small.whl", 1000)
    join.write_sums(
        folder,
        [("big.whl", big), ("exact.bin", exact), ("small.whl", small)],
    )

    split = join.split_dir(folder, 1_000_000)

    assert split == ["big.whl"]  # exactly the limit is not split
    names = sorted(p.name for p in folder.iterdir())
    assert "big.whl" not in names
    assert {"big.whl.001", "big.whl.002", "big.whl.003", "join.py", "parts.json"} <= set(names)
    assert max(p.stat().st_size for p in folder.iterdir()) <= 1_000_000
    manifest = json.loads((folder / "parts.json").read_text())
    (entry,) = manifest["files"]
    assert entry["sha256"] == big
    assert [p["size"] for p in entry["parts"]] == [1_000_000, 1_000_000, 500_000]

    # the destination has Python and nothing else: run the copy in isolated mode, elsewhere
    moved = shutil.copytree(folder, tmp_path / "arrived")
    proc = subprocess.run(
        [sys.executable, "-I", "join.py"], cwd=moved, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "joined  big.whl from 3 parts" in proc.stdout
    assert hashlib.sha256((moved / "big.whl").read_bytes()).hexdigest() == big
    assert not list(moved.glob("big.whl.0*"))
    # a second run finds everything joined and intact
    again = subprocess.run(
        [sys.executable, "-I", "join.py"], cwd=moved, capture_output=True, check=False
    )
    assert again.returncode == 0


def test_join_names_the_damaged_part_and_keeps_the_rest(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    sha = _random_file(folder / "big.whl", 300_000)
    join.split_dir(folder, 100_000)
    damaged = folder / "big.whl.002"
    data = bytearray(damaged.read_bytes())
    data[10] ^= 0xFF
    damaged.write_bytes(bytes(data))

    with pytest.raises(join.PartsError, match=r"big\.whl\.002.*copy it again"):
        join.join_dir(folder)

    assert not (folder / "big.whl").exists()  # no partial file
    assert sorted(p.name for p in folder.glob("big.whl.*")) == [
        "big.whl.001",
        "big.whl.002",
        "big.whl.003",
    ]
    proc = subprocess.run(
        [sys.executable, "-I", str(folder / "join.py")], capture_output=True, check=False
    )
    assert proc.returncode == 1
    assert b"big.whl.002" in proc.stderr
    # the shell way works too once the part is good again
    data[10] ^= 0xFF
    damaged.write_bytes(bytes(data))
    if shutil.which("sha256sum"):
        subprocess.run("cat big.whl.[0-9][0-9][0-9] > big.whl", shell=True, cwd=folder, check=True)
        assert hashlib.sha256((folder / "big.whl").read_bytes()).hexdigest() == sha


def test_split_and_join_commands(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    sha = _random_file(folder / "a.bin", 150_000)
    _random_file(folder / "b.bin", 150_000)
    cache = tmp_path / "cache"

    split = support.patchwheel(
        tmp_path, "split", str(folder), "a.bin", "--size", "64kB", cache=cache
    )
    assert split.returncode == 0, split.stderr
    assert (folder / "b.bin").is_file()  # only the named file
    assert sorted(p.name for p in folder.glob("a.bin.*")) == ["a.bin.001", "a.bin.002", "a.bin.003"]

    join = support.patchwheel(tmp_path, "join", str(folder), cache=cache)
    assert join.returncode == 0, join.stderr
    assert hashlib.sha256((folder / "a.bin").read_bytes()).hexdigest() == sha

    bad = support.patchwheel(tmp_path, "split", str(folder), "--size", "lots", cache=cache)
    assert bad.returncode == 1
    assert "lots" in bad.stderr
