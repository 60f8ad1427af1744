"""Turn vendor-tree commits into patch files: ``patchwheel export --target T --project P``.

The commits ``upstream..HEAD`` of ``vendor/<T>/<P>`` become the series. Commits the vendor state
already records keep their patch file byte for byte; a new or edited commit is written with
``git format-patch --zero-commit --no-signature`` (an edited commit keeps the name of the patch
whose subject it carries, a new one gets the next number); a patch whose commit is gone leaves
the series. Before any file is written, the new series is replayed strictly onto the upstream
commit in memory, exactly as a build would apply it, and must reproduce the commit it came
from; the vendor tree then records the new series, so the next build reuses it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import git

from patchwheel import atomic, console
from patchwheel.config.targets import load_target
from patchwheel.errors import ConfigError, PatchError, VendorError
from patchwheel.patching import vendor, vendor_git
from patchwheel.patching.apply import apply_patch
from patchwheel.patching.patches import SERIES_FILE, Patch, missing_fields, parse_patch, read_series
from patchwheel.workspace import Workspace

NAME_MAX = 64  # git format-patch's default file-name limit, suffix included
SUFFIX = ".patch"
_NUMBER = re.compile(r"^(\d+)-")


@dataclass
class ExportResult:
    """What an export wrote."""

    target: str
    project: str
    series_dir: Path
    names: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether any file was written or removed."""
        return bool(self.written or self.removed)


def export_project(workspace: Workspace, target_name: str, project_name: str) -> ExportResult:
    """Write the vendor tree's commits of one project as its series (see the module doc)."""
    target = load_target(workspace.patches, target_name)
    project = target.project(project_name)
    if project.pool:
        raise ConfigError(
            f"{target.name}/{project.name}: its series is the pool {project.pool}, shared by "
            "other targets, and its vendor tree holds only the patches this target's gates "
            f"pick; export would rewrite the pool from that subset. Write the change as a new "
            f"patch instead: `git format-patch -1` in vendor/{target.name}/{project.name}, put "
            f"it in patches/pools/{project.pool}/ with its gates, list it in the pool's series "
            '(patches/README.md, "Pools")'
        )
    vendor_dir = workspace.vendor_dir(target.name, project.name)
    with workspace.locked(target.name):
        vendor.recover(vendor_dir)  # a killed build's half-applied series is not a commit
        return _export(target.name, project.name, project.series_dir, vendor_dir)


def _export(target: str, project: str, series_dir: Path, vendor_dir: Path) -> ExportResult:
    repo = open_committed(vendor_dir, target)
    state = vendor.read_state(repo)
    applied = applied_entries(state)
    series = read_series(series_dir)
    _check_state_matches(applied, series, series_dir, vendor_dir)
    upstream_commit = str(state["upstream_commit"])
    head = vendor_git.rev(vendor_dir, "HEAD") or ""
    if not vendor_git.is_ancestor(vendor_dir, upstream_commit, head):
        raise VendorError(
            f"{vendor_dir}: HEAD {head[:12]} does not descend from the upstream commit "
            f"{upstream_commit[:12]}; commit your change on top of branch `patched`"
        )
    commits = vendor_git.commits_between(vendor_dir, upstream_commit, head)
    keep = 0
    while keep < min(len(applied), len(commits)) and applied[keep][2] == commits[keep]:
        keep += 1
    result = ExportResult(target, project, series_dir, names=[e[0] for e in applied[:keep]])
    if keep == len(applied) == len(commits):
        console.status(f"{target}/{project}: nothing to export (the series matches {head[:12]})")
        return result
    by_name = {p.name: p for p in series}
    old_rest = [by_name[e[0]] for e in applied[keep:]]
    files = name_commits(vendor_dir, commits[keep:], old_rest, taken=result.names)
    new_patches = [parse_patch(name, data) for name, data in files]
    for patch in new_patches:
        missing = missing_fields(patch)
        if missing:
            result.warnings.append(
                f"{patch.name} lacks DEP-3 field(s) {', '.join(missing)}: add them to the "
                "commit message (`git commit --amend`) and export again; the build refuses "
                "it until then"
            )
    check_and_record(
        vendor_dir,
        identity=str(state["upstream"]),
        upstream_commit=upstream_commit,
        prefix=applied[:keep],
        series=new_patches,
        commits=commits[keep:],
    )
    result.names += [name for name, _ in files]
    result.written = [name for name, data in files if _differs(series_dir / name, data)]
    result.removed = [p.name for p in old_rest if p.name not in result.names]
    write_series_dir(series_dir, dict(files), result.names, result.removed)
    return result


def open_committed(vendor_dir: Path, target: str) -> git.Repo:
    """A vendor repo of ours with no uncommitted change and no rebase in progress."""
    if not (vendor_dir / ".git").is_dir():
        raise VendorError(
            f"no vendor tree at {vendor_dir}: build the target first "
            f"(`patchwheel build --target {target}`), then commit your change there"
        )
    marker = vendor_git.git_dir(vendor_dir) / vendor.REBASE_MARKER
    if marker.is_file():
        raise VendorError(
            f"{vendor_dir} is in the middle of a rebase: {marker.read_text().strip()}"
        )
    if not (vendor_git.git_dir(vendor_dir) / vendor.STATE_FILE).is_file():
        raise VendorError(f"{vendor_dir} is a git repo patchwheel did not create")
    dirty = vendor_git.status(vendor_dir)
    if dirty:
        more = f" and {len(dirty) - 1} more" if len(dirty) > 1 else ""
        raise VendorError(
            f"{vendor_dir} has uncommitted changes ({dirty[0].strip()}{more}): "
            "commit them on branch `patched` first (`git commit -a`)"
        )
    return git.Repo(vendor_dir)


def applied_entries(state: Mapping[str, object]) -> list[list[str]]:
    """The ``applied`` entries of a vendor state: ``[name, sha256, commit]``."""
    raw = state.get("applied") or []
    assert isinstance(raw, list)
    return [[str(x) for x in entry] for entry in raw]


def _check_state_matches(
    applied: list[list[str]], series: Sequence[Patch], series_dir: Path, vendor_dir: Path
) -> None:
    """Refuse a vendor tree prepared from other patch files than the series holds now."""
    recorded = [(e[0], e[1]) for e in applied]
    current = [(p.name, p.sha256) for p in series]
    if recorded == current:
        return
    first = next(
        i
        for i in range(max(len(recorded), len(current)))
        if recorded[i : i + 1] != current[i : i + 1]
    )
    was = recorded[first][0] if first < len(recorded) else "nothing"
    now = current[first][0] if first < len(current) else "nothing"
    raise VendorError(
        f"{vendor_dir} was prepared from other patch files than {series_dir} holds now (patch "
        f"#{first + 1}: {was} in the vendor tree, {now} in the series). Export from a vendor "
        "tree built from the current series: undo the edits to the series, or build first "
        "and redo the commits"
    )


# --------------------------------------------------------------------------- naming and writing


def name_commits(
    repo: Path, commits: Sequence[str], old: Sequence[Patch], *, taken: Sequence[str]
) -> list[tuple[str, bytes]]:
    """Format each commit; reuse the name of the old patch with the same subject, else number it.

    The index-line style (blob-id length, renames) follows the old patch when there is one.
    """
    by_subject: dict[str, Patch] = {}
    for patch in old:
        by_subject.setdefault(patch.subject, patch)
    used = set(taken)
    number = max([_number(n) for n in [*taken, *(p.name for p in old)]] + [0])
    out: list[tuple[str, bytes]] = []
    for commit in commits:
        subject = vendor_git.commit_subject(repo, commit)
        previous = by_subject.pop(subject, None)
        if previous is not None and previous.name not in used:
            name = previous.name
            data = vendor_git.format_patch(
                repo,
                commit,
                abbrev=vendor_git.abbrev_of(previous.data),
                renames=vendor_git.has_renames(previous),
                prefix=vendor_git.subject_prefix(previous.data),
            )
        else:
            number += 1
            name = patch_file_name(number, subject)
            data = vendor_git.format_patch(repo, commit, renames=False)
        used.add(name)
        out.append((name, data))
    return out


def _number(name: str) -> int:
    match = _NUMBER.match(name)
    return int(match.group(1)) if match else 0


def patch_file_name(number: int, subject: str) -> str:
    """The file name ``git format-patch`` gives commit ``number`` with this subject."""
    prefix = f"{number:04d}-"
    chars: list[str] = []
    space = 2
    i = 0
    while i < len(subject):
        ch = subject[i]
        if ch.isascii() and (ch.isalnum() or ch in "._"):
            if space == 1:
                chars.append("-")
            space = 0
            chars.append(ch)
            if ch == ".":
                while i + 1 < len(subject) and subject[i + 1] == ".":
                    i += 1
        else:
            space |= 1
        i += 1
    sanitized = "".join(chars).rstrip(".-")
    limit = NAME_MAX - len(SUFFIX) - 1 - len(prefix)
    return prefix + sanitized[:limit] + SUFFIX


def write_series_dir(
    series_dir: Path, files: Mapping[str, bytes], names: Sequence[str], removed: Sequence[str]
) -> None:
    """Write changed patch files and the series (comments kept), then delete removed patches."""
    if not names and not series_dir.is_dir():
        return  # an empty series that never had a directory stays without one
    series_dir.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if _differs(series_dir / name, data):
            atomic.write_bytes(series_dir / name, data)
    series = series_dir / SERIES_FILE
    old_text = series.read_text("utf-8") if series.is_file() else ""
    new_text = series_text(old_text, names)
    if new_text != old_text:
        atomic.write_text(series, new_text)
    for name in removed:
        if name not in names:
            (series_dir / name).unlink(missing_ok=True)


def series_text(old_text: str, names: Sequence[str]) -> str:
    """A series file listing ``names``, keeping the old file's comments.

    Lines before the first patch name stay at the top; comment lines between names travel with
    the name after them (and leave with it); a name's inline comment stays on its line.
    """
    header: list[str] = []
    blocks: dict[str, list[str]] = {}
    pending: list[str] = []
    seen_name = False
    for line in old_text.splitlines():
        name = line.split("#", 1)[0].strip()
        if not name:
            (pending if seen_name else header).append(line)
            continue
        seen_name = True
        blocks[name] = [*pending, line]
        pending = []
    lines = list(header)
    for name in names:
        lines += blocks.get(name, [name])
    lines += pending
    return "\n".join(lines) + "\n" if lines else ""


def _differs(path: Path, data: bytes) -> bool:
    return not path.is_file() or path.read_bytes() != data


# --------------------------------------------------------------------------- verification


def check_and_record(
    vendor_dir: Path,
    *,
    identity: str,
    upstream_commit: str,
    prefix: Sequence[Sequence[str]],
    series: Sequence[Patch],
    commits: Sequence[str],
) -> None:
    """Prove each patch file reproduces its commit, then record the series in the vendor state.

    The patches are applied in memory with the strict applier (what a build does) from the
    tree of the last ``prefix`` commit (or the upstream commit); each must change exactly the
    paths its commit changes, to exactly the commit's bytes. Then the vendor state lists
    ``prefix`` + the patches with their commits and branch ``patched`` points at the last one,
    so the next build reuses the tree. PatchError names the first patch that does not match.
    """
    base = prefix[-1][2] if prefix else upstream_commit
    tree = vendor_git.CommitTree(vendor_dir, base)
    parent = base
    for patch, commit in zip(series, commits, strict=True):
        result = apply_patch(patch, tree)
        touched = set(result.written) | set(result.deleted)
        changed = set(vendor_git.changed_paths(vendor_dir, parent, commit))
        differ = sorted(touched ^ changed) or [
            path
            for path in sorted(touched)
            if tree.read(path) != vendor_git.blob(vendor_dir, commit, path)
        ]
        if differ:
            raise PatchError(
                f"patch {patch.name}, written from commit {commit[:12]}, does not reproduce it "
                f"when applied strictly ({differ[0]} differs); the commit holds something a "
                "patch file cannot carry (a binary file, a symlink?)"
            )
        parent = commit
    repo = git.Repo(vendor_dir)
    applied = [list(e) for e in prefix]
    applied += [[p.name, p.sha256, c] for p, c in zip(series, commits, strict=True)]
    head = applied[-1][2] if applied else upstream_commit
    if vendor_git.rev(vendor_dir, "HEAD") != head or vendor_git.status(vendor_dir):
        vendor_git.set_branch(vendor_dir, vendor.PATCHED, head)
    vendor.write_state(
        repo, {"upstream": identity, "upstream_commit": upstream_commit, "applied": applied}
    )


def line_origin(repo: Path, path: str, line: int) -> str | None:
    """The patch whose commit wrote ``path:line`` of a vendor tree (None: upstream code)."""
    proc = vendor_git.run(
        repo, "blame", "--porcelain", "-L", f"{line},{line}", "HEAD", "--", path, check=False
    )
    if proc.returncode != 0 or not proc.stdout:
        return None
    commit = proc.stdout.split(maxsplit=1)[0].decode()
    state = vendor.read_state(git.Repo(repo))
    for name, _sha, patch_commit in applied_entries(state):
        if patch_commit == commit:
            return name
    return None
