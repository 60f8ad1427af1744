"""Rebase honours the series' own metadata, and remembers how conflicts were resolved.

Real git histories and a real (file://) package index made by the tests; the real
``patchwheel rebase`` command. A patch whose ``Drop-When`` holds for the new pins, or whose
change is upstream comments and whitespace aside, is dropped as ``upstream`` before it can stop
the rebase; a conflict resolved once is resolved by itself the next time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests import support
from tests.conftest import Checkout, copy_tree
from tests.integration.test_rebase import (
    build_ok,
    classes,
    insert_at,
    make_checkout,
    module_text,
    path_of,
    rebase,
    replace_line,
    report_of,
    upstream_v2,
)


def dep3(drop_when: str) -> str:
    return f"Origin: test\nForwarded: not-needed\nDrop-When: {drop_when}\n"


def series_with_headers(
    co: Checkout, edits: list[tuple[str, Callable[[str], str], str, str]]
) -> list[str]:
    """Patches against v1.0, one commit per (module, edit, subject, Drop-When)."""
    repo = co.upstream
    support.run_git(repo, "checkout", "-q", "-b", "work", "v1.0")
    for module, edit, subject, drop_when in edits:
        support.edit_and_commit(repo, path_of(module), edit, subject, dep3(drop_when))
    names = support.format_patches(repo, "v1.0", co.series_dir())
    support.run_git(repo, "checkout", "-q", "main")
    return names


def test_drop_when_and_comment_aside_classify_upstream(tmp_path: Path) -> None:
    co = make_checkout(tmp_path)
    names = series_with_headers(
        co,
        [
            # conflicts with v2, but its Drop-When holds: dropped before it is replayed
            (
                "m_conflict",
                replace_line(10, "M_CONFLICT_10 = 'ours'"),
                "drop-when: holds at 2.0",
                "tinyproj pin >= 2.0 or the moon pin < 1",
            ),
            (
                "m_clean",
                replace_line(10, "M_CLEAN_10 = 'patched'"),
                "drop-when: false at 2.0",
                "the tinyproj pin is >= 3.0",
            ),
            # upstream makes the same change without the patch's comment
            (
                "m_merged",
                lambda t: insert_at(15, "# patchwheel: the value is fixed")(
                    replace_line(15, "M_MERGED_15 = 'fixed'")(t)
                ),
                "comment aside: same change plus a comment",
                "never",
            ),
            # upstream makes the same change with another comment on the line: the 3-way
            # merge conflicts, the change itself is there
            (
                "m_same",
                replace_line(12, "M_SAME_12 = 'fixed'  # ours"),
                "comment aside: same line, other comment",
                "never",
            ),
            ("m_offset", insert_at(3, "# a comment-only patch stays"), "comments only", "never"),
            # conflicts, and its Drop-When is prose (unknown): the rebase stops on it
            (
                "m_gone",
                replace_line(10, "M_GONE_10 = 'ours'"),
                "conflict: prose drop-when",
                "upstream rewrites m_gone",
            ),
        ],
    )
    dist = tmp_path / "dist"
    old = support.make_sdist(co.upstream, dist, "tinyproj", "1.0")
    upstream_v2(
        co,
        [
            ("m_conflict", replace_line(10, "M_CONFLICT_10 = 'theirs'")),
            (
                "m_merged",
                lambda t: replace_line(18, "M_MERGED_18 = 'upstream'")(
                    replace_line(15, "M_MERGED_15 = 'fixed'")(t)
                ),
            ),
            ("m_same", replace_line(12, "M_SAME_12 = 'fixed'  # upstream says why")),
            ("m_gone", replace_line(10, "M_GONE_10 = 'theirs'")),
        ],
    )
    new = support.make_sdist(co.upstream, dist, "tinyproj", "2.0")
    env = {"PATCHWHEEL_INDEX_URL": support.write_index(tmp_path / "index", [old, new])}
    co.write_target("tinyproj==1.0")
    assert co.run("lock", env=env).returncode == 0

    stopped = co.run("rebase", "--no-audit", "--onto", "tinyproj==2.0", env=env)
    assert stopped.returncode == 3, stopped.stderr
    err = " ".join(stopped.stderr.split())
    assert f"conflict: patch {names[5]} of tinyproj" in err
    # before replaying: which patches touch files upstream changed
    assert "file(s) changed upstream; 4 of 6 patch(es) touch them" in err
    assert f"{names[2]} ({path_of('m_merged')})" in err
    done = co.run("rebase", "--no-audit", "--skip", env=env)
    assert done.returncode == 0, done.stderr

    report = report_of(co)
    assert classes(report) == {
        names[0]: "upstream",
        names[1]: "clean",
        names[2]: "upstream",
        names[3]: "upstream",
        names[4]: "clean",
        names[5]: "conflict",
    }
    [project] = report["projects"]
    rows = {row["name"]: row for row in project["patches"]}
    assert rows[names[0]]["reason"] == (
        "its Drop-When holds for the new pins: `tinyproj pin >= 2.0`: true (tinyproj 2.0); "
        "`the moon pin < 1`: unknown (the target has no project moon)"
    )
    assert not rows[names[0]]["notes"]  # the reason says it; no second note
    for name in (names[2], names[3]):
        assert "comments and whitespace aside" in rows[name]["reason"], rows[name]
    assert project["dropped"] == [names[0], names[2], names[3], names[5]]
    assert project["touch-upstream-changes"] == [names[0], names[2], names[3], names[5]]
    assert rows[names[2]]["touches-upstream-changes"] == [path_of("m_merged")]
    assert rows[names[1]]["touches-upstream-changes"] == []

    listed = (co.series_dir() / "series").read_text()
    assert [n for n in listed.splitlines() if not n.startswith("#")] == [names[1], names[4]]
    md = (co.build / "tiny" / "rebase.md").read_text()
    assert "Patches touching files that changed upstream between the old and new pins:" in md
    assert f"- `{names[2]}`: `{path_of('m_merged')}`" in md
    build_ok(co, "--target", "tiny")


def test_a_resolved_conflict_resolves_itself_the_next_time(
    co_v3: tuple[Checkout, str, str],
) -> None:
    co, v2_pin, v3_pin = co_v3
    names = sorted(p.name for p in co.series_dir().glob("*.patch"))
    stopped = rebase(co, "--onto", v2_pin, "--new-target", "tiny2")
    assert stopped.returncode == 3, stopped.stderr
    vendor = co.vendor / "tiny2" / "tinyproj"
    resolved = module_text("m_conflict").replace("M_CONFLICT_10 = 10", "M_CONFLICT_10 = 'both'")
    (vendor / path_of("m_conflict")).write_text(resolved)
    support.run_git(vendor, "add", path_of("m_conflict"))
    done = rebase(co, "--target", "tiny", "--continue")
    assert done.returncode == 0, done.stderr
    assert "1 conflict resolution(s) remembered" in done.stderr
    first = report_of(co, "tiny2")
    assert first["projects"][0]["rerere"]["recorded"]
    # kept beside both series: the rebased one and the one it came from
    for target in ("tiny2", "tiny"):
        entries = list((co.patches / target / "tinyproj" / "rr-cache").iterdir())
        assert len(entries) == 1 and (entries[0] / "postimage").is_file(), target
    assert "Conflict resolutions:" in (co.build / "tiny2" / "rebase.md").read_text()

    # v3 = v2 + an unrelated change: the same conflict, resolved from memory, no stop
    again = rebase(co, "--onto", v3_pin, "--new-target", "tiny3")
    assert again.returncode == 0, again.stderr
    report = report_of(co, "tiny3")
    rows = {row["name"]: row for row in report["projects"][0]["patches"]}
    assert rows[names[0]]["class"] == "conflict"
    assert rows[names[0]]["resolution"] == "resolved by a remembered resolution (rerere)"
    assert rows[names[0]]["remembered"] == [path_of("m_conflict")]
    assert report["projects"][0]["rerere"]["reused-by"] == [names[0]]
    assert report["projects"][0]["rerere"]["loaded"] == 1
    patch = (co.patches / "tiny3" / "tinyproj" / names[0]).read_text()
    assert "-M_CONFLICT_10 = 'theirs'\n+M_CONFLICT_10 = 'both'" in patch
    md = (co.build / "tiny3" / "rebase.md").read_text()
    assert "resolved by a remembered resolution (rerere)" in md
    build_ok(co, "--target", "tiny3")


def test_a_hostile_rr_cache_is_refused(co_v3: tuple[Checkout, str, str]) -> None:
    co, v2_pin, _v3 = co_v3
    bad = co.series_dir() / "rr-cache" / "not-a-conflict-id"
    bad.mkdir(parents=True)
    (bad / "postimage").write_text("x")
    result = rebase(co, "--onto", v2_pin)
    assert result.returncode == 1
    assert "not a rerere resolution" in result.stderr and "not-a-conflict-id" in result.stderr
    assert not (co.vendor / "tiny" / ".patchwheel-rebase").exists()  # undone


@pytest.fixture
def co_v3(tmp_path: Path) -> tuple[Checkout, str, str]:
    """A series whose first patch conflicts with v2.0; v3.0 is v2.0 plus an unrelated change."""
    co = make_checkout(tmp_path)
    series_with_headers(
        co,
        [
            (
                "m_conflict",
                replace_line(10, "M_CONFLICT_10 = 'ours'"),
                "conflict: line 10",
                "never",
            ),
            ("m_clean", replace_line(10, "M_CLEAN_10 = 'patched'"), "clean: after", "never"),
        ],
    )
    assert co.run("lock").returncode == 0
    v2 = upstream_v2(co, [("m_conflict", replace_line(10, "M_CONFLICT_10 = 'theirs'"))])
    support.commit_file(co.upstream, path_of("m_offset"), module_text("m_offset", 31), "v3")
    support.run_git(co.upstream, "tag", "v3.0")
    return co, v2, v2.replace("@v2.0", "@v3.0")


@pytest.mark.network
@pytest.mark.slow
def test_vllm_016_onto_speculators_040_drops_what_its_drop_when_says(
    tmp_path: Path, shared_cache_dir: Path
) -> None:
    """The acceptance case: vllm-0.16's series rebased from speculators 0.3.0 onto the 0.4.0
    sdist. The patches it applies of pool speculators-0.3.0: v0.16-0001-0003 say `Drop-When:
    speculators >= 0.4.0 or vllm < 0.12`: dropped as upstream without stopping (0002 and 0003
    used to stop the rebase with conflicts); 0019's Drop-When is prose and its change is not
    upstream: it stays. With its Drop-When made prose, 0001 is still dropped: 0.4.0 makes its
    change, only the patch's comment is missing. The pin leaves the pool: the new target's
    series is its own."""
    root = tmp_path / "root"
    copy_tree(support.REPO_ROOT / "patches", root / "patches")
    [first] = (root / "patches" / "pools" / "speculators-0.3.0").glob("v0.16-0001-*.patch")
    text = first.read_text()
    assert "Drop-When: speculators >= 0.4.0 or vllm < 0.12\n" in text
    first.write_text(
        text.replace(
            "Drop-When: speculators >= 0.4.0 or vllm < 0.12\n",
            "Drop-When: upstream: speculators stops passing kv_cache_specs\n",
        )
    )
    result = support.patchwheel(
        root,
        "rebase",
        "--no-audit",
        "--target",
        "vllm-0.16",
        "--onto",
        "speculators==0.4.0",
        "--new-target",
        "vllm-0.16-spec-0.4",
        cache=shared_cache_dir,
    )
    assert result.returncode == 0, result.stderr
    report = report_of(Checkout(root, shared_cache_dir, root), "vllm-0.16-spec-0.4")
    [project] = [p for p in report["projects"] if p["name"] == "speculators"]
    rows = {row["name"].removeprefix("v0.16-")[:4]: row for row in project["patches"]}
    assert {k: r["class"] for k, r in rows.items()} == {
        "0001": "upstream",
        "0002": "upstream",
        "0003": "upstream",
        "0019": "clean",
    }
    assert rows["0001"]["reason"] == (
        "the 3-way replay leaves only comments and whitespace: the new upstream already makes "
        "this change"
    )
    for key in ("0002", "0003"):
        assert rows[key]["reason"].startswith(
            "its Drop-When holds for the new pins: `speculators >= 0.4.0`: true (speculators 0.4.0)"
        ), rows[key]["reason"]
    for key in ("0001", "0002", "0003"):
        assert not rows[key]["kept"]
    assert rows["0019"]["kept"] and rows["0019"]["resolution"] == "automatic"
    series = root / "patches" / "vllm-0.16-spec-0.4" / "speculators"
    listed = [n for n in (series / "series").read_text().splitlines() if n and n[0] != "#"]
    assert [n[:4] for n in listed] == ["0019"]
    toml = (root / "patches" / "vllm-0.16-spec-0.4" / "target.toml").read_text()
    assert "pool =" not in toml and (root / "patches" / "pools" / "speculators-0.3.0").is_dir()
    assert 'pin = "speculators==0.4.0"' in toml
    assert "739e1815ef38581ad6f39dafd4ee6069af11c1ad4245f5c0e60806dad08c800d" in toml
