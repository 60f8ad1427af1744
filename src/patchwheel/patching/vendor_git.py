"""Git commands on vendor repos for the layers above the build (rebase, export).

Every command runs without the user's global or system git config, so output such as
``git format-patch`` is byte-for-byte the same on every machine (no ``diff.noprefix``,
``diff.algorithm`` or colour settings leaking in), and returns exact bytes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from patchwheel.errors import VendorError
from patchwheel.patching.patches import DirTree, Patch
from patchwheel.upstream import gitsrc

DEFAULT_ABBREV = 7
_INDEX_LINE = re.compile(rb"^index ([0-9a-f]+)\.\.([0-9a-f]+)", re.MULTILINE)
_SUBJECT = re.compile(rb"^Subject: (?:\[([^\]\n]*)\])?", re.MULTILINE)
_NUMBERED = re.compile(r"(.*?)\d+/\d+")


_FIXED = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "LC_ALL": "C",
    "GIT_EDITOR": "true",
    "GIT_MERGE_AUTOEDIT": "no",
    **gitsrc.SAFE_ENV,
}


def base_env() -> dict[str, str]:
    """The environment of every command: no user config, plain transports, C messages."""
    return {**os.environ, **_FIXED}


def run(
    repo: Path,
    *args: str,
    input_data: bytes | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git ARGS`` in ``repo``; raise VendorError naming the command when it fails."""
    proc = subprocess.run(
        ["git", *args],
        cwd=repo,
        input=input_data,
        capture_output=True,
        env={**base_env(), **(env or {}), **_FIXED},
        check=False,
    )
    if check and proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip() or proc.stdout.decode().strip()
        raise VendorError(f"git {' '.join(args[:3])} failed in {repo}: {err}")
    return proc


def text(repo: Path, *args: str) -> str:
    """The stripped text output of a git command."""
    return run(repo, *args).stdout.decode("utf-8", "surrogateescape").strip()


def rev(repo: Path, name: str) -> str | None:
    """The commit id ``name`` resolves to, or None."""
    proc = run(repo, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False)
    if proc.returncode != 0:
        return None
    return proc.stdout.decode().strip() or None


def tree(repo: Path, commit: str) -> str:
    """The tree id of a commit."""
    return text(repo, "rev-parse", f"{commit}^{{tree}}")


def git_dir(repo: Path) -> Path:
    """The repo's .git directory."""
    return repo / ".git"


def status(repo: Path) -> list[str]:
    """``git status --porcelain`` lines (untracked included): empty means clean."""
    out = run(repo, "status", "--porcelain", "--untracked-files=all").stdout.decode()
    return [line for line in out.splitlines() if line]


def unmerged(repo: Path) -> dict[str, set[int]]:
    """Paths in conflict and the index stages each has (1 base, 2 ours, 3 theirs)."""
    out = run(repo, "ls-files", "-u", "-z").stdout.decode("utf-8", "surrogateescape")
    found: dict[str, set[int]] = {}
    for entry in out.split("\0"):
        if not entry:
            continue
        info, _, path = entry.partition("\t")
        found.setdefault(path, set()).add(int(info.split()[2]))
    return found


def commits_between(repo: Path, base: str, head: str) -> list[str]:
    """The commits of ``base..head``, oldest first; refuses merges."""
    merges = text(repo, "rev-list", "--merges", f"{base}..{head}")
    if merges:
        raise VendorError(
            f"{repo}: {base[:12]}..{head[:12]} contains merge commits ({merges.split()[0][:12]}); "
            "a series is a straight line of commits: rebase them into one line first"
        )
    listed = text(repo, "rev-list", "--reverse", f"{base}..{head}")
    return listed.split()


def is_ancestor(repo: Path, ancestor: str, commit: str) -> bool:
    """Whether ``ancestor`` is ``commit`` or one of its ancestors."""
    return run(repo, "merge-base", "--is-ancestor", ancestor, commit, check=False).returncode == 0


def abbrev_of(data: bytes) -> int:
    """The blob-id length a patch file's ``index`` lines use (what to keep when rewriting it)."""
    match = _INDEX_LINE.search(data)
    return len(match.group(1)) if match else DEFAULT_ABBREV


def has_renames(patch: Patch) -> bool:
    """Whether a patch was written with rename detection (it has a rename)."""
    return any(pf.is_rename for pf in patch.files)


def subject_prefix(data: bytes, *, number: int | None = None, total: int | None = None) -> str:
    """The ``[…]`` prefix a patch file's subject carries; renumbered when a number is given.

    ``[PATCH 2/5]`` → ``PATCH 1/3`` (number 1 of 3); ``[PATCH]`` → ``PATCH``; none → ``""``.
    """
    match = _SUBJECT.search(data)
    if match is None:
        return "PATCH"
    if match.group(1) is None:
        return ""
    prefix = match.group(1).decode("utf-8", "replace")
    numbered = _NUMBERED.fullmatch(prefix)
    if numbered and number is not None and total is not None:
        return f"{numbered.group(1)}{number}/{total}"
    return prefix


def format_patch(
    repo: Path,
    commit: str,
    *,
    abbrev: int = DEFAULT_ABBREV,
    renames: bool,
    prefix: str = "PATCH",
) -> bytes:
    """One commit as a ``git format-patch --zero-commit --no-signature`` file, deterministically."""
    return run(
        repo,
        "format-patch",
        "--stdout",
        "-1",
        "--zero-commit",
        "--no-signature",
        "--no-color",
        "--no-notes",
        f"--subject-prefix={prefix}",
        f"--abbrev={abbrev}",
        "-M" if renames else "--no-renames",
        "--diff-algorithm=myers",
        commit,
    ).stdout


def commit_subject(repo: Path, commit: str) -> str:
    """The subject line of a commit."""
    return text(repo, "log", "-1", "--format=%s", commit)


def range_diff(repo: Path, old: str, new: str) -> str:
    """``git range-diff`` of one old commit against its rewritten version (no colour)."""
    proc = run(
        repo,
        "range-diff",
        "--no-color",
        "--creation-factor=100",
        f"{old}^..{old}",
        f"{new}^..{new}",
        check=False,
    )
    return proc.stdout.decode("utf-8", "replace").rstrip("\n")


def changed_paths(repo: Path, old: str, new: str) -> list[str]:
    """The paths that differ between two commits."""
    out = run(repo, "diff", "--name-only", "--no-renames", "-z", old, new).stdout.decode(
        "utf-8", "surrogateescape"
    )
    return [p for p in out.split("\0") if p]


def exists_in(repo: Path, commit: str, path: str) -> bool:
    """Whether a file exists at ``path`` in ``commit``."""
    return run(repo, "cat-file", "-e", f"{commit}:{path}", check=False).returncode == 0


def set_branch(repo: Path, branch: str, commit: str) -> None:
    """Check ``branch`` out at ``commit``, discarding any change (a conflict included)."""
    gd = git_dir(repo)
    for name in ("CHERRY_PICK_HEAD", "MERGE_MSG", "AUTO_MERGE", "MERGE_HEAD"):
        (gd / name).unlink(missing_ok=True)
    if (gd / "sequencer").is_dir():
        shutil.rmtree(gd / "sequencer")
    run(repo, "update-ref", f"refs/heads/{branch}", commit)
    run(repo, "symbolic-ref", "HEAD", f"refs/heads/{branch}")
    run(repo, "reset", "-q", "--hard", commit)
    run(repo, "clean", "-q", "-f", "-d", "-x")


class CommitTree(DirTree):
    """The files of a commit, read from git; writes and deletes stay in memory (a scratch tree)."""

    def __init__(self, repo: Path, commit: str) -> None:
        super().__init__(repo)
        self.commit = commit
        self.files: dict[str, bytes | None] = {}

    def read(self, path: str) -> bytes | None:
        """The file's bytes as last written here, else in the commit (None: no such file)."""
        if path in self.files:
            return self.files[path]
        proc = run(self.root, "cat-file", "blob", f"{self.commit}:{path}", check=False)
        return proc.stdout if proc.returncode == 0 else None

    def write(self, path: str, data: bytes, *, executable: bool | None) -> None:
        """Keep the new bytes in memory."""
        del executable
        self.files[path] = data

    def delete(self, path: str) -> None:
        """Record the deletion in memory."""
        self.files[path] = None

    def through_symlink(self, path: str) -> bool:
        """Whether the path, or a directory above it, is a symlink in the commit."""
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        out = run(self.root, "ls-tree", self.commit, "--", *prefixes, check=False).stdout
        return any(line.startswith(b"120000 ") for line in out.splitlines())


def blob(repo: Path, commit: str, path: str) -> bytes | None:
    """A file's bytes in a commit (None if it does not exist there)."""
    proc = run(repo, "cat-file", "blob", f"{commit}:{path}", check=False)
    return proc.stdout if proc.returncode == 0 else None
