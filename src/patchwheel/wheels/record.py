"""RECORD files: their hash format, reading and rendering them, checking a wheel against its own."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from collections.abc import Iterable
from pathlib import Path

from patchwheel.wheels.names import find_dist_info, parse_wheel_name

SIGNATURE_FILES = ("RECORD.jws", "RECORD.p7s")


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
