"""Writing wheels deterministically: members copied raw, new ones deflated, RECORD last.

The writer copies a member's compressed bytes straight from the source archive (no inflate, no
deflate), so a 300 MB wheel is rewritten at disk speed; only new or changed members are
compressed, deterministically, with timestamps given by the caller (the pin's date).
"""

from __future__ import annotations

import io
import struct
import time
import zipfile
import zlib
from typing import BinaryIO

from patchwheel.errors import BuildError
from patchwheel.wheels.record import record_hash, render_record

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
DateTime = tuple[int, int, int, int, int, int]


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
    t = time.gmtime(max(epoch, 315532800))
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)
