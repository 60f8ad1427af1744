"""Vendor trees: ``vendor/<target>/<project>``, a git repo of the pinned sources plus the series.

Branch ``upstream`` holds the pinned sources (a git pin's own commit, or an import of the sdist);
branch ``patched`` (checked out) adds one commit per patch, with the patch's author, date and
message. A run that fails leaves the repo exactly as it found it; a repo created by a failing
run never appears. Unchanged inputs do nothing; a changed patch replays from that patch on.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import git

from patchwheel import atomic, console
from patchwheel.errors import VendorError
from patchwheel.patching.apply import apply_patch
from patchwheel.patching.patches import DirTree, Offset, Patch, commit_date
from patchwheel.upstream import gitsrc

STATE_FILE = "patchwheel-state.json"
TXN_FILE = "patchwheel-txn.json"
REBASE_MARKER = "patchwheel-rebase"  # .git/<this>: `patchwheel rebase` stopped in this tree
UPSTREAM = "upstream"
PATCHED = "patched"
COMMITTER = ("patchwheel", "patchwheel@users.noreply.local")
# Keep every byte as the pin has it: no eol conversion, keyword expansion or export filtering.
# The date of a patch without ``Date:`` where no pin date is at hand (zip's epoch, 1980-01-01).
NO_DATE_EPOCH = 315532800
ATTRIBUTES = "* -text -eol -ident -filter -working-tree-encoding -export-ignore -export-subst\n"


@dataclass(frozen=True)
class Upstream:
    """What the ``upstream`` commit must hold: an identity, and a way to produce it."""

    identity: str  # sha256 of the sdist, or the git commit
    description: str  # e.g. "speculators 0.3.0 (sdist sha256 8e66…)"
    epoch: int  # the pin's own timestamp
    tree: Path | None = None  # an extracted source tree to import …
    git_dir: str | None = None  # … or a mirror holding the commit `identity`
    tree_source: Callable[[], Path] | None = None  # … or what gives that tree when needed

    def source_tree(self) -> Path:
        """The tree to import (made, and verified, only when an import needs it)."""
        if self.tree is not None:
            return self.tree
        if self.tree_source is None:
            raise VendorError(f"{self.description}: no source tree to import")
        return self.tree_source()


@dataclass
class VendorResult:
    """What preparing a vendor tree did."""

    path: Path
    head: str
    upstream: str
    applied: list[str] = field(default_factory=list)
    reused: int = 0
    offsets: list[Offset] = field(default_factory=list)


def prepare(vendor_dir: Path, upstream: Upstream, series: Sequence[Patch]) -> VendorResult:
    """Bring a vendor tree to ``upstream`` + ``series``, atomically."""
    _remove_stale_temps(vendor_dir)
    if not vendor_dir.exists():
        return _create(vendor_dir, upstream, series)
    _recover(vendor_dir)
    repo = _open_ours(vendor_dir)
    state = _read_state(repo)
    snapshot = _Snapshot.take(repo, state)
    txn = Path(repo.git_dir) / TXN_FILE
    atomic.write_json(txn, snapshot.to_json(), indent=1)
    try:
        result = _update(repo, vendor_dir, upstream, series, state, label=vendor_dir)
    except BaseException:
        snapshot.restore(repo)
        txn.unlink(missing_ok=True)
        raise
    txn.unlink(missing_ok=True)
    return result


def recover(vendor_dir: Path) -> bool:
    """Undo what a killed run left in a vendor tree (half-made copies, a half-applied series).

    The tree goes back to its state before that run (the last good state). Call it before
    deciding anything about the tree (the caller holds the target's lock). Returns whether
    there was anything to undo.
    """
    stale = _remove_stale_temps(vendor_dir)
    return _recover(vendor_dir) or stale


TreeState = Literal["current", "stale", "held"]


def tree_state(vendor_dir: Path, identity: str, series: Sequence[Patch]) -> tuple[TreeState, str]:
    """Whether a vendor tree is at ``identity`` + ``series``, and if not, whose it is now.

    ``current``: clean at the series, nothing to do. ``stale``: patchwheel's, clean, at other
    inputs (or missing): :func:`prepare` brings it to the series. ``held``: someone's work is
    in it (uncommitted changes, commits not exported, a rebase in progress, not ours), which
    patchwheel does not touch; the second value says what.
    """
    if not vendor_dir.exists():
        return "stale", "missing"
    try:
        repo = _open_ours(vendor_dir)
    except VendorError as exc:
        return "held", str(exc)
    state = _read_state(repo)
    applied = state.get("applied")
    if state.get("upstream") != identity or not isinstance(applied, list):
        return "stale", "other sources"
    if [entry[:2] for entry in applied] != [[p.name, p.sha256] for p in series]:
        return "stale", "another series"
    return "current", ""


def _remove_stale_temps(vendor_dir: Path) -> bool:
    """Drop half-made vendor trees of interrupted runs (callers hold the target's lock)."""
    found = False
    if vendor_dir.parent.is_dir():
        for stale in vendor_dir.parent.glob(f".{vendor_dir.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
            found = True
    return found


def _recover(vendor_dir: Path) -> bool:
    """Undo a run that was killed while it changed the vendor tree."""
    txn = vendor_dir / ".git" / TXN_FILE
    if not txn.is_file():
        return False
    console.status(f"vendor {vendor_dir}: restoring the state before an interrupted run")
    (vendor_dir / ".git" / "index.lock").unlink(missing_ok=True)  # left by a killed git
    snapshot = _Snapshot.from_json(json.loads(txn.read_text("utf-8")))
    snapshot.restore(git.Repo(vendor_dir))
    txn.unlink()
    return True


def _create(vendor_dir: Path, upstream: Upstream, series: Sequence[Patch]) -> VendorResult:
    vendor_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=vendor_dir.parent, prefix=f".{vendor_dir.name}.tmp-"))
    try:
        repo = git.Repo.init(tmp, initial_branch=PATCHED)
        _configure(repo)
        result = _update(repo, tmp, upstream, series, state={}, label=vendor_dir)
        repo.close()
        os.replace(tmp, vendor_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.path = vendor_dir
    return result


def _update(
    repo: git.Repo,
    path: Path,
    upstream: Upstream,
    series: Sequence[Patch],
    state: dict[str, object],
    *,
    label: Path,
) -> VendorResult:
    wanted = [[p.name, p.sha256] for p in series]
    applied = state.get("applied", []) if state.get("upstream") == upstream.identity else []
    assert isinstance(applied, list)
    keep = 0
    while keep < len(applied) and keep < len(wanted) and applied[keep][:2] == wanted[keep]:
        keep += 1
    if state.get("upstream") == upstream.identity:
        upstream_commit = str(state["upstream_commit"])
    else:
        console.status(f"vendor {label}: import {upstream.description}")
        upstream_commit = _import_upstream(repo, path, upstream)
        keep = 0
    base = applied[keep - 1][2] if keep else upstream_commit
    head = _head(repo)
    result = VendorResult(path=path, head=head, upstream=upstream_commit, reused=keep)
    if keep == len(wanted) == len(applied) and head == base:
        return result
    repo.git.checkout("-q", "-f", "-B", PATCHED, base)
    repo.git.clean("-q", "-f", "-d", "-x")
    records = [list(entry) for entry in applied[:keep]]
    for patch in series[keep:]:
        outcome = apply_patch(patch, DirTree(path))
        result.offsets.extend(outcome.offsets)
        commit = _commit_patch(repo, patch, upstream.epoch)
        records.append([patch.name, patch.sha256, commit])
        result.applied.append(patch.name)
    result.head = _head(repo)
    _write_state(
        repo,
        {"upstream": upstream.identity, "upstream_commit": upstream_commit, "applied": records},
    )
    return result


def _import_upstream(repo: git.Repo, path: Path, upstream: Upstream) -> str:
    """Make the ``upstream`` branch hold the pinned sources; return its commit."""
    if upstream.git_dir is not None:
        repo.git.fetch("--quiet", "--no-tags", upstream.git_dir, upstream.identity)
        commit = upstream.identity
    else:
        commit = _import_tree(repo, path, upstream)
    repo.git.update_ref(f"refs/heads/{UPSTREAM}", commit)
    return commit


def _import_tree(repo: git.Repo, path: Path, upstream: Upstream) -> str:
    source = upstream.source_tree()
    for child in path.iterdir():
        if child.name == ".git":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    shutil.copytree(
        source,
        path,
        symlinks=True,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(".patchwheel-tree", ".git"),
    )
    repo.git.add("-A", "-f", ".")
    tree = repo.git.write_tree()
    parents: list[str] = []
    previous = _ref(repo, UPSTREAM)
    if previous:
        parents = ["-p", previous]
    date = f"{upstream.epoch} +0000"
    env = _identity_env(COMMITTER, COMMITTER, date, date)
    message = f"upstream: {upstream.description}\n"
    return str(repo.git.execute(["git", "commit-tree", tree, *parents, "-m", message], env=env))


def _commit_patch(repo: git.Repo, patch: Patch, epoch: int) -> str:
    """Commit the worktree as the patch's commit: its author, date (else the pin's) and message."""
    repo.git.add("-A", "-f", ".")
    tree = repo.git.write_tree()
    parent = _head(repo)
    date = commit_date(patch, epoch)
    env = _identity_env((patch.author, patch.email), COMMITTER, date, date)
    commit = str(
        repo.git.execute(["git", "commit-tree", tree, "-p", parent, "-m", patch.message], env=env)
    )
    repo.git.update_ref(f"refs/heads/{PATCHED}", commit)
    repo.git.reset("-q", "--hard", commit)
    return commit


def _identity_env(
    author: tuple[str, str], committer: tuple[str, str], author_date: str, commit_date: str
) -> dict[str, str]:
    return {
        **os.environ,
        **gitsrc.SAFE_ENV,
        "GIT_AUTHOR_NAME": author[0],
        "GIT_AUTHOR_EMAIL": author[1],
        "GIT_AUTHOR_DATE": author_date,
        "GIT_COMMITTER_NAME": committer[0],
        "GIT_COMMITTER_EMAIL": committer[1],
        "GIT_COMMITTER_DATE": commit_date,
    }


def _configure(repo: git.Repo) -> None:
    with repo.config_writer() as cfg:
        cfg.set_value("core", "autocrlf", "false")
        cfg.set_value("gc", "auto", "0")
    info = Path(repo.git_dir) / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text(ATTRIBUTES)


def _open_ours(vendor_dir: Path) -> git.Repo:
    try:
        repo = git.Repo(vendor_dir)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        raise VendorError(
            f"{vendor_dir} exists but is not a vendor tree (no git repo); move it away"
        ) from exc
    if (
        Path(repo.working_tree_dir or "") != vendor_dir.resolve()
        and Path(repo.working_tree_dir or "") != vendor_dir
    ):
        raise VendorError(f"{vendor_dir} is inside another git repo, not a vendor tree")
    if not (Path(repo.git_dir) / STATE_FILE).is_file():
        raise VendorError(f"{vendor_dir} is a git repo patchwheel did not create; move it away")
    marker = Path(repo.git_dir) / REBASE_MARKER
    if marker.is_file():
        raise VendorError(
            f"vendor tree {vendor_dir} is in the middle of a rebase: {marker.read_text().strip()}"
        )
    if repo.is_dirty(untracked_files=True):
        raise VendorError(
            f"vendor tree {vendor_dir} has uncommitted changes. Commit them and export them "
            f"as a patch (`patchwheel export`), or discard them "
            f"(`git -C {vendor_dir} reset --hard && git -C {vendor_dir} clean -fdx`)"
        )
    head = _head(repo)
    applied = _read_state(repo).get("applied") or []
    assert isinstance(applied, list)
    expected = applied[-1][2] if applied else _read_state(repo).get("upstream_commit")
    if head != expected:
        raise VendorError(
            f"vendor tree {vendor_dir} has commits the series does not have (HEAD {head[:12]}). "
            "Export them as patches (`patchwheel export`) or reset to the series "
            f"(`git -C {vendor_dir} reset --hard {str(expected)[:12]}`)"
        )
    return repo


def _head(repo: git.Repo) -> str:
    try:
        return str(repo.git.rev_parse("--verify", "--quiet", "HEAD"))
    except git.GitCommandError:
        return ""


def _ref(repo: git.Repo, branch: str) -> str:
    try:
        return str(repo.git.rev_parse("--verify", "--quiet", f"refs/heads/{branch}"))
    except git.GitCommandError:
        return ""


def _read_state(repo: git.Repo) -> dict[str, object]:
    path = Path(repo.git_dir) / STATE_FILE
    if not path.is_file():
        return {}
    data: dict[str, object] = json.loads(path.read_text("utf-8"))
    return data


def _write_state(repo: git.Repo, state: dict[str, object]) -> None:
    atomic.write_json(Path(repo.git_dir) / STATE_FILE, state, indent=1)


@dataclass(frozen=True)
class _Snapshot:
    """The refs and state of a vendor repo before a run, to restore on failure."""

    head: str
    upstream: str
    state: dict[str, object]

    @classmethod
    def take(cls, repo: git.Repo, state: dict[str, object]) -> _Snapshot:
        return cls(_head(repo), _ref(repo, UPSTREAM), dict(state))

    def to_json(self) -> dict[str, object]:
        return {"head": self.head, "upstream": self.upstream, "state": self.state}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> _Snapshot:
        return cls(str(data["head"]), str(data["upstream"]), dict(data["state"]))

    def restore(self, repo: git.Repo) -> None:
        if self.upstream:
            repo.git.update_ref(f"refs/heads/{UPSTREAM}", self.upstream)
        if self.head:
            repo.git.checkout("-q", "-f", "-B", PATCHED, self.head)
            repo.git.reset("-q", "--hard", self.head)
        repo.git.clean("-q", "-f", "-d", "-x")
        _write_state(repo, self.state)


# --------------------------------------------------------------------------- for rebase/export


def import_upstream(repo: git.Repo, upstream: Upstream) -> str:
    """Import new pinned sources onto branch ``upstream`` (an sdist's parent: the old import)."""
    return _import_upstream(repo, Path(repo.working_tree_dir or "."), upstream)


def read_state(repo: git.Repo) -> dict[str, object]:
    """The vendor state: ``{upstream, upstream_commit, applied: [[name, sha256, commit]]}``."""
    return _read_state(repo)


def write_state(repo: git.Repo, state: dict[str, object]) -> None:
    """Record the vendor state (atomically)."""
    _write_state(repo, state)


def patch_commit_env(patch: Patch, epoch: int = NO_DATE_EPOCH) -> dict[str, str]:
    """The git environment of a patch's commit: its author and date, our committer.

    A patch without ``Date:`` takes ``epoch`` (the pin's date where the caller knows it).
    """
    date = commit_date(patch, epoch)
    return _identity_env((patch.author, patch.email), COMMITTER, date, date)
