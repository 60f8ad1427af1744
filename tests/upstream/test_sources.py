"""Source trees in the cache are checked file by file before use, and re-extracted if edited."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from patchwheel.config.lock import LockedPin
from patchwheel.config.pins import parse_pin
from patchwheel.config.targets import PinSpec
from patchwheel.errors import FetchError
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.sources import source_tree_of, tree_entries
from tests import support


@pytest.fixture
def pinned(tmp_path: Path) -> tuple[PinSpec, LockedPin, Cache]:
    """A local sdist pinned by path, locked by its sha256, and a fresh cache."""
    src = tmp_path / "src"
    (src / "tinyproj").mkdir(parents=True)
    (src / "tinyproj" / "__init__.py").write_text("VALUE = 1\n")
    sdist = support.make_sdist(src, tmp_path / "dist", "tinyproj", "1.0")
    pin = parse_pin(f"tinyproj @ {sdist.as_uri()}")
    spec = PinSpec("tinyproj", pin, "sdist")
    entry = LockedPin(
        "tinyproj", pin.text, "sdist", sha256=support.sha256(sdist), filename=sdist.name
    )
    return spec, entry, Cache(tmp_path / "cache")


def tamper_edit(tree: Path) -> None:
    (tree / "tinyproj" / "__init__.py").write_text("VALUE = 2\n")


def tamper_add(tree: Path) -> None:
    (tree / "tinyproj" / "evil.py").write_text("import os\n")


def tamper_delete(tree: Path) -> None:
    (tree / "tinyproj" / "__init__.py").unlink()


def tamper_mode(tree: Path) -> None:
    (tree / "tinyproj" / "__init__.py").chmod(0o755)


def tamper_record(tree: Path) -> None:
    tree.with_name(tree.name + ".json").unlink()


@pytest.mark.parametrize(
    "tamper", [tamper_edit, tamper_add, tamper_delete, tamper_mode, tamper_record]
)
def test_a_modified_cached_tree_is_extracted_again(pinned, tamper) -> None:
    spec, entry, cache = pinned
    first = source_tree_of(spec, entry, cache).path
    pristine = tree_entries(first)
    assert pristine["tinyproj/__init__.py"].startswith("file:-:")
    tamper(first)
    assert tree_entries(first) != pristine or not first.with_name(first.name + ".json").exists()

    again = source_tree_of(spec, entry, cache).path

    assert again == first
    assert tree_entries(again) == pristine
    assert (again / "tinyproj" / "__init__.py").read_text() == "VALUE = 1\n"


def test_an_intact_tree_is_used_as_it_is(pinned) -> None:
    spec, entry, cache = pinned
    first = source_tree_of(spec, entry, cache).path
    inode = (first / "tinyproj" / "__init__.py").stat().st_ino
    assert source_tree_of(spec, entry, cache).path == first
    assert (first / "tinyproj" / "__init__.py").stat().st_ino == inode  # not re-extracted


@pytest.mark.parametrize("member", ["p-1.0/.GIT/config", "p-1.0/src/.git", "p-1.0/a/.Git/HEAD"])
def test_an_archive_holding_a_git_path_is_refused(tmp_path: Path, member: str) -> None:
    archive = tmp_path / "tinyproj-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("p-1.0/setup.py", member):
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"x=1"))
    pin = parse_pin(f"tinyproj @ {archive.as_uri()}")
    spec = PinSpec("tinyproj", pin, "sdist")
    entry = LockedPin(
        "tinyproj", pin.text, "sdist", sha256=support.sha256(archive), filename=archive.name
    )
    with pytest.raises(FetchError, match=r"a path into a git repository"):
        source_tree_of(spec, entry, Cache(tmp_path / "cache"))
