"""Every CUDA fat binary a shared object holds, gathered where cuobjdump can list them.

cuobjdump lists the fat binaries of a module's ``.nv_fatbin`` section: those the CUDA runtime
registers when the module loads. NVIDIA's own libraries keep most of their kernels elsewhere,
in containers of the same format inside their data, loaded by the library itself: cuFFT 12.0's
``libcufft.so.12`` (286 MB) registers one sm_75 kernel and carries some 24,000 fat binaries
beside it, with SASS for sm_75 to sm_120. Read through the section alone it would look like a
Turing-only library. So every fat binary of the file (found by its header: magic 0xBA55ED50,
version 1, a 16-byte header, a size that fits, an entry header of version 0x0101) is copied into
the ``.nv_fatbin`` section of a minimal ELF file, which cuobjdump then lists like any module.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

__all__ = ["MAGIC", "gather"]

MAGIC = struct.pack("<I", 0xBA55ED50)
_HEADER = struct.Struct("<HHQ")  # version, header size, size of what follows
_ENTRY = struct.Struct("<HHIQ")  # kind (1 PTX, 2 ELF, 8 LTO IR), version, header size, size
_SECTIONS = b"\0.nv_fatbin\0.shstrtab\0"
CHUNK = 1 << 20


def _spans(data: mmap.mmap) -> list[tuple[int, int]]:
    """(offset, length) of each fat binary in ``data``."""
    spans = []
    size = len(data)
    at = data.find(MAGIC)
    while at >= 0:
        if at + 16 + _ENTRY.size <= size:
            version, header, length = _HEADER.unpack_from(data, at + 4)
            _, entry_version, entry_header, entry_size = _ENTRY.unpack_from(data, at + 16)
            if (
                version == 1
                and header == 16
                and 0 < length <= size - at - 16
                and entry_version == 0x0101
                and 16 <= entry_header <= 4096
                and entry_size <= length
            ):
                spans.append((at, 16 + length))
                at = data.find(MAGIC, at + 16 + length)
                continue
        at = data.find(MAGIC, at + 4)
    return spans


def gather(module: Path, dest: Path) -> int:
    """Write every fat binary of ``module`` into a minimal ELF file at ``dest``; how many
    (0: none, and nothing written)."""
    with module.open("rb") as fh:
        if module.stat().st_size == 0:
            return 0
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            spans = _spans(data)
            if not spans:
                return 0
            _write_elf(data, spans, dest)
    return len(spans)


def _write_elf(data: mmap.mmap, spans: list[tuple[int, int]], dest: Path) -> None:
    """ELF64 (x86-64, shared object) whose one section ``.nv_fatbin`` holds ``spans``."""
    padded = [(at, length, -length % 8) for at, length in spans]
    payload = sum(length + pad for _, length, pad in padded)
    strings_at = 64 + payload
    table_at = strings_at + len(_SECTIONS) + (-(strings_at + len(_SECTIONS)) % 8)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, table_at, 0, 64, 0, 0, 64, 3, 2)

    def section(name: int, kind: int, flags: int, offset: int, size: int, align: int) -> bytes:
        return struct.pack("<IIQQQQIIQQ", name, kind, flags, 0, offset, size, 0, 0, align, 0)

    with dest.open("wb") as out:
        out.write(header)
        for at, length, pad in padded:
            for start in range(at, at + length, CHUNK):
                out.write(data[start : min(start + CHUNK, at + length)])
            out.write(bytes(pad))
        out.write(_SECTIONS)
        out.write(bytes(table_at - strings_at - len(_SECTIONS)))
        out.write(section(0, 0, 0, 0, 0, 0))
        out.write(section(1, 1, 2, 64, payload, 8))  # .nv_fatbin: PROGBITS, ALLOC
        out.write(section(12, 3, 0, strings_at, len(_SECTIONS), 1))  # .shstrtab
