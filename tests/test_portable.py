"""Reports name no path of the machine that wrote them (patchwheel.portable)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchwheel.portable import portable, roots


def test_paths_under_known_folders_are_written_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATCHWHEEL_CACHE", str(tmp_path / "cache"))
    checkout, wheelhouse = tmp_path / "checkout", tmp_path / "wh"
    table = roots(checkout, [(wheelhouse, "$WHEELHOUSE"), (None, "$UNUSED")])
    report = {
        "scripts": f"{checkout}/build/gpu-carry/scripts",
        "env": [f"{wheelhouse}/INSTALL.txt", f"{wheelhouse}"],
        f"{checkout}/key": f"log: {tmp_path}/cache/trees/x; other {tmp_path}/whx/y",
        "n": 3,
        "home": f"{Path.home()}/src/vllm",
    }
    assert portable(report, table) == {
        "scripts": "build/gpu-carry/scripts",
        "env": ["$WHEELHOUSE/INSTALL.txt", "$WHEELHOUSE"],
        "key": f"log: $PATCHWHEEL_CACHE/trees/x; other {tmp_path}/whx/y",  # /whx is not /wh
        "n": 3,
        "home": "~/src/vllm",
    }


def test_the_longest_folder_wins(tmp_path: Path) -> None:
    work = tmp_path / "work"
    table = roots(tmp_path, [(work, "$WORK_DIR")])
    assert portable(f"{work}/a and {tmp_path}/b", table) == "$WORK_DIR/a and b"
