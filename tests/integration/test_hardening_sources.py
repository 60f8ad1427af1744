"""Issue 11: what the cache and upstream say is checked, not trusted.

* An edit inside the cache's extracted source tree must never reach a wheel.
* A git tag that moved after locking is refused on every run until ``lock --update``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from . import hardening_support as hs

TAMPER = "TAMPERED_BY_THE_TEST = True\n"


def sdist_patch() -> str:
    old = hs.project_files("tinydep", "1.0")["src/tinydep/core.py"]
    new = old.replace('"hello "', '"hi "')
    return hs.patch_text("core: say hi", {"src/tinydep/core.py": (old, new)})


def checkout(tmp_path: Path, name: str, cache: Path, *, patched: bool) -> hs.Workspace:
    """A checkout of the sdist target sharing ``cache``; with or without the one patch."""
    ws = hs.sdist_workspace(tmp_path / name, cache=cache)
    if patched:
        ws.series_dir("tinydep").mkdir(parents=True)
        (ws.series_dir("tinydep") / "0001-core-say-hi.patch").write_text(sdist_patch())
        hs.write_series(ws.series_dir("tinydep"), ["0001-core-say-hi.patch"])
    hs.assert_ok(ws.run("lock"))
    return ws


def test_an_edit_in_the_cached_source_tree_never_reaches_a_wheel(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # 1. a first build (empty series) extracts the sdist into the cache
    first = checkout(tmp_path, "first", cache, patched=False)
    first.build_ok()
    trees = [p.parents[2] for p in cache.rglob("src/tinydep/__init__.py")]
    if not trees:
        pytest.skip("the cache keeps no extracted source tree: nothing to tamper with")
    # 2. someone edits the cached tree (a stray editor, a malicious process, disk rot)
    for tree in trees:
        init = tree / "src" / "tinydep" / "__init__.py"
        init.chmod(0o644)
        init.write_text(init.read_text() + TAMPER)
    # 3. another checkout, with a patch, builds from the same cache …
    second = checkout(tmp_path, "second", cache, patched=True)
    result = second.run("build", "--no-audit")
    # … and a reference built from a pristine cache
    reference = checkout(tmp_path, "reference", tmp_path / "clean-cache", patched=True)
    reference.build_ok()
    [ref_wheel] = reference.wheel_files()

    if result.returncode != 0:  # verified and refused: acceptable if clear and nothing built
        problems = hs.refusal_problems(result)
        assert not problems, "; ".join(problems) + "\n" + hs.tail(result)
        assert not second.wheel_files()
        return
    [wheel] = second.wheel_files()
    tampered = [m for m, data in hs.wheel_members(wheel).items() if TAMPER.encode() in data]
    assert not tampered, f"the cache edit went into {wheel.name}: {tampered}"
    assert wheel.name == ref_wheel.name
    assert hs.sha256(wheel) == hs.sha256(ref_wheel), "same label, different bytes"


def test_a_moved_tag_is_refused_on_every_run_until_update(tmp_path: Path) -> None:
    ws = hs.overlay_workspace(tmp_path)
    assert ws.upstream is not None
    hs.assert_ok(ws.run("lock"))
    old = hs.git(ws.upstream, "rev-parse", "v1.0")
    new = hs.commit_edit(ws.upstream, "NEWS", lambda t: "moved\n", "news")
    hs.git(ws.upstream, "tag", "-f", "v1.0", new)

    first = ws.run("build", "--no-audit")
    hs.assert_refused(first, old, new, "v1.0")
    second = ws.run("build", "--no-audit")
    problems = hs.refusal_problems(second, old, new, "v1.0")
    assert not problems, "second run: " + "; ".join(problems) + "\n" + hs.tail(second)
    assert not (ws.build / hs.TARGET).exists()

    hs.assert_ok(ws.run("lock", "--update", "tinyproj"))
    assert new in ws.lock_path.read_text()
    ws.build_ok()
    vendor = ws.vendor_dir()
    assert hs.git(vendor, "rev-parse", "upstream") == new
