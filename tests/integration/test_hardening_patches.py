"""Issue 11: hostile and malformed patches — refused clearly, with nothing changed.

Each test starts from a private copy of one good build (target ``tiny``: ``tinyproj`` built as
an overlay, so no PEP 517 build slows it down; its series has two patches), changes the series
and builds again through the CLI.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import hardening_support as hs


@dataclass
class Template:
    base: Path
    ws: hs.Workspace
    names: list[str]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    base = tmp_path_factory.mktemp("patches")
    ws = hs.overlay_workspace(base)
    names = hs.add_overlay_patches(ws, count=2)
    hs.assert_ok(ws.run("lock"))
    ws.build_ok()
    return Template(base, ws, names)


@pytest.fixture
def ws(template: Template, tmp_path: Path) -> hs.Workspace:
    return hs.copy_workspace(template.ws, template.base, tmp_path)


def append_patch(ws: hs.Workspace, name: str, text: str | bytes) -> None:
    path = ws.series_dir() / name
    if isinstance(text, str):
        path.write_text(text)
    else:
        path.write_bytes(text)
    names = [
        line
        for line in (ws.series_dir() / "series").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    hs.write_series(ws.series_dir(), [*names, name])


def state(ws: hs.Workspace) -> tuple[dict[str, object], dict[str, str], dict[str, str]]:
    """The vendor tree (git state and files) and build/, to compare before and after."""
    vendor = ws.vendor_dir()
    return hs.vendor_state(vendor), hs.vendor_files(vendor), hs.snapshot(ws.build)


def untouched(before: tuple[object, ...], after: tuple[object, ...]) -> list[str]:
    problems = []
    if before[0] != after[0]:
        problems.append(f"the vendor tree's git state changed: {before[0]} -> {after[0]}")
    if before[1] != after[1]:
        problems.append("the vendor tree's files changed")
    if before[2] != after[2]:
        problems.append("build/ changed")
    return problems


def core_py(ws: hs.Workspace) -> str:
    """tinyproj/core.py as the series so far leaves it (the vendor tree's HEAD)."""
    return (ws.vendor_dir() / "tinyproj" / "core.py").read_text()


# --------------------------------------------------------------------------- Date:


def test_patch_without_date_header_builds_reproducibly(
    ws: hs.Workspace, template: Template
) -> None:
    """A patch with no ``Date:`` builds; its commit takes the pin's date, never the clock."""
    first = ws.series_dir() / template.names[0]
    text = first.read_text()
    assert re.search(r"^Date: ", text, re.M)
    first.write_text(re.sub(r"^Date: .*\n", "", text, count=1, flags=re.M))

    result = ws.run("build", "--no-audit")
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in out, (
        f"the build failed on a patch without Date: ({hs.failure(result)})\n" + hs.tail(result)
    )
    vendor = ws.vendor_dir()
    pin_date = hs.git(vendor, "log", "-1", "--format=%ct", "upstream")
    patch_commit = hs.git(vendor, "rev-list", "--reverse", "upstream..HEAD").split()[0]
    assert hs.git(vendor, "log", "-1", "--format=%at", patch_commit) == pin_date
    head, wheels = hs.git(vendor, "rev-parse", "HEAD"), [hs.sha256(p) for p in ws.wheel_files()]

    time.sleep(1.5)  # a clock-dated commit would now differ
    for path in (ws.build, ws.vendor):
        shutil.rmtree(path)
    again = ws.run("build", "--no-audit")
    hs.assert_ok(again)
    assert hs.git(vendor, "rev-parse", "HEAD") == head, "the vendor commits are not reproducible"
    assert [hs.sha256(p) for p in ws.wheel_files()] == wheels


# --------------------------------------------------------------------------- .git paths

GIT_PATHS = [
    pytest.param("tinyproj/sub/.git", "gitdir: ../../../../evil\n", id="nested-gitdir-file"),
    # a gitdir that exists (the vendor repo's own): `git add` records a gitlink (mode 160000)
    pytest.param("tinyproj/sub/.git", "gitdir: ../../.git\n", id="nested-gitdir-own-repo"),
    pytest.param(".GIT/config", "[core]\n\thooksPath = /tmp/evil\n", id="upper-GIT-config"),
    pytest.param(".Git/hooks/post-checkout", "#!/bin/sh\ntouch /tmp/evil\n", id="mixed-Git-hook"),
    pytest.param("tinyproj/.git/config", "[core]\n\tworktree = /tmp\n", id="src-dot-git-dir"),
    pytest.param("tinyproj/.gIt", "gitdir: /tmp/evil\n", id="mixed-case-gitdir-file"),
    pytest.param("docs/.GIT/HEAD", "ref: refs/heads/evil\n", id="nested-upper-GIT-dir"),
]


@pytest.mark.parametrize(("path", "content"), GIT_PATHS)
def test_patch_writing_a_git_path_is_refused(ws: hs.Workspace, path: str, content: str) -> None:
    before = state(ws)
    name = "0003-hostile-git-path.patch"
    append_patch(ws, name, hs.patch_text("hostile: a .git path", {path: (None, content)}))

    result = ws.run("build", "--no-audit")

    problems = hs.refusal_problems(result, name, path) + untouched(before, state(ws))
    assert not problems, "; ".join(problems) + "\n" + hs.tail(result)


def test_git_like_names_are_not_refused(ws: hs.Workspace) -> None:
    """Guard for the fix: ``.gitignore``, ``.github/``, ``foo.git`` are ordinary paths."""
    diffs: dict[str, tuple[str | None, str | None]] = {
        ".gitignore": (None, "*.pyc\n"),
        ".github/workflows/ci.yml": (None, "on: push\n"),
        "tinyproj/data.git": (None, "not a repository\n"),
    }
    append_patch(ws, "0003-git-like-names.patch", hs.patch_text("git-like names", diffs))
    hs.assert_ok(ws.run("build", "--no-audit"))
    files = hs.vendor_files(ws.vendor_dir())
    assert {".gitignore", ".github/workflows/ci.yml", "tinyproj/data.git"} <= set(files)


# --------------------------------------------------------------------------- messages


def third_patch(ws: hs.Workspace) -> str:
    """A valid third patch (one hunk in the middle of core.py), as text."""
    old = core_py(ws)
    new = old.replace('"""Multiply every value."""', '"""Multiply every value (patched)."""')
    assert new != old
    return hs.patch_text("core: document scale", {"tinyproj/core.py": (old, new)})


def test_crlf_patch_is_refused_with_a_line_ending_hint(ws: hs.Workspace) -> None:
    before = state(ws)
    name = "0003-core-document-scale.patch"
    append_patch(ws, name, third_patch(ws).replace("\n", "\r\n").encode())

    result = ws.run("build", "--no-audit")

    problems = hs.refusal_problems(result, name) + untouched(before, state(ws))
    # (not re.I: the test's own tmp_path holds "crlf" and "line_ending")
    if not re.search(r"CRLF|[Ll]ine[ -]ending|\\r\\n", result.stderr):
        problems.append("no line-ending hint (CRLF / line endings) in the error")
    assert not problems, "; ".join(problems) + "\n" + hs.tail(result)


def test_truncated_patch_error_names_the_line(ws: hs.Workspace) -> None:
    before = state(ws)
    name = "0003-core-document-scale.patch"
    lines = third_patch(ws).splitlines(keepends=True)
    header = next(i for i, line in enumerate(lines, 1) if line.startswith("@@"))
    truncated = lines[:-3]  # the hunk loses its last three context lines
    append_patch(ws, name, "".join(truncated))

    result = ws.run("build", "--no-audit")

    problems = hs.refusal_problems(result, name) + untouched(before, state(ws))
    numbers = [int(n) for n in re.findall(r"\bline (\d+)", hs.flat(result.stderr))]
    if not any(header <= n <= len(truncated) + 1 for n in numbers):
        problems.append(
            f"the error names no line of the truncated hunk (lines {header}..{len(truncated) + 1})"
        )
    assert not problems, "; ".join(problems) + "\n" + hs.tail(result)


def test_the_same_patch_twice_under_two_names_says_already_applied(
    ws: hs.Workspace, template: Template
) -> None:
    before = state(ws)
    again = "0003-say-hi-again.patch"
    append_patch(ws, again, (ws.series_dir() / template.names[0]).read_bytes())

    result = ws.run("build", "--no-audit")

    problems = hs.refusal_problems(result, again, "already applied") + untouched(before, state(ws))
    assert not problems, "; ".join(problems) + "\n" + hs.tail(result)


@pytest.mark.parametrize("field", ["Origin", "Forwarded", "Drop-When"])
def test_a_patch_missing_a_required_dep3_field_is_an_error(ws: hs.Workspace, field: str) -> None:
    before = state(ws)
    name = "0003-core-document-scale.patch"
    body = "".join(line + "\n" for line in hs.DEP3.splitlines() if not line.startswith(field))
    text = third_patch(ws).replace(hs.DEP3, body)
    assert f"{field}:" not in text
    append_patch(ws, name, text)

    result = ws.run("build", "--no-audit")

    problems = hs.refusal_problems(result, name, field) + untouched(before, state(ws))
    assert not problems, "; ".join(problems) + "\n" + hs.tail(result)
