"""Series files, patch parsing and validation (unidiff); applying them is patching/apply.py.

A patch is ``git format-patch`` output: mail headers (author, date, subject), a message carrying
a DEP-3-style header, then the diff. Application is strict: every context and removed line must
match exactly; a hunk found at another line than its header says is applied and reported as an
offset, never hidden. Application works on any :class:`Tree` — a directory (vendor trees) or the
members of a wheel (overlay builds) — so both see the same rules and the same errors.
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path, PurePosixPath
from typing import Protocol

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from patchwheel.errors import ConfigError, PatchError
from patchwheel.upstream.cache import sha256_bytes
from patchwheel.upstream.sources import is_git_name

DEV_NULL = "/dev/null"
SERIES_FILE = "series"
DEP3_FIELDS = (
    "Description",
    "Origin",
    "Bug",
    "Forwarded",
    "Applied-Upstream",
    "Vllm-Change",
    "Drop-When",
    "Applies-When",
    "Variants",
    "Last-Update",
    "Reviewed-By",
)
REQUIRED_DEP3 = ("Origin", "Forwarded", "Drop-When")
_SUBJECT_PREFIX = re.compile(r"^\s*(\[[^\]]*\]\s*)+")
_FIELD_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):\s?(.*)$")
SYMLINK_MODE = "120000"
SUBMODULE_MODE = "160000"
_HUNK_RE = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass(frozen=True)
class Patch:
    """One patch of a series: its bytes, its commit metadata and its parsed diff."""

    name: str
    data: bytes
    author: str
    email: str
    date: str
    subject: str
    message: str
    fields: dict[str, str]
    files: PatchSet

    @property
    def sha256(self) -> str:
        """The sha256 of the patch file's bytes (what the local label hashes)."""
        return sha256_bytes(self.data)

    def paths(self) -> set[str]:
        """Every tree path the patch reads or writes."""
        out: set[str] = set()
        for pf in self.files:
            for raw in (pf.source_file, pf.target_file):
                if raw != DEV_NULL:
                    out.add(strip_prefix(raw))
        return out


@dataclass(frozen=True)
class Offset:
    """A hunk that applied at another line than its header says."""

    patch: str
    path: str
    hunk: int
    header: str
    lines: int

    def __str__(self) -> str:
        return f"{self.patch}: {self.path} hunk #{self.hunk} ({self.header}) offset {self.lines:+d}"


@dataclass
class ApplyResult:
    """What applying one patch did."""

    patch: str
    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    offsets: list[Offset] = field(default_factory=list)


class Tree(Protocol):
    """The files a patch applies to (a directory, or a wheel's members)."""

    def read(self, path: str) -> bytes | None:
        """The file's bytes, or None if it does not exist."""

    def write(self, path: str, data: bytes, *, executable: bool | None) -> None:
        """Create or replace a file (``executable`` None keeps the current mode)."""

    def delete(self, path: str) -> None:
        """Delete a file."""

    def through_symlink(self, path: str) -> bool:
        """Whether the path, or a directory above it, is a symbolic link in the tree."""


class DirTree:
    """A :class:`Tree` on a directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self, path: str) -> bytes | None:
        """The file's bytes, or None."""
        target = self.root / path
        return target.read_bytes() if target.is_file() else None

    def write(self, path: str, data: bytes, *, executable: bool | None) -> None:
        """Create or replace a file."""
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if executable is not None:
            mode = target.stat().st_mode
            target.chmod(mode | 0o111 if executable else mode & ~0o111)

    def delete(self, path: str) -> None:
        """Delete a file and the directories it leaves empty."""
        target = self.root / path
        target.unlink()
        parent = target.parent
        while parent != self.root and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent

    def through_symlink(self, path: str) -> bool:
        """Whether any component of the path is a symlink."""
        current = self.root
        for part in PurePosixPath(path).parts:
            current = current / part
            if current.is_symlink():
                return True
        return False


# --------------------------------------------------------------------------- series


def read_series(series_dir: Path) -> list[Patch]:
    """Load and validate every patch a series file names, in order (empty if no series)."""
    series = series_dir / SERIES_FILE
    if not series.is_file():
        return []
    patches = []
    seen: set[str] = set()
    for lineno, raw in enumerate(series.read_text("utf-8").splitlines(), start=1):
        name = raw.split("#", 1)[0].strip()
        if not name:
            continue
        where = f"{series}:{lineno}"
        if "/" in name or name.startswith("."):
            raise ConfigError(f"{where}: {name!r} must be a file name beside the series file")
        if name in seen:
            raise ConfigError(f"{where}: {name} is listed twice")
        seen.add(name)
        path = series_dir / name
        if not path.is_file():
            raise ConfigError(f"{where}: patch {name} does not exist in {series_dir}")
        patches.append(parse_patch(name, path.read_bytes()))
    return patches


def series_names(series_dir: Path) -> list[str]:
    """The patch names of a series file, without loading them."""
    series = series_dir / SERIES_FILE
    if not series.is_file():
        return []
    names = (line.split("#", 1)[0].strip() for line in series.read_text("utf-8").splitlines())
    return [name for name in names if name]


# --------------------------------------------------------------------------- parsing


def parse_patch(name: str, data: bytes) -> Patch:
    """Parse a format-patch file and validate its diff (parses, not empty, safe paths)."""
    text = data.decode("utf-8", "surrogateescape")
    author, mail, date, subject, message = _commit_metadata(name, data)
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    _refuse_crlf(name, lines)
    try:
        files = PatchSet(lines)
    except UnidiffParseError as exc:
        where = _diff_error(lines) or str(exc)
        raise PatchError(
            f"patch {name}: not a valid unified diff: {where}. Was it truncated or edited by "
            "hand? Regenerate it from the vendor tree (`patchwheel export`)"
        ) from exc
    patch = Patch(
        name=name,
        data=data,
        author=author,
        email=mail,
        date=date,
        subject=subject,
        message=message,
        fields=parse_fields(message),
        files=files,
    )
    validate(patch)
    return patch


def _refuse_crlf(name: str, lines: list[str]) -> None:
    """Refuse a patch whose own structure (diff/hunk headers) has CRLF line endings."""
    for number, line in enumerate(lines, 1):
        if line.startswith(("diff --git ", "@@ ", "--- ", "+++ ")) and line.endswith("\r\n"):
            raise PatchError(
                f"patch {name}: line {number} ends in CRLF (\\r\\n): the patch file's line "
                "endings were converted (an editor, or a checkout with core.autocrlf); "
                "convert it back to LF line endings (e.g. `dos2unix`) and build again"
            )


def _diff_error(lines: list[str]) -> str | None:
    """Where a diff stops being well formed: the line, and the hunk it breaks (1-based lines)."""
    old = new = 0
    start, header = 0, ""
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\n")
        if old > 0 or new > 0:
            if number == len(lines) and not line:
                break  # the end of the file
            kind = line[:1]
            if kind in (" ", ""):
                old, new = old - 1, new - 1
            elif kind == "-":
                old -= 1
            elif kind == "+":
                new -= 1
            elif kind != "\\":
                return (
                    f"line {number}: the hunk at line {start} ({header}) still needs {max(old, 0)} "
                    f"old and {max(new, 0)} new line(s), but line {number} is {line[:60]!r}"
                )
            continue
        match = _HUNK_RE.match(line)
        if match:
            start, header = number, match.group(0)
            old = int(match.group(1) if match.group(1) is not None else 1)
            new = int(match.group(2) if match.group(2) is not None else 1)
    if old > 0 or new > 0:
        return (
            f"line {len(lines)}: the file ends inside the hunk at line {start} ({header}), "
            f"{max(old, 0)} old and {max(new, 0)} new line(s) short"
        )
    return None


def _commit_metadata(name: str, data: bytes) -> tuple[str, str, str, str, str]:
    """Author, email, date, subject and full message of a format-patch file."""
    head = data
    if head.startswith(b"From "):
        head = head.split(b"\n", 1)[1] if b"\n" in head else b""
    msg = email.message_from_bytes(head, policy=email.policy.default)
    from_header = msg.get("From")
    subject_header = msg.get("Subject")
    if from_header is None or subject_header is None:
        raise PatchError(
            f"patch {name}: no From:/Subject: header; write patches with `git format-patch`"
        )
    address = from_header.addresses[0] if from_header.addresses else None
    author = address.display_name if address else str(from_header)
    mail = address.addr_spec if address else ""
    subject = _SUBJECT_PREFIX.sub("", " ".join(str(subject_header).split()))
    payload = msg.get_payload(decode=True)
    body = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    description = body.split("\n---\n", 1)[0].split("\ndiff --git ", 1)[0].strip("\n")
    message = subject + ("\n\n" + description if description else "") + "\n"
    date = str(msg.get("Date", "") or "").strip()
    if date and _parse_date(date) is None:
        raise PatchError(
            f"patch {name}: its Date: header {date!r} is not an RFC 2822 date; fix it, or "
            "remove it (the commit then takes the pin's date)"
        )
    return author or mail, mail, date, subject, message


def _parse_date(date: str) -> datetime | None:
    try:
        return parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError):
        return None


def commit_date(patch: Patch, default_epoch: int) -> str:
    """The patch's date as git wants it (``<epoch> <+hhmm>``); its pin's when it has none.

    A patch without ``Date:`` must not take the clock's date: the vendor commit (and through
    its export, the series) would differ between two builds.
    """
    parsed = _parse_date(patch.date) if patch.date else None
    if parsed is None:
        return f"{default_epoch} +0000"
    offset = parsed.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset else 0
    sign = "+" if minutes >= 0 else "-"
    return f"{int(parsed.timestamp())} {sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"


def parse_fields(message: str) -> dict[str, str]:
    """The DEP-3-style fields (``Origin: …``) of a patch message; continuation lines joined."""
    fields: dict[str, str] = {}
    current: str | None = None
    known = {f.lower(): f for f in DEP3_FIELDS}
    for line in message.splitlines():
        match = _FIELD_LINE.match(line)
        if match and (match.group(1).lower() in known or match.group(1).startswith("Bug-")):
            current = known.get(match.group(1).lower(), match.group(1))
            fields[current] = match.group(2).strip()
        elif current and line.startswith((" ", "\t")) and line.strip():
            fields[current] += " " + line.strip()
        else:
            current = None
    return fields


def missing_fields(patch: Patch) -> list[str]:
    """The required DEP-3 fields a patch lacks."""
    return [f for f in REQUIRED_DEP3 if not patch.fields.get(f)]


def strip_prefix(raw: str) -> str:
    """A diff path without git's ``a/`` / ``b/`` prefix."""
    path = raw.strip().strip('"')
    if path.startswith(("a/", "b/")):
        path = path[2:]
    return path


def validate(patch: Patch) -> None:
    """Refuse empty patches, binary diffs, symlinks, submodules and paths leaving the tree."""
    if not patch.files:
        raise PatchError(f"patch {patch.name}: it contains no diff (empty patch)")
    for pf in patch.files:
        for raw in (pf.source_file, pf.target_file):
            if raw is None or raw == DEV_NULL:
                continue
            check_path(patch.name, raw)
        path = strip_prefix(pf.target_file if pf.target_file != DEV_NULL else pf.source_file)
        if pf.is_binary_file:
            raise PatchError(f"patch {patch.name}: {path} is a binary diff; not supported")
        if SYMLINK_MODE in (pf.source_mode, pf.target_mode):
            raise PatchError(f"patch {patch.name}: {path} is a symbolic link; refused")
        if SUBMODULE_MODE in (pf.source_mode, pf.target_mode):
            raise PatchError(f"patch {patch.name}: {path} is a submodule; refused")
        if not len(pf) and not pf.is_rename and pf.source_mode == pf.target_mode:
            raise PatchError(f"patch {patch.name}: {path} has no hunks (empty change)")


def check_path(patch_name: str, raw: str) -> str:
    """A diff path made safe: relative, inside the tree, never through ``..`` or ``.git``."""
    path = strip_prefix(raw)
    posix = PurePosixPath(path)
    if not path or path.startswith("/") or posix.is_absolute() or "\\" in path:
        raise PatchError(f"patch {patch_name}: path {raw!r} is absolute; refused")
    if any(part in ("..", ".") for part in posix.parts) or "//" in path:
        raise PatchError(f"patch {patch_name}: path {raw!r} leaves the tree ('..'); refused")
    for part in posix.parts:
        if is_git_name(part):
            raise PatchError(
                f"patch {patch_name}: path {path} writes into .git (its component {part!r}): "
                "a patch may not write a git repository, a `gitdir:` file or anything under "
                "one, in any case; refused"
            )
    return path
