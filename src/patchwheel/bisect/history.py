"""A git history as bisect reads it: revisions checked, the first-parent range, provenance.

Every revision a user names is hostile input: it is refused when it looks like an option or
holds characters no revision has, and must resolve to a commit of the repository. The range
good..bad is the first-parent chain from bad back to good (the main line, each commit a merged
change), so good must lie on that chain. The repository is only read, never written.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from patchwheel.errors import BisectError
from patchwheel.patching.vendor_git import base_env

_PR = re.compile(r"\(#(\d+)\)")
_BAD_REV = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{")
MAX_REV_LENGTH = 200


@dataclass(frozen=True)
class Revision:
    """One step of the range: a commit (or a release) with what the report shows of it."""

    id: str  # the full commit sha (git) or the pin (``vllm==0.29.0``, releases)
    date: str  # ISO 8601
    subject: str
    parent: str | None = None  # the first parent (git)

    @property
    def pr(self) -> int | None:
        """The pull request the subject names, ``… (#47288)`` (the last one, as GitHub writes)."""
        found = _PR.findall(self.subject)
        return int(found[-1]) if found else None

    @property
    def short(self) -> str:
        return self.id[:10] if re.fullmatch(r"[0-9a-f]{40}", self.id) else self.id

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "date": self.date,
            "subject": self.subject,
            "pr": self.pr,
            "parent": self.parent,
        }


def git(repo: Path, *args: str, check: bool = True) -> str:
    """``git ARGS`` in `repo` (no user config); BisectError naming the command when it fails."""
    proc = subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        env=base_env(),
        check=False,
    )
    if check and proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise BisectError(f"git {' '.join(args[:2])} failed in {repo}: {err}")
    return proc.stdout.decode("utf-8", "surrogateescape")


def open_repository(path: Path, *, what: str = "--repo") -> Path:
    """The git directory of the repository at `path` (bare or not), checked to be one."""
    if not path.is_dir():
        raise BisectError(f"{what} {path}: no such directory; give a git repository's path")
    proc = subprocess.run(
        ["git", "rev-parse", "--absolute-git-dir"],
        cwd=path,
        capture_output=True,
        env=base_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise BisectError(
            f"{what} {path}: not a git repository (a clone or a bare mirror of the project)"
        )
    return Path(proc.stdout.decode().strip())


def check_rev_text(rev: str, option: str) -> str:
    """Refuse what cannot be a revision name before git sees it (options, ranges, reflogs)."""
    if not rev:
        raise BisectError(f"{option}: empty; give a commit, tag or branch")
    if rev.startswith("-"):
        raise BisectError(f"{option} {rev!r}: looks like an option, not a revision")
    if len(rev) > MAX_REV_LENGTH or _BAD_REV.search(rev):
        raise BisectError(
            f"{option} {rev!r}: not a plain revision name (a commit id, tag or branch; no "
            "ranges, reflog or parent suffixes)"
        )
    return rev


def resolve(git_dir: Path, rev: str, option: str) -> str:
    """The full commit id `rev` names in the repository (tags peeled)."""
    check_rev_text(rev, option)
    out = git(git_dir, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    commit = out.strip()
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise BisectError(
            f"{option} {rev!r}: no such commit in {git_dir} (a commit id, tag or branch of that "
            "repository; fetch it first if it is newer than the clone)"
        )
    return commit


def first_parent_range(git_dir: Path, good: str, bad: str) -> list[Revision]:
    """``[good, …, bad]``: bad's first-parent chain back to good, oldest first."""
    if good == bad:
        raise BisectError(f"--good and --bad are the same commit {good[:12]}: nothing to bisect")
    if not _is_ancestor(git_dir, good, bad):
        if _is_ancestor(git_dir, bad, good):
            raise BisectError(
                f"--good {good[:12]} is newer than --bad {bad[:12]}: swap them (good is the "
                "older end of the range)"
            )
        base = git(git_dir, "merge-base", good, bad, check=False).strip()
        hint = f" (their common ancestor is {base[:12]})" if base else ""
        raise BisectError(
            f"--good {good[:12]} is not an ancestor of --bad {bad[:12]}{hint}: a release "
            "commit on its own branch is not on the main line; use the commit it branched "
            "from (git merge-base GOOD BAD)"
        )
    fmt = "%H%x00%P%x00%cI%x00%s"
    out = git(git_dir, "log", "--first-parent", f"--format={fmt}", f"{good}..{bad}", "--")
    chain = [_revision(line) for line in out.splitlines() if line]
    chain.reverse()
    if not chain or chain[0].parent != good:
        raise BisectError(
            f"--good {good[:12]} is an ancestor of --bad {bad[:12]} but not on its first-parent "
            "chain (it came in through a merged side branch): give a commit of the main line, "
            "e.g. the merge that brought it in or `git merge-base --fork-point`"
        )
    good_line = git(git_dir, "log", "-1", f"--format={fmt}", good, "--").strip()
    return [_revision(good_line), *chain]


def _revision(line: str) -> Revision:
    sha, parents, date, subject = line.split("\x00", 3)
    first = parents.split()[0] if parents.split() else None
    return Revision(sha, date, subject, first)


def _is_ancestor(git_dir: Path, ancestor: str, commit: str) -> bool:
    proc = subprocess.run(
        ["git", "merge-base", "--is-ancestor", ancestor, commit],
        cwd=git_dir,
        capture_output=True,
        env=base_env(),
        check=False,
    )
    return proc.returncode == 0


def provenance(git_dir: Path, path: Path, bad: str) -> dict[str, object]:
    """Where the history came from and where it ends, as far as the repository itself says.

    ``later_on_main_line``: how many commits a branch of the repository holds after bad on a
    first-parent line through bad (0: the history of bad's line ends at bad; a change after it
    is beyond the available history). Branches only: a forge's pull-request refs are no line
    of the project. ``newest_commit``: the newest commit of any branch, for scale.
    """
    remotes = git(git_dir, "config", "--get-regexp", r"^remote\..*\.url$", check=False)
    newest = git(
        git_dir,
        "for-each-ref",
        "--sort=-committerdate",
        "--count=1",
        "--format=%(objectname)%00%(committerdate:iso-strict)%00%(refname)",
        "refs/heads",
        "refs/remotes",
    ).strip()
    later, through = 0, None
    containing = git(
        git_dir,
        "for-each-ref",
        "--contains",
        bad,
        "--format=%(refname)",
        "refs/heads",
        "refs/remotes",
    )
    for ref in containing.split():
        commits = git(git_dir, "rev-list", "--first-parent", ref, "--not", bad).split()
        if commits and _first_parent(git_dir, commits[-1]) == bad and len(commits) > later:
            later, through = len(commits), ref
    sha, date, ref = ([*newest.split("\x00"), "", "", ""])[:3]
    return {
        "path": str(path),
        "git_dir": str(git_dir),
        "remotes": [line.split(" ", 1)[1] for line in remotes.splitlines() if " " in line],
        "refs": len(git(git_dir, "for-each-ref", "--format=%(refname)").split()),
        "newest_commit": {"id": sha, "date": date, "ref": ref} if sha else None,
        "branches_containing_bad": containing.split(),
        "later_on_main_line": later,
        "later_through": through,
    }


def _first_parent(git_dir: Path, commit: str) -> str | None:
    parents = git(git_dir, "rev-parse", f"{commit}^@").split()
    return parents[0] if parents else None
