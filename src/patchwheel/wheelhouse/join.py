"""Files split into size-limited parts and joined again, every byte checked by sha256.

For transfers that accept only files up to some size (64 MiB on some GPU machines). A split
folder holds ``NAME.001``, ``NAME.002`` … for each large file and ``parts.json``, which records
the sha256 and size of each part and of the whole file.

This module uses the standard library only: patchwheel copies it into every wheelhouse as
``join.py``, so the destination needs nothing but Python to reassemble and check the files::

    python3 join.py            # join the parts beside it, check every sha256, drop the parts
    python3 join.py --check    # only check the files listed in SHA256SUMS

Where Python is missing, ``cat NAME.[0-9][0-9][0-9] > NAME`` joins a file and
``sha256sum -c SHA256SUMS`` checks it (so a file is split into at most 999 parts).

A transfer is hostile until checked: names from parts.json or SHA256SUMS follow
:data:`PATH_RULE` before use; no link is followed and temporary files are new (``O_EXCL``); a
joined file replaces only nothing; parts go only once everything is joined and matches; what
cannot be verified (no folder, no SHA256SUMS, a bad manifest) is an error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, BinaryIO

MANIFEST = "parts.json"
SUMS = "SHA256SUMS"
SCHEMA = 1
CHUNK = 1 << 20
MAX_PARTS = 999  # NAME.001 … NAME.999: what ``cat NAME.[0-9][0-9][0-9]`` joins in order
MAX_TEXT = 64 << 20  # parts.json and SHA256SUMS are small; a larger one is not ours
PATH_RULE = (
    "a file name in a transfer is a relative path of plain components (none empty, '.' or "
    "'..', no backslash or control character, at most 255 bytes each) that stays in its folder"
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_HEX64 = re.compile(r"[0-9a-f]{64}")
_ignore: Callable[[str], object] = lambda message: None  # noqa: E731
_UNITS = dict(
    zip(
        ("", "b", "k", "kb", "kib", "m", "mb", "mib", "g", "gb", "gib"),
        (1, 1, 10**3, 10**3, 2**10, 10**6, 10**6, 2**20, 10**9, 10**9, 2**30),
        strict=True,
    )
)


class PartsError(Exception):
    """A part or a joined file is missing or does not match its recorded sha256, or the
    transfer cannot be verified."""


class UnsafeNameError(PartsError):
    """A name read from the transfer breaks :data:`PATH_RULE` (refused before any use)."""


def check_path(value: object, what: str) -> str:
    """``value`` if it follows :data:`PATH_RULE`, else UnsafeNameError naming ``what`` (a copy
    of ``patchwheel.workspace.check_relative_path``, tested to agree: join.py is stdlib only)."""
    ok = isinstance(value, str) and 0 < len(value) <= 4096 and not value.startswith("/")
    if ok:
        assert isinstance(value, str)
        ok = "\\" not in value and not any(ord(c) < 32 or ord(c) == 127 for c in value)
        ok = ok and all(
            p not in ("", ".", "..") and len(p.encode("utf-8", "surrogatepass")) <= 255
            for p in value.split("/")
        )
    if not ok:
        raise UnsafeNameError(f"{what} {_shown(value)} is refused: {PATH_RULE}")
    return str(value)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "…"


def parse_size(text: str) -> int:
    """``60MiB`` → 62914560; ``64MB``, ``500k``, ``1GiB`` and plain byte counts work too."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (examples: 60MiB, 64MB, 1GiB, 1048576)")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size < 1:
        raise ValueError(f"size {text!r} must be at least one byte")
    return size


def part_name(name: str, index: int) -> str:
    """The name of part ``index`` (1-based) of ``name``: ``NAME.001``."""
    return f"{name}.{index:03d}"


class Folder:
    """A folder opened once; every file in it reached relative to it, no symbolic link
    followed (``O_NOFOLLOW`` on each component), new files created exclusively."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise PartsError(f"{path}: not a folder that can be read ({exc.strerror})") from exc

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)

    @contextmanager
    def _at(self, rel: str) -> Iterator[tuple[int, str]]:
        """The fd of ``rel``'s folder (each component opened without following a link), and
        ``rel``'s last component."""
        *dirs, leaf = check_path(rel, "file name").split("/")
        fds: list[int] = []
        try:
            for name in dirs:
                flags = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW
                fds.append(os.open(name, flags, dir_fd=fds[-1] if fds else self.fd))
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            raise PartsError(f"{self.path / rel}: its folder is not a plain folder") from exc
        try:
            yield (fds[-1] if fds else self.fd), leaf
        finally:
            for fd in fds:
                os.close(fd)

    def kind(self, rel: str) -> str | None:
        """``file``, ``link``, ``other`` for what ``rel`` is (not followed), None if absent."""
        with self._at(rel) as (fd, leaf):
            try:
                mode = os.stat(leaf, dir_fd=fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                return None
        if stat.S_ISREG(mode):
            return "file"
        return "link" if stat.S_ISLNK(mode) else "other"

    def open_read(self, rel: str) -> BinaryIO:
        """``rel`` for reading: a regular file, not reached through a link."""
        with self._at(rel) as (fd, leaf):
            try:
                handle = os.open(leaf, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
            except OSError as exc:
                raise PartsError(f"{self.path / rel}: cannot be read ({exc.strerror})") from exc
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            os.close(handle)
            raise PartsError(f"{self.path / rel}: not a regular file")
        return os.fdopen(handle, "rb")

    def read_text(self, rel: str) -> str:
        """A small text file (parts.json, SHA256SUMS), refused above :data:`MAX_TEXT`."""
        with self.open_read(rel) as fh:
            data = fh.read(MAX_TEXT + 1)
        try:
            if len(data) > MAX_TEXT:
                raise ValueError(f"larger than {MAX_TEXT} bytes")
            return data.decode("utf-8")
        except ValueError as exc:
            raise PartsError(f"{self.path / rel}: not ours ({str(exc)[:100]})") from exc

    def create_temp(self, rel: str) -> tuple[str, BinaryIO]:
        """A new file beside ``rel`` with a fresh name (``O_EXCL``: nothing followed or reused)."""
        folder, _, leaf = rel.rpartition("/")
        tmp = (folder + "/" if folder else "") + f".{leaf[:200]}.tmp-{secrets.token_hex(6)}"
        with self._at(tmp) as (fd, name):
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
                handle = os.open(name, flags, 0o644, dir_fd=fd)
            except OSError as exc:
                raise PartsError(f"{self.path / tmp}: cannot be created ({exc.strerror})") from exc
        return tmp, os.fdopen(handle, "wb")

    def replace(self, tmp: str, rel: str) -> None:
        """Rename ``tmp`` onto ``rel`` (a link at ``rel`` is replaced, never followed)."""
        with self._at(tmp) as (src_fd, src), self._at(rel) as (dst_fd, dst):
            os.replace(src, dst, src_dir_fd=src_fd, dst_dir_fd=dst_fd)

    def unlink(self, rel: str) -> None:
        """Remove the entry ``rel`` (a link itself, never what it points to); absent is fine."""
        with self._at(rel) as (fd, leaf), suppress(FileNotFoundError):
            os.unlink(leaf, dir_fd=fd)

    def write_text(self, rel: str, text: str, mode: int = 0o644) -> None:
        """``rel`` written whole through a fresh temporary file and a rename."""
        tmp, out = self.create_temp(rel)
        try:
            with out:
                out.write(text.encode("utf-8"))
                os.fchmod(out.fileno(), mode)
            self.replace(tmp, rel)
        finally:
            self.unlink(tmp)

    def sha256(self, rel: str) -> str:
        """The hex sha256 of ``rel`` (a regular file, not reached through a link)."""
        digest = hashlib.sha256()
        with self.open_read(rel) as fh:
            while chunk := fh.read(CHUNK):
                digest.update(chunk)
        return digest.hexdigest()


def split_file(path: Path, out_dir: Path, part_size: int) -> dict[str, Any]:
    """Write ``path``'s parts into ``out_dir`` (an existing part name, or more than
    :data:`MAX_PARTS` parts, refused first); return its ``parts.json`` entry."""
    size = path.stat().st_size
    count = max(1, -(-size // part_size))
    if count > MAX_PARTS:
        raise PartsError(
            f"{path.name}: {size} bytes in parts of {part_size} would make {count} parts; at "
            f"most {MAX_PARTS} (NAME.001 … NAME.{MAX_PARTS}, what `cat NAME.[0-9][0-9][0-9]` "
            f"joins): use a part size of at least {-(-size // MAX_PARTS)} bytes"
        )
    whole = hashlib.sha256()
    parts: list[dict[str, Any]] = []
    with Folder(out_dir) as folder:
        taken = [part_name(path.name, i) for i in range(1, count + 1)]
        taken = [n for n in taken if folder.kind(n) is not None]
        if taken:
            raise PartsError(
                f"{out_dir}: {', '.join(taken[:3])} already exist(s); splitting {path.name} "
                "would overwrite them: move them away or split into an empty folder"
            )
        with path.open("rb") as src:
            for index in range(1, count + 1):
                name = part_name(path.name, index)
                written, digest = _copy_part(src, folder, name, part_size, whole)
                if written == 0:
                    break
                parts.append({"name": name, "size": written, "sha256": digest})
    return {"name": path.name, "size": size, "sha256": whole.hexdigest(), "parts": parts}


def _copy_part(
    src: BinaryIO, folder: Folder, name: str, limit: int, whole: hashlib._Hash
) -> tuple[int, str]:
    digest = hashlib.sha256()
    tmp, out = folder.create_temp(name)
    written = 0
    try:
        with out:
            while written < limit:
                chunk = src.read(min(CHUNK, limit - written))
                if not chunk:
                    break
                digest.update(chunk)
                whole.update(chunk)
                out.write(chunk)
                written += len(chunk)
        if written:
            folder.replace(tmp, name)
    finally:
        folder.unlink(tmp)
    return written, digest.hexdigest()


def split_dir(directory: Path, part_size: int, *, names: list[str] | None = None) -> list[str]:
    """Split every file in ``directory`` larger than ``part_size`` (or only ``names``) into
    parts, remove it; write parts.json, join.py, and SHA256SUMS lines. Returns the names."""
    for name in names or []:
        check_path(name, "file name")
    entries: list[dict[str, Any]] = _read_manifest(directory)["files"]
    done = {str(e["name"]) for e in entries}
    candidates = sorted(p for p in directory.iterdir() if p.is_file() and not p.is_symlink())
    split: list[str] = []
    for path in candidates:
        wanted = path.name in names if names is not None else True
        if not wanted or path.name in done or path.stat().st_size <= part_size:
            continue
        if path.name in (MANIFEST, SUMS, "join.py"):
            continue
        entries.append(split_file(path, directory, part_size))
        path.unlink()
        split.append(path.name)
    if split or names is not None:
        write_manifest(directory, entries, part_size)
        listed = {n: d for d, n in read_sums(directory)} if (directory / SUMS).exists() else {}
        write_sums(directory, [*{**{e["name"]: e["sha256"] for e in entries}, **listed}.items()])
        install_join_script(directory)
    return split


def write_manifest(directory: Path, entries: list[dict[str, Any]], part_size: int) -> None:
    """Write ``parts.json`` atomically."""
    data = {"schema": SCHEMA, "part-size": part_size, "files": entries}
    with Folder(directory) as folder:
        folder.write_text(MANIFEST, json.dumps(data, indent=2) + "\n")


def install_join_script(directory: Path) -> Path:
    """Copy this module into ``directory`` as ``join.py`` (stdlib only, runs anywhere)."""
    with Folder(directory) as folder:
        folder.write_text("join.py", Path(__file__).read_text("utf-8"), 0o755)
    return directory / "join.py"


def _read_manifest(directory: Path) -> dict[str, Any]:
    """parts.json, checked: its schema, each entry's types, every name by :data:`PATH_RULE`."""
    with Folder(directory) as folder:
        text = folder.read_text(MANIFEST) if folder.kind(MANIFEST) else '{"schema":1,"files":[]}'
    path = directory / MANIFEST
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise PartsError(f"{path}: not JSON ({str(exc)[:200]}); copy it again") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        schema = data.get("schema") if isinstance(data, dict) else None
        raise PartsError(f"{path}: unknown schema {_shown(schema)} (expected {SCHEMA})")
    files = data.get("files")
    if not isinstance(files, list):
        raise PartsError(f"{path}: 'files' is not a list")
    for entry in files:
        _check_entry(entry, path)
    return data


def _check_entry(entry: object, path: Path) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("parts"), list):
        raise PartsError(f"{path}: an entry of 'files' is not {{name, sha256, size, parts}}")
    name = check_path(entry.get("name"), f"{path}: file name")
    _check_sha(entry.get("sha256"), f"{path}: {name}")
    if not entry["parts"] or len(entry["parts"]) > MAX_PARTS:
        raise PartsError(f"{path}: {name} lists {len(entry['parts'])} parts (1 to {MAX_PARTS})")
    for index, part in enumerate(entry["parts"], 1):
        given = part.get("name") if isinstance(part, dict) else part
        if given != part_name(name, index):  # NAME.001, NAME.002 …: nothing else is a part
            raise PartsError(f"{path}: part {index} of {name} is {_shown(given)}, not its name")
        _check_sha(part.get("sha256") if isinstance(part, dict) else None, f"{path}: part {given}")


def _check_sha(value: object, what: str) -> None:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise PartsError(f"{what}: sha256 {_shown(value)} is not 64 lowercase hex digits")


def join_dir(
    directory: Path, *, keep_parts: bool = False, log: Callable[[str], object] | None = None
) -> list[str]:
    """Reassemble every split file in ``directory`` (an intact one is left, anything else in
    its place refused); remove the parts only once all are joined and every sha256 matches."""
    say = log or _ignore
    joined: list[str] = []
    entries = _read_manifest(directory)["files"]
    with Folder(directory) as folder:
        for entry in entries:
            name, sha, parts = entry["name"], entry["sha256"], entry["parts"]
            kind = folder.kind(name)
            if kind == "file" and folder.sha256(name) == sha:
                say(f"ok      {name} (already joined)")
                continue
            if kind is not None:
                raise PartsError(
                    f"{directory / name} exists and is not the file parts.json records "
                    f"({'a regular file with another sha256' if kind == 'file' else 'a ' + kind}"
                    "): move it away, then join again"
                )
            _join_one(folder, name, sha, parts)
            joined.append(name)
            say(f"joined  {name} from {len(parts)} parts")
        problems = check_sums(directory, log=say)
        if problems:
            raise PartsError("; ".join(problems))
        if not keep_parts:
            for entry in entries:
                for part in entry["parts"]:
                    folder.unlink(part["name"])
    return joined


def _join_one(folder: Folder, name: str, sha: str, parts: list[dict[str, Any]]) -> None:
    tmp, out = folder.create_temp(name)
    whole = hashlib.sha256()
    try:
        with out:
            for part in parts:
                _append_part(folder, name, part, out, whole)
        if whole.hexdigest() != sha:
            raise PartsError(
                f"{name}: the joined parts have sha256 {whole.hexdigest()}, "
                f"parts.json records {sha}; copy the parts again"
            )
        folder.replace(tmp, name)
    finally:
        folder.unlink(tmp)


def _append_part(
    folder: Folder, name: str, part: dict[str, Any], out: IO[bytes], whole: hashlib._Hash
) -> None:
    path = folder.path / str(part["name"])
    if folder.kind(part["name"]) is None:
        raise PartsError(f"{path}: part {part['name']} of {name} is missing; copy it")
    digest = hashlib.sha256()
    with folder.open_read(part["name"]) as src:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            whole.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != part["sha256"]:
        raise PartsError(
            f"{path}: sha256 {digest.hexdigest()} but parts.json records "
            f"{part['sha256']}; the part was damaged in transfer: copy it again"
        )


def read_sums(directory: Path) -> list[tuple[str, str]]:
    """``SHA256SUMS`` as ``(sha256, name)`` pairs, every line checked; missing or empty: an
    error (nothing verified)."""
    path = directory / SUMS
    with Folder(directory) as folder:
        if folder.kind(SUMS) is None:
            raise PartsError(
                f"{path} is missing: nothing to verify the files against; copy it with them"
            )
        text = folder.read_text(SUMS)
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, name = line.partition("  ")
        if not sep or not _HEX64.fullmatch(digest):
            raise PartsError(f"{path}: line {number} is not `SHA256  NAME` (sha256sum format)")
        pairs.append((digest, check_path(name.removeprefix("*"), f"{path}: line {number}:")))
    if not pairs:
        raise PartsError(f"{path} lists no file: nothing is verified; copy it again")
    return pairs


def check_sums(directory: Path, *, log: Callable[[str], object] | None = None) -> list[str]:
    """Check every file listed in ``SHA256SUMS``; return the problems (empty: all good)."""
    say = log or _ignore
    problems: list[str] = []
    with Folder(directory) as folder:
        for digest, name in read_sums(directory):
            target = directory / name
            kind = folder.kind(name)
            if kind is None:
                problems.append(f"{target}: missing")
            elif kind != "file":
                problems.append(f"{target}: a {kind}, not a regular file (refused)")
            elif folder.sha256(name) != digest:
                problems.append(f"{target}: sha256 differs from SHA256SUMS (damaged; copy again)")
            else:
                say(f"ok      {name}")
    return problems


def write_sums(directory: Path, files: list[tuple[str, str]]) -> None:
    """Write ``SHA256SUMS`` (``sha256sum -c`` format) for ``(name, sha256)`` pairs."""
    for name, _ in files:
        check_path(name, "file name")
    lines = "".join(f"{sha}  {name}\n" for name, sha in sorted(files))
    with Folder(directory) as folder:
        folder.write_text(SUMS, lines)


def main(argv: list[str] | None = None) -> int:
    """``join.py [DIR] [--check] [--keep-parts]``: 0 all joined and matching, 1 not, 2 a name
    in the transfer refused."""
    parser = argparse.ArgumentParser(prog="join.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", type=Path, default=Path(__file__).parent)
    parser.add_argument("--check", action="store_true", help="only check SHA256SUMS")
    parser.add_argument("--keep-parts", action="store_true", help="keep the parts after joining")
    args = parser.parse_args(argv)
    directory = args.directory.absolute()
    try:
        if args.check:
            problems = check_sums(directory, log=print)
        else:
            join_dir(directory, keep_parts=args.keep_parts, log=print)
            problems = []
    except PartsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, UnsafeNameError) else 1
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not problems:
        print(f"all files in {directory} match their sha256")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
