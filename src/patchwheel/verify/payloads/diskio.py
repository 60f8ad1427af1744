"""A disk's measured write bandwidth and what the disk is (standard library only).

The physical limit of writing training files to a folder: large sequential writes of one
file with ``os.write`` in 16 MiB chunks, then ``fsync``, timed together; the best of a few
runs counts. The same figure for the RAM disk (``/dev/shm``) is the memory system's limit for
the same work. ``filesystem_of`` names the mount a path lives on (``/proc/mounts``), so a
report says which disk it measured.

Used by the GPU session (its own python) and by ``speed.py`` / the CPU benchmark.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

CHUNK = 16 << 20
RAM_DISK = Path("/dev/shm")  # noqa: S108 (the RAM disk is what is measured)


def write_bandwidth(directory: Path, nbytes: int, runs: int = 2) -> dict[str, Any]:
    """Bytes per second of writing ``nbytes`` to a new file in ``directory`` with fsync."""
    directory.mkdir(parents=True, exist_ok=True)
    chunk = os.urandom(min(CHUNK, max(nbytes, 1)))
    seconds = []
    for _ in range(runs):
        path = directory / f".bandwidth-{secrets.token_hex(4)}"
        started = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            written = 0
            while written < nbytes:
                written += os.write(fd, chunk[: nbytes - written])
            os.fsync(fd)
        finally:
            os.close(fd)
            elapsed = time.perf_counter() - started
            path.unlink(missing_ok=True)
        seconds.append(elapsed)
    return {
        "path": str(directory),
        "filesystem": filesystem_of(directory),
        "bytes": nbytes,
        "seconds": [round(s, 4) for s in seconds],
        "bytes_per_s": nbytes / min(seconds),
        "method": f"one file, os.write in {CHUNK >> 20} MiB chunks, then fsync; best of {runs}",
    }


def filesystem_of(path: Path) -> dict[str, str]:
    """The mount that holds ``path``: its mount point, type and device (``/proc/mounts``)."""
    resolved = str(path.resolve())
    best = {"mount": "/", "type": "unknown", "device": "unknown"}
    try:
        lines = Path("/proc/mounts").read_text("utf-8").splitlines()
    except OSError:
        return best
    longest = -1
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        device, mount, kind = fields[0], fields[1].replace("\\040", " "), fields[2]
        inside = resolved == mount or resolved.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > longest:
            longest = len(mount)
            best = {"mount": mount, "type": kind, "device": device}
    return best


def free_bytes(directory: Path) -> int:
    """Bytes an unprivileged writer may still put in ``directory``'s filesystem."""
    stat = os.statvfs(directory)
    return stat.f_bavail * stat.f_frsize
