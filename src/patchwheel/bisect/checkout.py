"""The one working tree a bisect reuses for every step: sparse, borrowing the repository's objects.

The tree lives in the workspace (``build/.work/<target>/bisect/<key>``) and stays at the same
path across steps and runs, because the audit engine keeps its incremental cache per provider
tree *path*: a step then re-checks only the modules the checkout changed. It is a repository of
its own whose object store borrows the project's (``objects/info/alternates``): nothing is
copied and the project's repository is never written. Only the package directories are checked
out (sparse), which is faster and works with mirrors that miss large blobs elsewhere.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from pathlib import Path

from patchwheel.bisect.history import Revision, git, provenance
from patchwheel.errors import BisectError
from patchwheel.patching.vendor_git import base_env

METADATA_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "PKG-INFO")


class Checkout:
    """A sparse working tree of `packages` of the repository at `git_dir`, under `home`."""

    def __init__(self, git_dir: Path, home: Path, packages: tuple[str, ...]) -> None:
        self.git_dir = git_dir
        self.packages = packages
        key = hashlib.sha256("\n".join([str(git_dir), *self.patterns()]).encode()).hexdigest()
        self.path = home / key[:12]
        self.head: str | None = None

    def patterns(self) -> list[str]:
        """The sparse patterns: each package at the root or under ``src/``, and the project's
        metadata files (what it declares, e.g. the provider version a consumer was written for)."""
        packages = [p for name in self.packages for p in (f"/{name}/", f"/src/{name}/")]
        return [*packages, *(f"/{name}" for name in METADATA_FILES)]

    def _objects(self) -> str:
        out = git(self.git_dir, "rev-parse", "--path-format=absolute", "--git-path", "objects")
        return out.strip()

    def prepare(self) -> None:
        """Create the tree, or check that the one found belongs to this repository."""
        alternates = self.path / ".git" / "objects" / "info" / "alternates"
        objects = self._objects()
        if alternates.is_file() and alternates.read_text().strip() == objects:
            self.head = git(self.path, "rev-parse", "--verify", "--quiet", "HEAD", check=False)
            self.head = self.head.strip() or None
            return
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True)
        git(self.path, "init", "--quiet")
        alternates.write_text(objects + "\n")
        git(self.path, "config", "gc.auto", "0")
        git(self.path, "sparse-checkout", "set", "--no-cone", *self.patterns())

    def checkout(self, commit: str) -> float:
        """Move the tree to `commit`; the seconds it took (only changed files are written)."""
        start = time.perf_counter()
        if commit != self.head:
            proc = subprocess.run(
                ["git", "checkout", "--quiet", "--force", "--detach", commit],
                cwd=self.path,
                capture_output=True,
                env=base_env(),
                check=False,
            )
            if proc.returncode != 0:
                self.head = None
                err = proc.stderr.decode("utf-8", "replace").strip()[-1500:]
                raise BisectError(f"cannot check out {commit[:12]} in {self.path}: {err}")
            self.head = commit
        return time.perf_counter() - start


class GitTrees:
    """The steps of a first-parent range, each checked out in one reused :class:`Checkout`."""

    def __init__(self, checkout: Checkout, revisions: list[Revision], repo: Path) -> None:
        self.checkout = checkout
        self.revisions = revisions
        self.repo = repo

    def tree(self, step: int) -> Path:
        self.checkout.checkout(self.revisions[step].id)
        return self.checkout.path

    def provenance(self) -> dict[str, object]:
        """Where the history came from and where it ends (:func:`history.provenance`)."""
        return provenance(self.checkout.git_dir, self.repo, self.revisions[-1].id)
