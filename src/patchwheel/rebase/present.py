"""Whether a patch's change is already upstream, comments and whitespace aside.

Two questions, both on *normalized* text (comments dropped, whitespace runs collapsed, blank
lines gone; Python files through the tokenizer, so a ``#`` inside a string stays):

* :func:`already_present`: would replaying the patch's change (its old commit against its old
  parent) onto the new tree change nothing? A 3-way merge of the normalized files (base: the
  patch's parent, theirs: the patch, ours: the new tree) that is clean and equals ours says so.
* :func:`only_comments`: does a commit change nothing but comments and whitespace? (What is left
  of a patch once upstream made its change with other comments.)

A patch that itself changes only comments is never "already present" by this rule: only an
exact reverse-apply says that.
"""

from __future__ import annotations

import io
import subprocess
import tempfile
import tokenize
from pathlib import Path

from patchwheel.patching import vendor_git

PYTHON_SUFFIXES = (".py", ".pyi")


def normalize(path: str, data: bytes | None) -> list[str] | None:
    """The meaningful lines of a file (None: no such file)."""
    if data is None:
        return None
    text = data.decode("utf-8", "surrogateescape")
    if path.endswith(PYTHON_SUFFIXES):
        lines = _python_lines(text)
        if lines is not None:
            return lines
    out = []
    for line in text.splitlines():
        words = line.split()
        if words and not words[0].startswith("#"):
            out.append(" ".join(words))
    return out


def _python_lines(text: str) -> list[str] | None:
    """Token strings per source line, comments and layout tokens dropped (None: not Python)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    rows: dict[int, list[str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in skip or token.type == tokenize.ENDMARKER:
                continue
            rows.setdefault(token.start[0], []).append(" ".join(token.string.split()))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return [" ".join(parts) for _row, parts in sorted(rows.items())]


def only_comments(repo: Path, parent: str, commit: str) -> bool:
    """Whether ``commit`` changes nothing but comments and whitespace relative to ``parent``."""
    paths = vendor_git.changed_paths(repo, parent, commit)
    return all(
        normalize(path, vendor_git.blob(repo, parent, path))
        == normalize(path, vendor_git.blob(repo, commit, path))
        for path in paths
    )


def already_present(repo: Path, patch_commit: str, head: str) -> list[str] | None:
    """The files whose change the patch's commit makes are all in ``head`` already, comments and
    whitespace aside: those files; None when some change is missing (or the patch is comments)."""
    parent = f"{patch_commit}^"
    paths = vendor_git.changed_paths(repo, parent, patch_commit)
    meaningful = []
    for path in paths:
        base = normalize(path, vendor_git.blob(repo, parent, path))
        theirs = normalize(path, vendor_git.blob(repo, patch_commit, path))
        if base == theirs:
            continue  # this file's part of the patch is comments only
        meaningful.append(path)
        ours = normalize(path, vendor_git.blob(repo, head, path))
        if not _contains_change(base, ours, theirs):
            return None
    return meaningful or None


def _contains_change(
    base: list[str] | None, ours: list[str] | None, theirs: list[str] | None
) -> bool:
    """Whether merging base → theirs into ours leaves ours as it is."""
    if theirs is None:  # the patch deletes the file
        return ours is None
    if ours is None:
        return False
    if base is None:  # the patch creates the file
        return ours == theirs
    merged = _merge(base, ours, theirs)
    return merged is not None and merged == ours


def _merge(base: list[str], ours: list[str], theirs: list[str]) -> list[str] | None:
    """``git merge-file`` of three line lists; None on a conflict."""
    with tempfile.TemporaryDirectory(prefix="patchwheel-present-") as tmp:
        files = []
        for name, lines in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(tmp) / name
            path.write_bytes(
                "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
            )
            files.append(str(path))
        proc = subprocess.run(
            ["git", "merge-file", "-p", "--quiet", *files],
            capture_output=True,
            env=vendor_git.base_env(),
            check=False,
        )
    if proc.returncode != 0:
        return None
    return proc.stdout.decode("utf-8", "surrogateescape").splitlines()
