"""Replay a series onto new upstream sources in its vendor repo, classifying every patch.

For each patch, in order, on top of the patches replayed before it:

0. it names the variants it is for (``Variants:``, :mod:`patchwheel.patching.gates`) and the
   rebased target builds none of them → ``variants-gone`` (dropped, and the report says so);
   its own ``Drop-When`` holds for the new pins (:mod:`patchwheel.rebase.dropwhen`) →
   ``upstream`` (dropped, the predicate and each clause's value recorded);
1. the strict applier (what a build uses), in memory: applies at its lines → ``clean``;
2. ``git apply --check --reverse``: its change is already there → ``upstream`` (dropped);
3. the strict applier found it at other lines → ``offset``;
4. otherwise ``git cherry-pick`` of its old commit: a 3-way merge whose base is the old
   upstream (plus the earlier patches). Success → ``merged``, or ``upstream`` when the result
   is empty or nothing but comments and whitespace is left of it. Conflicts → ``upstream``
   when its change is there comments and whitespace aside (:mod:`patchwheel.rebase.present`),
   else ``conflict``, or ``target-gone`` when a file it edits no longer exists. Both stop with
   the repo in git's conflict state for the user to resolve — unless rerere resolves every
   file from a remembered resolution (:mod:`patchwheel.rebase.rerere`): then the patch is
   committed and the replay goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from patchwheel import console
from patchwheel.errors import PatchError, VendorError
from patchwheel.patching import vendor, vendor_git
from patchwheel.patching.apply import apply_patch, hunk_sides, split_lines
from patchwheel.patching.gates import gates_of
from patchwheel.patching.patches import DEV_NULL, DirTree, Offset, Patch, strip_prefix
from patchwheel.rebase import dropwhen, present, rerere
from patchwheel.rebase.state import PatchState, ProjectState

PATCHED = vendor.PATCHED
_STAGE_KINDS = {
    frozenset({1, 2, 3}): "both changed it",
    frozenset({1, 3}): "the new upstream deleted it, the patch changes it",
    frozenset({1, 2}): "the patch deletes it, the new upstream changed it",
    frozenset({2, 3}): "both add it, differently",
    frozenset({3}): "the patch adds it",
    frozenset({2}): "the new upstream adds it",
}


@dataclass
class Conflict:
    """One file in conflict: why, where the markers are, and the patch's hunks on it."""

    path: str
    kind: str
    regions: list[tuple[int, int]] = field(default_factory=list)
    hunks: list[str] = field(default_factory=list)  # hunk headers that do not apply strictly


@dataclass
class Stop:
    """A replay that needs the user: the project, the patch and its conflicts."""

    project: str
    vendor: Path
    patch: PatchState
    subject: str
    conflicts: list[Conflict]


class _Scratch(DirTree):
    """A directory read as a tree whose writes stay in memory (to try a patch)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.files: dict[str, bytes | None] = {}

    def read(self, path: str) -> bytes | None:
        if path in self.files:
            return self.files[path]
        return super().read(path)

    def write(self, path: str, data: bytes, *, executable: bool | None) -> None:
        del executable
        self.files[path] = data

    def delete(self, path: str) -> None:
        self.files[path] = None


def replay_project(
    project: ProjectState,
    load: Callable[[str], Patch],
    save: Callable[[], None],
    versions: Sequence[Mapping[str, Version | None]],
    variants: Collection[str] | None = None,
) -> Stop | None:
    """Replay the project's series from ``project.position``; stop at the first conflict.

    ``versions``: the version sets of the new pins' builds (``dropwhen.build_versions``), which
    each patch's ``Drop-When`` is read against (it must hold for every one). ``variants``: the
    project's variants in the rebased target (None: not an overlay project).
    """
    repo = project.path
    total = len(project.patches)
    if project.current is not None and (
        vendor_git.rev(repo, "HEAD") != project.base or vendor_git.status(repo)
    ):  # a run killed in the middle of a patch: start that patch again
        vendor_git.set_branch(repo, PATCHED, project.base)
    while project.current is not None:
        record = project.current
        patch = load(record.name)
        conflicts = replay_one(repo, patch, record, versions, variants)
        number = f"[{project.position + 1}/{total}]"
        if conflicts is not None:
            project.stopped = True
            save()
            console.status(f"{project.name} {number} {record.name}: [red]{record.klass}[/]")
            return Stop(project.name, repo, record, patch.subject, conflicts)
        console.status(f"{project.name} {number} {record.name}: {_describe(record)}")
        advance(project)
        save()
    return None


def advance(project: ProjectState) -> None:
    """Move past the current patch (its outcome recorded)."""
    project.position += 1
    project.stopped = False
    project.base = vendor_git.rev(project.path, "HEAD") or ""


def _describe(record: PatchState) -> str:
    colour = {
        "clean": "green",
        "offset": "yellow",
        "merged": "yellow",
        "upstream": "cyan",
        "variants-gone": "cyan",
    }
    text = f"[{colour.get(record.klass, 'red')}]{record.klass}[/]"
    if record.offsets:
        text += f" ({'; '.join(record.offsets)})"
    if record.dropped:
        text += " → dropped"
    return text


def replay_one(
    repo: Path,
    patch: Patch,
    record: PatchState,
    versions: Sequence[Mapping[str, Version | None]],
    variants: Collection[str] | None = None,
) -> list[Conflict] | None:
    """Replay one patch onto HEAD; record its class; the conflicts when it stops, else None."""
    head = vendor_git.rev(repo, "HEAD") or ""
    scoped = gates_of(patch.name, patch.fields, patch.data, patch.name).variants
    if variants is not None and scoped is not None and not scoped & set(variants):
        record.klass = "variants-gone"
        record.reason = (
            f"it is for variant(s) {', '.join(sorted(scoped))} (its Variants: header), none of "
            f"which the rebased target builds ({', '.join(sorted(variants)) or 'none'})"
        )
        record.dropped = True
        return None
    drop_when = patch.fields.get("Drop-When", "")
    if drop_when:
        evaluation = dropwhen.evaluate_each(drop_when, versions)
        if evaluation.holds:
            record.klass = "upstream"
            record.reason = f"its Drop-When holds for the new pins: {evaluation.explain()}"
            record.dropped = True
            return None
    scratch = _Scratch(repo)
    offsets: list[Offset] = []
    forward_error = ""
    try:
        offsets = apply_patch(patch, scratch).offsets
        forward = True
    except PatchError as exc:
        forward = False
        forward_error = str(exc).removeprefix(f"patch {patch.name}: ").split(" Refresh the ")[0]
    if forward and not offsets:
        _commit_strict(repo, patch, record, head)
        record.klass = "clean"
        return None
    if reverse_applies(repo, patch):
        record.klass = "upstream"
        record.reason = "its change is already in the new upstream (the patch reverse-applies)"
        record.dropped = True
        return None
    if forward:
        _commit_strict(repo, patch, record, head)
        record.klass = "offset"
        record.offsets = [_offset_text(o) for o in offsets]
        return None
    gone = [p for p in edited_paths(patch) if not vendor_git.exists_in(repo, head, p)]
    return _cherry_pick(repo, patch, record, head, gone, forward_error)


def _offset_text(offset: Offset) -> str:
    return f"{offset.path} hunk #{offset.hunk} {offset.lines:+d} lines"


def edited_paths(patch: Patch) -> list[str]:
    """The existing files a patch changes, renames or deletes (not the ones it creates)."""
    return sorted(
        {strip_prefix(pf.source_file) for pf in patch.files if pf.source_file != DEV_NULL}
    )


def reverse_applies(repo: Path, patch: Patch) -> bool:
    """Whether the patch's change is already in the tree (``git apply --check -R``)."""
    proc = vendor_git.run(
        repo,
        "apply",
        "--check",
        "--reverse",
        "--whitespace=nowarn",
        "-",
        input_data=patch.data,
        check=False,
    )
    return proc.returncode == 0


def _commit_strict(repo: Path, patch: Patch, record: PatchState, head: str) -> None:
    """Apply the patch with the strict applier and commit it as the patch's commit."""
    result = apply_patch(patch, DirTree(repo))
    paths = sorted(set(result.written) | set(result.deleted))
    vendor_git.run(repo, "add", "-A", "-f", "--", *paths)
    commit = _commit_index(repo, patch, head)
    vendor_git.run(repo, "update-ref", f"refs/heads/{PATCHED}", commit, head)
    record.new_commit = commit


def _commit_index(repo: Path, patch: Patch, parent: str) -> str:
    """Commit the index on ``parent`` as the patch's commit (its author, date and message)."""
    tree = vendor_git.text(repo, "write-tree")
    proc = vendor_git.run(
        repo,
        "commit-tree",
        tree,
        "-p",
        parent,
        "-F",
        "-",
        input_data=patch.message.encode("utf-8"),
        env=vendor.patch_commit_env(patch),
    )
    return proc.stdout.decode().strip()


def _cherry_pick(
    repo: Path, patch: Patch, record: PatchState, head: str, gone: list[str], forward_error: str
) -> list[Conflict] | None:
    proc = vendor_git.run(
        repo,
        "-c",
        "merge.conflictStyle=diff3",
        "-c",
        "merge.renames=true",
        "-c",
        "rerere.enabled=true",
        "-c",
        "rerere.autoupdate=true",
        "cherry-pick",
        "--allow-empty",
        "--keep-redundant-commits",
        record.commit,
        env=vendor.patch_commit_env(patch),
        check=False,
    )
    if proc.returncode == 0:
        new = vendor_git.rev(repo, "HEAD") or ""
        if vendor_git.tree(repo, new) == vendor_git.tree(repo, head):
            vendor_git.set_branch(repo, PATCHED, head)
            record.klass = "upstream"
            record.reason = "the 3-way replay is empty: the new upstream already makes this change"
            record.dropped = True
            return None
        if present.only_comments(repo, head, new) and not present.only_comments(
            repo, f"{record.commit}^", record.commit
        ):
            vendor_git.set_branch(repo, PATCHED, head)
            record.klass = "upstream"
            record.reason = (
                "the 3-way replay leaves only comments and whitespace: the new upstream already "
                "makes this change"
            )
            record.dropped = True
            return None
        record.klass = "merged"
        record.new_commit = new
        record.reason = "applied by a 3-way merge (base: the old upstream)"
        if gone:
            moved = vendor_git.changed_paths(repo, head, new)
            record.reason += f"; {', '.join(gone)} moved upstream: followed to {', '.join(moved)}"
        return None
    stages = vendor_git.unmerged(repo)
    present_in = present.already_present(repo, record.commit, head)
    if present_in is not None:
        vendor_git.set_branch(repo, PATCHED, head)  # ends the cherry-pick
        record.klass = "upstream"
        record.reason = (
            "its change is already in the new upstream, comments and whitespace aside "
            f"({', '.join(present_in)}); the 3-way merge conflicted on the rest"
        )
        record.dropped = True
        return None
    remembered = rerere.used(proc.stdout + proc.stderr)
    if not stages and remembered:
        _remembered(repo, patch, record, head, gone, remembered)
        return None
    if not stages:
        err = proc.stderr.decode("utf-8", "replace").strip()
        vendor_git.set_branch(repo, PATCHED, head)
        raise VendorError(f"git cherry-pick of {record.name} ({record.commit[:12]}) failed: {err}")
    record.klass = "target-gone" if gone else "conflict"
    record.files = sorted(set(stages) | set(remembered))
    record.remembered = sorted(remembered)
    if gone:
        record.reason = f"{', '.join(gone)} no longer exist(s) in the new upstream"
    else:
        record.reason = forward_error or "the 3-way merge has conflicts"
    if remembered:
        record.reason += (
            f"; {', '.join(remembered)} resolved from a remembered resolution (rerere), "
            "the rest needs a person"
        )
    return [
        _conflict(repo, patch, path, frozenset(found)) for path, found in sorted(stages.items())
    ]


def _remembered(
    repo: Path, patch: Patch, record: PatchState, head: str, gone: list[str], paths: list[str]
) -> None:
    """Every conflicted file was resolved from a remembered resolution: commit it, go on."""
    record.klass = "target-gone" if gone else "conflict"
    record.files = sorted(paths)
    record.remembered = sorted(paths)
    record.reason = f"the 3-way merge has conflicts in {', '.join(sorted(paths))}"
    tree = vendor_git.text(repo, "write-tree")
    if tree == vendor_git.tree(repo, head):
        vendor_git.set_branch(repo, PATCHED, head)
        record.dropped = True
        record.resolution = "resolved to no change by a remembered resolution (rerere): dropped"
        return
    commit = _commit_index(repo, patch, head)
    vendor_git.set_branch(repo, PATCHED, commit)
    record.new_commit = commit
    record.resolution = "resolved by a remembered resolution (rerere)"


def _conflict(repo: Path, patch: Patch, path: str, found: frozenset[int]) -> Conflict:
    conflict = Conflict(path, _STAGE_KINDS.get(found, f"index stages {sorted(found)}"))
    file = repo / path
    current = file.read_bytes().decode("utf-8", "surrogateescape") if file.is_file() else ""
    start = 0
    for number, line in enumerate(current.split("\n"), start=1):
        if line.startswith("<<<<<<< "):
            start = number
        elif line.startswith(">>>>>>> ") and start:
            conflict.regions.append((start, number))
            start = 0
    conflict.hunks = failing_hunks(patch, path, _upstream_text(repo, path))
    return conflict


def _upstream_text(repo: Path, path: str) -> list[str]:
    proc = vendor_git.run(repo, "show", f"HEAD:{path}", check=False)
    if proc.returncode != 0:
        return []
    return split_lines(proc.stdout.decode("utf-8", "surrogateescape"))


def failing_hunks(patch: Patch, path: str, lines: list[str]) -> list[str]:
    """The headers of the patch's hunks on ``path`` whose lines are not found in ``lines``."""
    out = []
    for pf in patch.files:
        if path not in {strip_prefix(pf.source_file), strip_prefix(pf.target_file)}:
            continue
        for number, hunk in enumerate(pf, start=1):
            old, _new = hunk_sides(hunk)
            if not _contains(lines, old):
                header = f"@@ -{hunk.source_start},{hunk.source_length} "
                header += f"+{hunk.target_start},{hunk.target_length} @@ {hunk.section_header}"
                out.append(f"hunk #{number} {header.rstrip()}")
    return out


def _contains(lines: list[str], part: list[str]) -> bool:
    n = len(part)
    if not n:
        return True
    return any(lines[i : i + n] == part for i in range(len(lines) - n + 1))


# --------------------------------------------------------------------------- after a stop


def resolve_current(project: ProjectState, patch: Patch) -> None:
    """Take the user's resolution of the stopped patch (``--continue``); advance past it.

    Accepted: the resolved files staged (we commit them as the patch's commit, its author, date
    and message kept), or the user's own single commit on top, or no change at all (the patch
    is then dropped). Unresolved or unstaged files are refused, naming them.
    """
    repo = project.path
    record = project.current
    assert record is not None
    base = project.base
    stages = vendor_git.unmerged(repo)
    if stages:
        raise VendorError(
            f"{repo}: still in conflict: {', '.join(sorted(stages))}. Edit them, then "
            f"`git -C {repo} add FILE` (or `git -C {repo} rm FILE`), and --continue again"
        )
    record.recorded = sorted(set(record.recorded) | set(rerere.record(repo)))
    head = vendor_git.rev(repo, "HEAD") or ""
    if head != base:
        commits = vendor_git.commits_between(repo, base, head)
        if len(commits) != 1 or not vendor_git.is_ancestor(repo, base, head):
            raise VendorError(
                f"{repo}: expected one commit for {record.name} on top of {base[:12]}, found "
                f"{len(commits)}; squash them (`git -C {repo} reset --soft {base[:12]}` and "
                "commit once), then --continue"
            )
    unstaged = _unstaged(repo)
    if unstaged:
        raise VendorError(
            f"{repo}: changes not staged: {', '.join(unstaged)}. `git -C {repo} add` them "
            f"(or `git -C {repo} checkout -- FILE` to discard), then --continue"
        )
    if head == base and vendor_git.text(repo, "write-tree") != vendor_git.tree(repo, base):
        head = _commit_index(repo, patch, base)
        vendor_git.run(repo, "update-ref", f"refs/heads/{PATCHED}", head)
    vendor_git.set_branch(repo, PATCHED, head)  # ends the cherry-pick
    if head == base or vendor_git.tree(repo, head) == vendor_git.tree(repo, base):
        vendor_git.set_branch(repo, PATCHED, base)
        record.new_commit = ""
        record.dropped = True
        record.resolution = "resolved to no change: dropped"
    else:
        record.new_commit = head
        record.resolution = "resolved by hand"
    advance(project)


def skip_current(project: ProjectState) -> None:
    """Drop the stopped patch (``--skip``) and put the repo back where it started."""
    record = project.current
    assert record is not None
    vendor_git.set_branch(project.path, PATCHED, project.base)
    record.new_commit = ""
    record.dropped = True
    record.resolution = "skipped: dropped by the user"
    advance(project)


def _unstaged(repo: Path) -> list[str]:
    out = vendor_git.run(repo, "status", "--porcelain", "--untracked-files=all").stdout.decode()
    return [line[3:] for line in out.splitlines() if len(line) > 3 and line[1] != " "]


# --------------------------------------------------------------------------- unchanged pins


def classify_kept(repo: Path, upstream_commit: str, patches: Iterable[Patch]) -> list[PatchState]:
    """Classes of a series whose pin did not change: applied in memory, as the build does."""
    tree = vendor_git.CommitTree(repo, upstream_commit)
    out = []
    for patch in patches:
        record = PatchState(patch.name, patch.sha256, "")
        offsets = apply_patch(patch, tree).offsets
        record.klass = "offset" if offsets else "clean"
        record.offsets = [_offset_text(o) for o in offsets]
        record.reason = "pin unchanged: kept as it is"
        out.append(record)
    return out
