"""Issue 11: ``target.lock`` is an input that arrives through review — treat it as hostile.

Every test starts from a copy of a good build (warm cache and vendor/, build/ removed so that
the run really builds), makes one value of the lock hostile, and builds. The run must stop
with an error that names target.lock and the offending key (no traceback), and must not
delete or write anything outside the cache: sentinel files planted where the hostile values
point stay as they were, nothing appears where a hostile file name points, and everything
else the test owns (patches/, vendor/, no build/ outputs) is byte for byte what it was.
"""

from __future__ import annotations

import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from . import hardening_support as hs

Edit = Callable[[dict[str, Any], Path], None]


@pytest.fixture(scope="module")
def built_sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good build of an sdist pin (empty series: the sdist is served unchanged)."""
    base = tmp_path_factory.mktemp("lock-sdist")
    ws = hs.sdist_workspace(base)
    hs.assert_ok(ws.run("lock"))
    ws.build_ok()
    return base


@pytest.fixture(scope="module")
def built_git(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good build of a git pin with one patch."""
    base = tmp_path_factory.mktemp("lock-git")
    ws = hs.git_workspace(base)
    assert ws.upstream is not None
    tag = hs.git(ws.upstream, "rev-parse", "v1.0")
    hs.commit_edit(ws.upstream, "src/tinyproj/core.py", lambda t: t.replace("hello", "hi"), "hi")
    hs.format_patches(ws.upstream, tag, ws.series_dir())
    hs.assert_ok(ws.run("lock"))
    ws.build_ok()
    return base


def private_copy(template: Path, tmp_path: Path, kind: str) -> hs.Workspace:
    """A copy of a built workspace at the same relative layout (its own cache), minus build/.

    The cache and vendor/ are warm, but build/ is gone, so the next run really builds (a
    lock value outside the inputs hash would otherwise pass as "up to date" unread).
    """
    for child in template.iterdir():
        shutil.copytree(child, tmp_path / child.name, symlinks=True)
    shutil.rmtree(tmp_path / "checkout" / "build")
    index = (template / "index").as_uri() + "/"
    return hs.Workspace(
        root=tmp_path / "checkout",
        cache=tmp_path / "home" / ".cache" / "patchwheel",
        env={"PATCHWHEEL_INDEX_URL": index} if kind == "sdist" else {},
    )


def edit_lock(ws: hs.Workspace, edit: Edit) -> None:
    data = tomllib.loads(ws.lock_path.read_text())
    edit(data, ws.root)
    ws.lock_path.write_text(tomli_w.dumps(data))


def outside_cache(tmp_path: Path) -> dict[str, str]:
    """Everything the test owns except the cache (where a build may write freely)."""
    snap = hs.snapshot(tmp_path)
    return {
        rel: v
        for rel, v in snap.items()
        if not rel.startswith(("home/.cache/patchwheel", "checkout/build/.locks"))
        and rel != "checkout/build"
    }


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The entries a refused run added, removed or changed outside the cache."""
    paths = sorted({p for p in before.keys() | after.keys() if before.get(p) != after.get(p)})
    return [f"changed outside the cache: {', '.join(paths[:6])}"] if paths else []


def set_field(project: str, key: str, value: object) -> Edit:
    def edit(data: dict[str, Any], root: Path) -> None:
        del root
        data["pins"][project][key] = value

    return edit


def drop_field(project: str, key: str) -> Edit:
    def edit(data: dict[str, Any], root: Path) -> None:
        del root
        del data["pins"][project][key]

    return edit


def absolute_filename(data: dict[str, Any], root: Path) -> None:
    escape_dir = root.parent / "elsewhere"
    escape_dir.mkdir(exist_ok=True)  # so a write there could succeed
    data["pins"]["tinydep"]["filename"] = str(escape_dir / "tinydep-1.0.tar.gz")


def pin_entry_is_a_string(data: dict[str, Any], root: Path) -> None:
    del root
    data["pins"]["tinydep"] = "tinydep==1.0"


def pins_is_a_list(data: dict[str, Any], root: Path) -> None:
    del root
    data["pins"] = [data["pins"]["tinydep"]]


# The sentinels: files a hostile value points at (relative to the test's tmp_path). The cache
# is tmp_path/home/.cache/patchwheel, so blobs/sha256/<sha[:2]>/<sha> with sha "../../../tmp/x"
# is tmp_path/home/tmp/x, and with sha "../../sentinel" tmp_path/home/.cache/sentinel.
SENTINELS = ("home/tmp/x", "home/.cache/sentinel")
# Where a hostile file name would make the build write: build/.store/<store>/wheels/<filename>
# with four `..` is checkout/, with five tmp_path (must not exist afterwards).
ESCAPES = ("checkout/tinydep-1.0.tar.gz", "build-escape.tar.gz", "elsewhere/tinydep-1.0.tar.gz")

SDIST_CASES = [
    pytest.param(set_field("tinydep", "sha256", "../../../tmp/x"), "sha256", id="sha256-traversal"),
    pytest.param(set_field("tinydep", "sha256", "../../sentinel"), "sha256", id="sha256-dotdot"),
    pytest.param(set_field("tinydep", "sha256", "g" * 64), "sha256", id="sha256-not-hex"),
    pytest.param(set_field("tinydep", "sha256", "0" * 63), "sha256", id="sha256-short"),
    pytest.param(set_field("tinydep", "sha256", 42), "sha256", id="sha256-int"),
    pytest.param(
        set_field("tinydep", "filename", "../../../../tinydep-1.0.tar.gz"),
        "filename",
        id="filename-dotdot",
    ),
    pytest.param(
        set_field("tinydep", "filename", "../../../../../build-escape.tar.gz"),
        "filename",
        id="filename-dotdot-other-name",
    ),
    pytest.param(
        set_field("tinydep", "filename", "sub/tinydep-1.0.tar.gz"), "filename", id="filename-slash"
    ),
    pytest.param(absolute_filename, "filename", id="filename-absolute"),
    pytest.param(set_field("tinydep", "filename", 7), "filename", id="filename-int"),
    pytest.param(set_field("tinydep", "evil", "x"), "evil", id="unknown-key"),
    pytest.param(drop_field("tinydep", "kind"), "kind", id="missing-kind"),
    pytest.param(drop_field("tinydep", "pin"), "pin", id="missing-pin"),
    pytest.param(drop_field("tinydep", "sha256"), "sha256", id="missing-sha256"),
    pytest.param(drop_field("tinydep", "filename"), "filename", id="missing-filename"),
    pytest.param(set_field("tinydep", "kind", "banana"), "kind", id="kind-unknown-value"),
    pytest.param(set_field("tinydep", "size", "big"), "size", id="size-not-int"),
    pytest.param(pin_entry_is_a_string, "tinydep", id="entry-not-a-table"),
    pytest.param(pins_is_a_list, "pins", id="pins-not-a-table"),
]


@pytest.mark.parametrize(("edit", "key"), SDIST_CASES)
def test_hostile_sdist_lock_value_is_refused_and_touches_nothing(
    built_sdist: Path, tmp_path: Path, edit: Edit, key: str
) -> None:
    ws = private_copy(built_sdist, tmp_path, "sdist")
    for rel in SENTINELS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"sentinel {rel}\n")
    edit_lock(ws, edit)
    before = outside_cache(tmp_path)

    result = ws.run("build", "--no-audit")

    problems = hs.refusal_problems(result, "target.lock", key)
    for rel in SENTINELS:
        sentinel = tmp_path / rel
        if not sentinel.is_file() or sentinel.read_text() != f"sentinel {rel}\n":
            problems.append(f"{rel} (outside the cache) was deleted or changed")
    problems += [
        f"the build wrote {rel}, outside build/" for rel in ESCAPES if (tmp_path / rel).exists()
    ]
    problems += changed(before, outside_cache(tmp_path))
    assert not problems, "; ".join(problems) + "\n" + hs.tail(result)


GIT_CASES = [
    pytest.param(
        set_field("tinyproj", "commit", "../../../tmp/x"), "commit", id="commit-traversal"
    ),
    pytest.param(set_field("tinyproj", "commit", "f" * 39), "commit", id="commit-short"),
    pytest.param(set_field("tinyproj", "commit", 7), "commit", id="commit-int"),
    pytest.param(set_field("tinyproj", "rev", ["v1.0"]), "rev", id="rev-not-a-string"),
    pytest.param(set_field("tinyproj", "sha256", "0" * 64), "sha256", id="git-pin-with-sha256"),
]


@pytest.mark.parametrize(("edit", "key"), GIT_CASES)
def test_hostile_git_lock_value_is_refused_and_touches_nothing(
    built_git: Path, tmp_path: Path, edit: Edit, key: str
) -> None:
    ws = private_copy(built_git, tmp_path, "git")
    edit_lock(ws, edit)
    before = outside_cache(tmp_path)

    result = ws.run("build", "--no-audit")

    problems = hs.refusal_problems(result, "target.lock", key) + changed(
        before, outside_cache(tmp_path)
    )
    assert not problems, "; ".join(problems) + "\n" + hs.tail(result)


def test_lock_command_refuses_a_hostile_lock_before_writing(
    built_sdist: Path, tmp_path: Path
) -> None:
    """``patchwheel lock`` keeps entries it reads: a hostile one must not be kept (or echoed)."""
    ws = private_copy(built_sdist, tmp_path, "sdist")
    (tmp_path / "home" / "tmp").mkdir(parents=True)
    (tmp_path / "home" / "tmp" / "x").write_text("sentinel\n")
    edit_lock(ws, set_field("tinydep", "sha256", "../../../tmp/x"))
    hostile = ws.lock_path.read_bytes()

    result = ws.run("lock")

    hs.assert_refused(result, "target.lock", "sha256")
    assert ws.lock_path.read_bytes() == hostile
    assert (tmp_path / "home" / "tmp" / "x").read_text() == "sentinel\n"
