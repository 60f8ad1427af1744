"""Applying a parsed patch to a tree: strictly, with offsets reported and no fuzz; a failing hunk
names the file, the hunk and the first line that differs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from unidiff.patch import Hunk, PatchedFile

from patchwheel.errors import PatchError
from patchwheel.patching.patches import (
    DEV_NULL,
    ApplyResult,
    Offset,
    Patch,
    Tree,
    strip_prefix,
)

# --------------------------------------------------------------------------- applying


def apply_patch(patch: Patch, tree: Tree, *, only: Iterable[str] | None = None) -> ApplyResult:
    """Apply every file of a patch to ``tree``, strictly; ``only`` limits the paths touched.

    All files are computed before any is written, so a failing hunk leaves the tree untouched.
    """
    wanted = set(only) if only is not None else None
    result = ApplyResult(patch.name)
    writes: list[tuple[str, bytes, bool | None]] = []
    deletes: list[str] = []
    for pf in patch.files:
        source = None if pf.source_file == DEV_NULL else strip_prefix(pf.source_file)
        target = None if pf.target_file == DEV_NULL else strip_prefix(pf.target_file)
        if wanted is not None and not ({source, target} & wanted):
            continue
        for path in (source, target):
            if path is not None and tree.through_symlink(path):
                raise PatchError(
                    f"patch {patch.name}: {path} is, or lies under, a symbolic link in the "
                    "tree; a patch may not write through a symlink"
                )
        new_data = _apply_file(patch, pf, tree, source, target, result)
        if target is None:
            assert source is not None
            deletes.append(source)
        else:
            writes.append((target, new_data, _executable(pf.target_mode)))
            if source is not None and source != target:
                deletes.append(source)
    for path in deletes:
        tree.delete(path)
        result.deleted.append(path)
    for path, data, executable in writes:
        tree.write(path, data, executable=executable)
        result.written.append(path)
    return result


def _executable(mode: str | None) -> bool | None:
    return None if mode is None else mode.endswith("755")


def _apply_file(
    patch: Patch,
    pf: PatchedFile,
    tree: Tree,
    source: str | None,
    target: str | None,
    result: ApplyResult,
) -> bytes:
    if source is None:
        assert target is not None
        if tree.read(target) is not None:
            raise PatchError(f"patch {patch.name}: creates {target}, which already exists")
        old_lines: list[str] = []
    else:
        data = tree.read(source)
        if data is None:
            raise PatchError(f"patch {patch.name}: file {source} does not exist in the tree")
        old_lines = split_lines(data.decode("utf-8", "surrogateescape"))
    if target is not None and source != target and tree.read(target) is not None:
        raise PatchError(f"patch {patch.name}: renames onto {target}, which already exists")
    new_lines = _apply_hunks(patch, source or target or "", old_lines, pf, result)
    if target is None and new_lines:
        raise PatchError(
            f"patch {patch.name}: deletes {source}, but the file has lines the patch does not "
            f"remove (first: {new_lines[0]!r})"
        )
    return "".join(new_lines).encode("utf-8", "surrogateescape")


def split_lines(text: str) -> list[str]:
    """Split on ``\\n`` only (form feeds and ``\\r`` stay inside lines), keeping line ends."""
    lines = [line + "\n" for line in text.split("\n")]
    if lines[-1] == "\n":
        lines.pop()
    else:
        lines[-1] = lines[-1][:-1]
    return lines


def _apply_hunks(
    patch: Patch, path: str, lines: list[str], pf: PatchedFile, result: ApplyResult
) -> list[str]:
    out = list(lines)
    delta = 0  # how far earlier hunks moved the lines (target minus source)
    floor = 0  # a hunk may not apply before the end of the previous one
    for number, hunk in enumerate(pf, start=1):
        old, new = hunk_sides(hunk)
        expected = (
            max(hunk.source_start - 1, 0) + delta
            if hunk.source_length
            else (hunk.source_start + delta)
        )
        position = _find(out, old, expected, floor)
        if position is None:
            if new != old and _find(out, new, expected, floor) is not None:
                raise PatchError(
                    f"patch {patch.name}: {path} hunk #{number} ({_header(hunk)}) is already "
                    "applied: the file already holds the lines it writes. Is the same change "
                    "earlier in the series (or already upstream)? Drop the duplicate"
                )
            raise _mismatch(patch, path, number, hunk, out, old, expected)
        if position != expected:
            result.offsets.append(
                Offset(patch.name, path, number, _header(hunk), position - expected)
            )
        out[position : position + len(old)] = new
        delta += len(new) - len(old) + (position - expected)
        floor = position + len(new)
    return out


def hunk_sides(hunk: Hunk) -> tuple[list[str], list[str]]:
    """The lines a hunk expects (context + removed) and writes (context + added)."""
    old: list[str] = []
    new: list[str] = []
    last_type = ""
    for line in hunk:
        kind = line.line_type
        if kind == "\\":
            if last_type in (" ", "-") and old:
                old[-1] = old[-1].removesuffix("\n")
            if last_type in (" ", "+") and new:
                new[-1] = new[-1].removesuffix("\n")
            continue
        value = line.value if line.value.endswith("\n") else line.value + "\n"
        if kind in (" ", "-"):
            old.append(value)
        if kind in (" ", "+"):
            new.append(value)
        last_type = kind
    return old, new


def _find(lines: Sequence[str], old: list[str], expected: int, floor: int) -> int | None:
    """The line where ``old`` matches exactly, nearest to ``expected`` first (no fuzz)."""
    n = len(old)
    limit = len(lines) - n
    if limit < floor:
        return None
    expected = min(max(expected, floor), limit)
    for distance in range(max(expected - floor, limit - expected) + 1):
        for pos in (expected - distance, expected + distance):
            if floor <= pos <= limit and lines[pos : pos + n] == old:
                return pos
    return None


def _header(hunk: Hunk) -> str:
    header = (
        f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"
    )
    return f"{header} {hunk.section_header}".rstrip()


def _mismatch(
    patch: Patch, path: str, number: int, hunk: Hunk, lines: Sequence[str], old: list[str], at: int
) -> PatchError:
    """An error naming the patch, file, hunk and the first line that differs at its position."""
    at = min(max(at, 0), len(lines))
    for i, want in enumerate(old):
        found = lines[at + i] if at + i < len(lines) else None
        if found != want:
            found_text = "end of file" if found is None else repr(found.rstrip("\n"))
            return PatchError(
                f"patch {patch.name}: {path} hunk #{number} ({_header(hunk)}) does not apply: "
                f"line {at + i + 1} expected {want.rstrip(chr(10))!r}, found {found_text}. "
                + _line_ending_hint(old, lines)
                + "Refresh the patch against the pinned source (or rebase the series)."
            )
    return PatchError(  # pragma: no cover - the context matched at `at`, so _find found it
        f"patch {patch.name}: {path} hunk #{number} ({_header(hunk)}) does not apply"
    )


def _line_ending_hint(expected: Sequence[str], lines: Sequence[str]) -> str:
    """A hint when the patch and the file disagree on line endings (CRLF vs LF)."""
    patch_crlf = any(line.endswith("\r\n") for line in expected)
    file_crlf = any(line.endswith("\r\n") for line in lines)
    if patch_crlf and not file_crlf:
        return (
            "The patch's lines end in CRLF (\\r\\n) but the file's in LF: its line endings "
            "were converted; convert the patch back to LF line endings (e.g. `dos2unix`). "
        )
    if file_crlf and not patch_crlf:
        return (
            "The file's lines end in CRLF (\\r\\n) but the patch's in LF: the patch lost the "
            "\\r (an editor or core.autocrlf); regenerate it with `patchwheel export`. "
        )
    return ""
