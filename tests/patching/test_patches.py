"""Patch validation and strict application, on real format-patch output from real git repos."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from patchwheel.errors import ConfigError, PatchError
from patchwheel.patching.apply import apply_patch
from patchwheel.patching.patches import (
    DirTree,
    commit_date,
    parse_patch,
    read_series,
)
from patchwheel.upstream.sources import is_git_name
from tests import support


def format_patch(tmp_path: Path, files: dict[str, str], edits: dict[str, str | None]) -> bytes:
    """Make a repo with ``files``, commit ``edits`` (None deletes), return the patch bytes."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    support.run_git(repo, "init", "-q")
    support.run_git(repo, "add", "-A")
    support.run_git(repo, "commit", "-q", "-m", "base")
    for rel, text in edits.items():
        if text is None:
            (repo / rel).unlink()
        else:
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
    support.run_git(repo, "add", "-A")
    support.run_git(repo, "commit", "-q", "-m", "change things\n\n" + support.DEP3)
    out = support.run_git(repo, "format-patch", "--zero-commit", "--stdout", "-1")
    return (out + "\n").encode()


def tree(tmp_path: Path, files: dict[str, str]) -> DirTree:
    root = tmp_path / "tree"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    root.mkdir(exist_ok=True)
    return DirTree(root)


LINES = "".join(f"line {i}\n" for i in range(1, 41))


def test_metadata_and_dep3_fields_are_parsed(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"a.txt": LINES}, {"a.txt": LINES.replace("line 5\n", "five\n")})
    patch = parse_patch("0001-x.patch", data)
    assert patch.author == support.AUTHOR[0]
    assert patch.email == support.AUTHOR[1]
    assert patch.subject == "change things"
    assert patch.fields == {"Origin": "test", "Forwarded": "not-needed", "Drop-When": "never"}
    assert patch.message.startswith("change things\n\nOrigin: test")


def test_offset_is_applied_and_reported(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"a.txt": LINES}, {"a.txt": LINES.replace("line 20\n", "x\n")})
    target = tree(tmp_path, {"a.txt": "new 1\nnew 2\nnew 3\n" + LINES})
    result = apply_patch(parse_patch("p.patch", data), target)
    assert (target.root / "a.txt").read_text() == "new 1\nnew 2\nnew 3\n" + LINES.replace(
        "line 20\n", "x\n"
    )
    [offset] = result.offsets
    assert (offset.path, offset.hunk, offset.lines) == ("a.txt", 1, 3)
    assert "offset +3" in str(offset)


def test_no_fuzz_whitespace_difference_fails(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"a.txt": LINES}, {"a.txt": LINES.replace("line 20\n", "x\n")})
    target = tree(tmp_path, {"a.txt": LINES.replace("line 19\n", "line 19 \n")})
    with pytest.raises(PatchError) as info:
        apply_patch(parse_patch("p.patch", data), target)
    assert "a.txt hunk #1" in str(info.value)
    assert "line 19 expected 'line 19', found 'line 19 '" in str(info.value)
    assert (target.root / "a.txt").read_text() == LINES.replace("line 19\n", "line 19 \n")


def test_failure_in_second_file_writes_nothing(tmp_path: Path) -> None:
    files = {"a.txt": LINES, "b.txt": LINES}
    data = format_patch(
        tmp_path, files, {"a.txt": LINES.replace("line 3\n", "3\n"), "b.txt": "other\n"}
    )
    target = tree(tmp_path, {"a.txt": LINES, "b.txt": "something else\n"})
    with pytest.raises(PatchError, match=r"b\.txt hunk #1"):
        apply_patch(parse_patch("p.patch", data), target)
    assert (target.root / "a.txt").read_text() == LINES


def test_missing_newline_at_end_of_file(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"a.txt": "one\ntwo"}, {"a.txt": "one\ntwo\nthree"})
    assert b"\\ No newline at end of file" in data
    target = tree(tmp_path, {"a.txt": "one\ntwo"})
    apply_patch(parse_patch("p.patch", data), target)
    assert (target.root / "a.txt").read_bytes() == b"one\ntwo\nthree"


def test_add_delete_rename_and_mode(tmp_path: Path) -> None:
    data = format_patch(
        tmp_path,
        {"old.txt": LINES, "gone.txt": "bye\n", "tool.sh": "echo\n"},
        {"old.txt": None, "new.txt": LINES, "gone.txt": None, "added/x.py": "X = 1\n"},
    )
    target = tree(tmp_path, {"old.txt": LINES, "gone.txt": "bye\n", "tool.sh": "echo\n"})
    result = apply_patch(parse_patch("p.patch", data), target)
    assert sorted(result.written) == ["added/x.py", "new.txt"]
    assert sorted(result.deleted) == ["gone.txt", "old.txt"]
    assert (target.root / "new.txt").read_text() == LINES
    assert not (target.root / "gone.txt").exists()


def test_form_feed_lines_are_not_split(tmp_path: Path) -> None:
    text = "a\n\x0c\nb\x0cc\nd\n"
    data = format_patch(tmp_path, {"f.py": text}, {"f.py": text.replace("d\n", "e\n")})
    target = tree(tmp_path, {"f.py": text})
    apply_patch(parse_patch("p.patch", data), target)
    assert (target.root / "f.py").read_text() == "a\n\x0c\nb\x0cc\ne\n"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("a/x.txt", "b//etc/passwd", "is absolute"),
        ("a/../x.txt", "b/../x.txt", "leaves the tree"),
        ("a/sub/../../x.txt", "b/sub/../../x.txt", "leaves the tree"),
        ("a/.git/config", "b/.git/config", "writes into .git"),
    ],
)
def test_unsafe_paths_are_refused(tmp_path: Path, old: str, new: str, message: str) -> None:
    data = format_patch(tmp_path, {"x.txt": LINES}, {"x.txt": LINES.replace("line 2\n", "2\n")})
    text = data.decode()
    text = text.replace("a/x.txt", old).replace("b/x.txt", new)
    with pytest.raises(PatchError, match=message):
        parse_patch("evil.patch", text.encode())


def test_absolute_path_without_prefix_is_refused(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"x.txt": LINES}, {"x.txt": LINES.replace("line 2\n", "2\n")})
    text = (
        data.decode()
        .replace("--- a/x.txt", "--- /tmp/x.txt")
        .replace("+++ b/x.txt", "+++ /tmp/x.txt")
    )
    text = text.replace("diff --git a/x.txt b/x.txt\n", "")
    with pytest.raises(PatchError, match="is absolute"):
        parse_patch("evil.patch", text.encode())


def test_write_through_symlink_is_refused(tmp_path: Path) -> None:
    data = format_patch(
        tmp_path, {"pkg/x.txt": LINES}, {"pkg/x.txt": LINES.replace("line 2\n", "2\n")}
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.txt").write_text(LINES)
    root = tmp_path / "tree"
    root.mkdir()
    os.symlink(outside, root / "pkg")
    with pytest.raises(PatchError, match="symbolic link"):
        apply_patch(parse_patch("p.patch", data), DirTree(root))
    assert (outside / "x.txt").read_text() == LINES


def test_patch_creating_a_symlink_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    support.run_git(repo, "init", "-q")
    support.run_git(repo, "add", "-A")
    support.run_git(repo, "commit", "-q", "-m", "base")
    os.symlink("/etc/passwd", repo / "link")
    support.run_git(repo, "add", "-A")
    support.run_git(repo, "commit", "-q", "-m", "link")
    data = support.run_git(repo, "format-patch", "--stdout", "-1").encode() + b"\n"
    with pytest.raises(PatchError, match="symbolic link; refused"):
        parse_patch("link.patch", data)


def test_empty_and_garbage_patches_are_refused(tmp_path: Path) -> None:
    header = b"From: A <a@b>\nSubject: [PATCH] nothing\n\nno diff here\n"
    with pytest.raises(PatchError, match="empty patch"):
        parse_patch("empty.patch", header)
    with pytest.raises(PatchError, match="From:/Subject:"):
        parse_patch("bare.diff", b"just text\n")
    broken = header + b"---\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n"
    with pytest.raises(PatchError, match="not a valid unified diff"):
        parse_patch("broken.patch", broken)


def test_series_names_missing_and_duplicate_patches(tmp_path: Path) -> None:
    series_dir = tmp_path / "series"
    series_dir.mkdir()
    (series_dir / "series").write_text("# comment\n\n0001-a.patch  # trailing\n")
    with pytest.raises(ConfigError, match=r"series:3: patch 0001-a.patch does not exist"):
        read_series(series_dir)
    data = format_patch(tmp_path, {"a.txt": LINES}, {"a.txt": LINES.replace("line 2\n", "2\n")})
    (series_dir / "0001-a.patch").write_bytes(data)
    assert [p.name for p in read_series(series_dir)] == ["0001-a.patch"]
    (series_dir / "series").write_text("0001-a.patch\n0001-a.patch\n")
    with pytest.raises(ConfigError, match="listed twice"):
        read_series(series_dir)
    (series_dir / "series").write_text("../0001-a.patch\n")
    with pytest.raises(ConfigError, match="file name beside the series"):
        read_series(series_dir)


@pytest.mark.parametrize(
    "name",
    [".git", ".GIT", ".Git", ".git.", ".git ", "GIT~1", ".g\u200cit", ".gi\ufefft"],
)
def test_git_directory_names_in_any_spelling_are_git(name: str) -> None:
    assert is_git_name(name)


@pytest.mark.parametrize("name", [".gitignore", ".github", "data.git", "git", ".gitmodules"])
def test_git_like_names_are_ordinary(name: str) -> None:
    assert not is_git_name(name)


def test_a_git_component_at_any_depth_is_refused(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"x.txt": LINES}, {"x.txt": LINES.replace("line 2\n", "2\n")})
    text = (
        data.decode()
        .replace("a/x.txt", "a/src/.GiT/config")
        .replace("b/x.txt", "b/src/.GiT/config")
    )
    with pytest.raises(PatchError, match=r"src/\.GiT/config writes into \.git"):
        parse_patch("evil.patch", text.encode())


def test_a_truncated_hunk_names_the_line_where_the_file_ends(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"a.txt": LINES}, {"a.txt": LINES.replace("line 20\n", "x\n")})
    lines = data.decode().split("\n")
    header = next(i for i, line in enumerate(lines, 1) if line.startswith("@@"))
    cut = "\n".join(lines[: header + 3]) + "\n"  # the hunk's header and 3 of its 8 lines
    with pytest.raises(PatchError) as raised:
        parse_patch("0001-cut.patch", cut.encode())
    message = str(raised.value)
    assert f"line {header + 4}: the file ends inside the hunk at line {header}" in message
    assert "truncated" in message


def test_a_garbage_line_inside_a_hunk_is_named(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"a.txt": LINES}, {"a.txt": LINES.replace("line 20\n", "x\n")})
    lines = data.decode().split("\n")
    header = next(i for i, line in enumerate(lines, 1) if line.startswith("@@"))
    lines[header + 1] = "GARBAGE"
    with pytest.raises(PatchError, match=rf"line {header + 2}: the hunk at line {header} "):
        parse_patch("0001-bad.patch", "\n".join(lines).encode())


def test_a_crlf_patch_file_is_refused_with_a_line_ending_hint(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"a.txt": LINES}, {"a.txt": LINES.replace("line 5\n", "5\n")})
    with pytest.raises(PatchError, match=r"CRLF .*LF line endings"):
        parse_patch("0001-crlf.patch", data.replace(b"\n", b"\r\n"))


def test_lf_patch_on_a_crlf_file_hints_at_line_endings(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"a.txt": LINES}, {"a.txt": LINES.replace("line 5\n", "5\n")})
    patch = parse_patch("0001-x.patch", data)
    target = tree(tmp_path, {"a.txt": LINES.replace("\n", "\r\n")})
    with pytest.raises(PatchError, match=r"The file's lines end in CRLF"):
        apply_patch(patch, target)


def test_a_change_already_in_the_tree_says_already_applied(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"a.txt": LINES}, {"a.txt": LINES.replace("line 5\n", "5\n")})
    patch = parse_patch("0002-again.patch", data)
    target = tree(tmp_path, {"a.txt": LINES.replace("line 5\n", "5\n")})
    with pytest.raises(PatchError, match=r"0002-again.patch: a.txt hunk #1 .* is already applied"):
        apply_patch(patch, target)


def test_date_header_missing_takes_the_pin_date_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    data = format_patch(tmp_path, {"a.txt": LINES}, {"a.txt": LINES.replace("line 5\n", "5\n")})
    dated = parse_patch("0001-x.patch", data)
    assert commit_date(dated, 1234567890) != "1234567890 +0000"
    undated = parse_patch("0001-x.patch", re.sub(rb"(?m)^Date: .*\n", b"", data))
    assert undated.date == ""
    assert commit_date(undated, 1234567890) == "1234567890 +0000"
    bad = re.sub(rb"(?m)^Date: .*$", b"Date: yesterday-ish", data)
    with pytest.raises(PatchError, match=r"Date: header 'yesterday-ish' is not an RFC 2822 date"):
        parse_patch("0001-x.patch", bad)
