"""``patchwheel export``: vendor-tree commits become the series' patch files."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests import support
from tests.conftest import Checkout
from tests.integration.test_rebase import (
    make_checkout,
    path_of,
    replace_line,
    snapshot_files,
    write_series,
)


@pytest.fixture
def built(tmp_path: Path) -> tuple[Checkout, list[str]]:
    co = make_checkout(tmp_path)
    names = write_series(
        co,
        [
            ("m_clean", replace_line(10, "M_CLEAN_10 = 'one'"), "first: patch m_clean"),
            ("m_offset", replace_line(10, "M_OFFSET_10 = 'two'"), "second: patch m_offset"),
        ],
    )
    assert co.run("lock").returncode == 0
    result = co.run("build", "--no-audit")
    assert result.returncode == 0, result.stderr
    return co, names


def vendor_of(co: Checkout) -> Path:
    return co.vendor / "tiny" / "tinyproj"


def commit(vendor: Path, module: str, line: str, message: str) -> None:
    target = vendor / path_of(module)
    target.write_text(replace_line(12, line)(target.read_text()))
    support.run_git(vendor, "commit", "-q", "-a", "-m", message)


def export(co: Checkout) -> support.subprocess.CompletedProcess[str]:
    return co.run("export", "--project", "tinyproj")


def wheel_text(co: Checkout, member: str) -> str:
    manifest = json.loads((co.build / "tiny" / "manifest.json").read_text())
    path = co.build / "tiny" / "wheels" / manifest["wheels"][0]["filename"]
    with zipfile.ZipFile(path) as zf:
        return zf.read(member).decode()


def test_new_commit_becomes_the_next_patch_and_builds(built: tuple[Checkout, list[str]]) -> None:
    co, names = built
    vendor = vendor_of(co)
    commit(
        vendor,
        "m_merged",
        "M_MERGED_12 = 'three'",
        "third: patch m_merged\n\nWhy.\n\nOrigin: test\nForwarded: no\nDrop-When: never\n",
    )
    result = export(co)
    assert result.returncode == 0, result.stderr
    new = "0003-third-patch-m_merged.patch"
    assert f"wrote {co.series_dir() / new}" in " ".join(result.stderr.split())
    series = (co.series_dir() / "series").read_text()
    assert series == "# test series\n" + "\n".join([*names, new]) + "\n"
    text = (co.series_dir() / new).read_text()
    assert text.startswith("From 0000000000000000000000000000000000000000 ")
    assert "Subject: [PATCH] third: patch m_merged" in text and "Drop-When: never" in text
    assert "+M_MERGED_12 = 'three'" in text

    build = co.run("build", "--no-audit")
    assert build.returncode == 0, build.stderr
    assert "applied" not in build.stderr  # the vendor tree already holds the exported series
    assert "M_MERGED_12 = 'three'" in wheel_text(co, "tinyproj/m_merged.py")
    again = export(co)
    assert again.returncode == 0 and "nothing to export" in again.stderr


def test_edited_and_removed_commits(built: tuple[Checkout, list[str]]) -> None:
    co, names = built
    vendor = vendor_of(co)
    second = support.run_git(vendor, "rev-parse", "HEAD")
    support.run_git(vendor, "reset", "-q", "--hard", "HEAD~1")
    target = vendor / path_of("m_clean")
    target.write_text(target.read_text().replace("M_CLEAN_10 = 'one'", "M_CLEAN_10 = 'uno'"))
    support.run_git(vendor, "commit", "-q", "-a", "--amend", "--no-edit")
    support.run_git(vendor, "cherry-pick", second)
    first_before = (co.series_dir() / names[0]).read_bytes()
    result = export(co)
    assert result.returncode == 0, result.stderr
    first = (co.series_dir() / names[0]).read_text()
    assert first.encode() != first_before and "+M_CLEAN_10 = 'uno'" in first
    assert "Subject: [PATCH 1/2] first: patch m_clean" in first  # the old prefix is kept
    assert (co.series_dir() / "series").read_text().splitlines()[1:] == names

    support.run_git(vendor, "reset", "-q", "--hard", "HEAD~1")
    removed = export(co)
    assert removed.returncode == 0, removed.stderr
    assert not (co.series_dir() / names[1]).exists()
    assert (co.series_dir() / "series").read_text() == f"# test series\n{names[0]}\n"
    build = co.run("build", "--no-audit")
    assert build.returncode == 0, build.stderr
    assert "M_OFFSET_10 = 10" in wheel_text(co, "tinyproj/m_offset.py")


def test_refusals(built: tuple[Checkout, list[str]]) -> None:
    co, names = built
    vendor = vendor_of(co)
    first = co.series_dir() / names[0]
    original = first.read_text()
    first.write_text(original.replace("Drop-When: never", "Drop-When: soon"))
    stale = export(co)
    assert stale.returncode == 1, stale.stderr
    assert f"patch #1: {names[0]} in the vendor tree" in " ".join(stale.stderr.split())
    first.write_text(original)
    before = snapshot_files(co.patches)
    (vendor / path_of("m_clean")).write_text("changed\n")
    dirty = export(co)
    assert dirty.returncode == 1 and "uncommitted changes" in dirty.stderr
    assert "src/tinyproj/m_clean.py" in dirty.stderr
    support.run_git(vendor, "commit", "-q", "-a", "-m", "no header")
    warned = export(co)
    assert warned.returncode == 0, warned.stderr
    assert "lacks DEP-3 field(s) Origin, Forwarded, Drop-When" in " ".join(warned.stderr.split())
    assert snapshot_files(co.patches) != before
    missing = co.run("export", "--project", "nope")
    assert missing.returncode == 1 and "has no project 'nope'" in missing.stderr
