"""Issue 24: undoing a rebase (or a roll) removes nothing outside the vendor folder of its own
target and ``patches/``, whatever a state file or a name says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchwheel import rebase
from patchwheel.errors import ConfigError, VendorError
from patchwheel.rebase import undo as rebase_undo
from patchwheel.rebase.state import ProjectState, RebaseState, load
from patchwheel.workspace import Workspace


def _series(root: Path) -> Path:
    series = root / "patches" / "t" / "vllm"
    series.mkdir(parents=True)
    (series / "series").write_text("0001-x.patch\n")
    (series / "0001-x.patch").write_text("a patch\n")
    return series


def _state(root: Path, vendor: Path) -> RebaseState:
    ws = Workspace.at(root)
    state = RebaseState(
        target="t",
        output="t",
        onto=["vllm==1.0"],
        patches_dir=str(ws.patches),
        vendor_dir=str(ws.vendor),
        build_dir=str(ws.build),
        target_toml="",
        lock=[],
        changes=[],
        projects=[ProjectState("vllm", str(vendor), True, "a", "b", snapshot={"exists": False})],
        phase="replay",
    )
    state.save()
    return state


def test_a_state_naming_a_vendor_tree_elsewhere_is_refused_and_nothing_removed(
    tmp_path: Path,
) -> None:
    series = _series(tmp_path)
    _state(tmp_path, series)  # "the vendor tree" is the series (what ../patches/… made it)
    ws = Workspace.at(tmp_path)
    with pytest.raises(ConfigError, match="vendor tree is not"):
        rebase.abort(ws, "t")
    assert sorted(p.name for p in series.iterdir()) == ["0001-x.patch", "series"]
    path = tmp_path / "vendor" / "t" / ".patchwheel-rebase" / "state.json"
    data = json.loads(path.read_text())
    data["output"] = "../patches"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"output '\.\./patches' is refused"):
        load(ws.vendor, "t")
    with pytest.raises(ConfigError, match=r"target '\.\./patches/t' is refused") as raised:
        load(ws.vendor, "../patches/t")
    assert getattr(raised.value, "exit_status", None) == 2


def test_removal_and_restoration_stay_inside_their_root(tmp_path: Path) -> None:
    remove_tree, restore_vendor = rebase_undo.remove_tree, rebase_undo.restore_vendor
    series = _series(tmp_path)
    root = tmp_path / "vendor" / "t"
    root.mkdir(parents=True)
    with pytest.raises(VendorError, match="refusing to remove"):
        remove_tree(series, root)
    with pytest.raises(VendorError, match="refusing to remove"):
        remove_tree(root / ".." / ".." / "patches" / "t" / "vllm", root)
    link = root / "vllm"
    link.symlink_to(series)  # a vendor tree that leads out
    with pytest.raises(VendorError, match="refusing to"):
        restore_vendor(link, {"exists": False}, root)
    with pytest.raises(VendorError, match="refusing to remove"):
        remove_tree(link, root)
    assert sorted(p.name for p in series.iterdir()) == ["0001-x.patch", "series"]
    inside = root / "speculators"
    (inside / "sub").mkdir(parents=True)
    remove_tree(inside, root)
    assert not inside.exists()
