"""Git sources: bare mirrors in the cache (GitPython), rev → commit resolution, moved-tag checks."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import git

from patchwheel import console
from patchwheel.config.pins import COMMIT_RE, GitPin
from patchwheel.errors import FetchError, LockError
from patchwheel.upstream.cache import Cache, sha256_bytes

SHORT_COMMIT_RE = re.compile(r"^[0-9a-f]{4,40}$")
# Only plain transports: no `ext::` command execution from a URL in a target file.
SAFE_ENV = {"GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh", "GIT_TERMINAL_PROMPT": "0"}


def mirror_key(url: str) -> str:
    """The cache key of a repository URL."""
    return sha256_bytes(url.encode())[:24]


def _git_env() -> dict[str, str]:
    return {**os.environ, **SAFE_ENV}


def ls_remote(pin: GitPin) -> str:
    """Resolve the pin's rev on the remote to a commit (tags peeled), without cloning."""
    if pin.is_commit:
        return pin.rev
    try:
        out = git.Git().execute(
            ["git", "ls-remote", "--", pin.url, pin.rev, f"{pin.rev}^{{}}"],
            env=_git_env(),
        )
    except git.GitCommandError as exc:
        raise FetchError(f"pin {pin.text!r}: cannot read {pin.url}: {exc.stderr.strip()}") from exc
    refs: dict[str, str] = {}
    for line in str(out).splitlines():
        sha, _, ref = line.partition("\t")
        refs[ref] = sha
    for ref in (f"refs/tags/{pin.rev}^{{}}", f"refs/tags/{pin.rev}", f"refs/heads/{pin.rev}"):
        if ref in refs:
            return refs[ref]
    peeled = [sha for ref, sha in refs.items() if ref.endswith("^{}")]
    if peeled:
        return peeled[0]
    if refs:
        return next(iter(refs.values()))
    raise FetchError(f"pin {pin.text!r}: {pin.url} has no tag or branch {pin.rev!r}")


def mirror(pin: GitPin, commit: str, cache: Cache) -> git.Repo:
    """A bare mirror of the pin's repository that contains ``commit``.

    A mirror already holding the commit is used as is: no network request. Otherwise the
    repository is fetched and, for a tag or branch, the rev must still point at ``commit``.
    """
    if not COMMIT_RE.match(commit):
        raise LockError(f"pin {pin.text!r}: lock records {commit!r}, not a 40-hex commit")
    path = cache.git_path(mirror_key(pin.url))
    repo = _open_or_init(path)
    if _has_commit(repo, commit):
        return repo
    if not pin.is_commit:
        # Before anything is fetched: once the moved tag's history (which may contain the
        # locked commit) is in the mirror, the next run would find the commit and go on.
        current = ls_remote(pin)
        if current != commit:
            raise _moved(pin, current, commit)
    try:
        _fetch_all(repo, pin.url)
    except git.GitCommandError as exc:
        raise FetchError(f"pin {pin.text!r}: git fetch failed: {exc.stderr.strip()}") from exc
    if not pin.is_commit:
        current = resolve_in(repo, pin.rev)
        if current != commit:  # it moved between ls-remote and fetch
            raise _moved(pin, current, commit)
    if not _has_commit(repo, commit):
        raise FetchError(f"pin {pin.text!r}: commit {commit} is not in {pin.url}")
    return repo


def _fetch_all(repo: git.Repo, url: str, *options: str) -> None:
    """``git fetch`` every branch and tag of ``url`` into the bare mirror as they are now
    (forced: a moved tag or rewritten branch is taken over); GitCommandError on failure."""
    console.status(f"git fetch {url}")
    repo.git.execute(
        [
            *("git", "fetch", "--quiet", "--force", "--tags", *options, "--", url),
            *("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"),
        ],
        env=_git_env(),
    )


def _moved(pin: GitPin, current: str, commit: str) -> LockError:
    return LockError(
        f"pin {pin.text!r}: {pin.rev!r} now points to {current}, but the lock records "
        f"{commit}; the tag or branch moved. Re-lock on purpose with "
        f"`nox -s lock -- --update {pin.project}` if the new commit is trusted"
    )


def mirror_repo(url: str, cache: Cache) -> git.Repo:
    """The bare mirror of ``url`` as it is (made empty when there is none; no network)."""
    return _open_or_init(cache.git_path(mirror_key(url)))


def refresh(url: str, cache: Cache) -> git.Repo:
    """The bare mirror of ``url`` with every branch and tag fetched now (network)."""
    repo = _open_or_init(cache.git_path(mirror_key(url)))
    try:
        _fetch_all(repo, url, "--prune")
    except git.GitCommandError as exc:
        raise FetchError(f"git fetch {url} failed: {exc.stderr.strip()}") from exc
    return repo


def expand_commit(repo: git.Repo, prefix: str, *, what: str) -> str | None:
    """The one commit whose id starts with ``prefix`` (4-40 hex); None when there is none.

    Several commits sharing the prefix is an error naming them: a short id must not be guessed.
    """
    prefix = prefix.lower()
    if not SHORT_COMMIT_RE.match(prefix):
        raise FetchError(f"{what}: {prefix!r} is not a commit id (4 to 40 hex digits)")
    try:
        out = repo.git.rev_parse(f"--disambiguate={prefix}")
    except git.GitCommandError:
        return None
    commits = []
    for oid in str(out).split():
        try:
            kind = repo.git.cat_file("-t", oid)
        except git.GitCommandError:  # pragma: no cover - listed objects exist
            continue
        if kind == "commit":
            commits.append(oid)
    if len(commits) > 1:
        raise FetchError(
            f"{what}: {prefix} names {len(commits)} commits in {repo.git_dir} "
            f"({', '.join(c[:12] for c in commits)}); refusing to guess"
        )
    return commits[0] if commits else None


def first_parents(repo: git.Repo, commit: str, *, stop: str | None, limit: int) -> list[str]:
    """``commit`` and up to ``limit - 1`` of its first-parent ancestors, newest first, never
    reaching ``stop`` (or its ancestors)."""
    args = ["--first-parent", f"--max-count={limit}", commit]
    if stop and _has_commit(repo, stop):
        args.append(f"^{stop}")
    return str(repo.git.rev_list(*args)).split()


def is_ancestor(repo: git.Repo, ancestor: str, commit: str) -> bool:
    """Whether ``ancestor`` is ``commit`` or one of its ancestors."""
    try:
        repo.git.merge_base("--is-ancestor", ancestor, commit)
    except git.GitCommandError:
        return False
    return True


def resolve_in(repo: git.Repo, rev: str) -> str:
    """Resolve a rev inside a local repository to its commit id."""
    for candidate in (f"refs/tags/{rev}", f"refs/heads/{rev}", rev):
        try:
            return str(repo.git.rev_parse("--verify", "--quiet", f"{candidate}^{{commit}}"))
        except git.GitCommandError:
            continue
    raise FetchError(f"revision {rev!r} not found in {repo.git_dir}")


def commit_time(repo: git.Repo, commit: str) -> int:
    """The committer timestamp of a commit (the pin's date, for reproducible builds)."""
    return int(repo.commit(commit).committed_date)


def _has_commit(repo: git.Repo, commit: str) -> bool:
    try:
        repo.git.cat_file("-e", f"{commit}^{{commit}}")
    except git.GitCommandError:
        return False
    return True


def _open_or_init(path: Path) -> git.Repo:
    if (path / "HEAD").is_file():
        return git.Repo(path)
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    repo = git.Repo.init(tmp, bare=True)
    with repo.config_writer() as cfg:
        cfg.set_value("gc", "auto", "0")
    os.replace(tmp, path)
    return git.Repo(path)
