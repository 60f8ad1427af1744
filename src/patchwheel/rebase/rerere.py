"""Remembered conflict resolutions: git's rerere, its rr-cache kept with the target.

A conflict resolved by hand during a rebase is recorded by ``git rerere`` in the vendor repo;
when the rebase finishes, the recorded resolutions are written to
``patches/<target>/<project>/rr-cache/`` (beside the series, committed with it) and, before the
next rebase of that series replays anything, copied back into the vendor repo. So the same
conflict — the same lines on both sides — resolves itself the next time (say, on the next
nightly), and the report says which patch it resolved.

What is read from ``patches/`` is checked: entry names are hex conflict ids, files are
``preimage``/``postimage`` (with git's ``.N`` variants), plain files only.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from patchwheel import atomic
from patchwheel.errors import ConfigError
from patchwheel.patching import vendor_git

RR_CACHE = "rr-cache"
_ENTRY = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
_FILE = re.compile(r"^(?:preimage|postimage)(?:\.[0-9]+)?$")
_USED = re.compile(r"^(?:Staged|Resolved) '(.+)' using previous resolution\.$", re.MULTILINE)
_RECORDED = re.compile(r"^Recorded resolution for '(.+)'\.$", re.MULTILINE)
MAX_FILE = 16 * 1024 * 1024


def enable(repo: Path) -> None:
    """Turn rerere on in a vendor repo (also for the user's own git commands in it)."""
    vendor_git.run(repo, "config", "rerere.enabled", "true")
    vendor_git.run(repo, "config", "rerere.autoupdate", "true")


def cache_dir(repo: Path) -> Path:
    """The vendor repo's rr-cache."""
    return vendor_git.git_dir(repo) / RR_CACHE


def read_saved(series_dir: Path) -> dict[str, dict[str, bytes]]:
    """The resolutions kept with a series (``<series_dir>/rr-cache``), checked."""
    root = series_dir / RR_CACHE
    if not root.exists():
        return {}
    if root.is_symlink() or not root.is_dir():
        raise ConfigError(f"{root}: must be a directory of rerere resolutions")
    out: dict[str, dict[str, bytes]] = {}
    for entry in sorted(root.iterdir()):
        if not _ENTRY.match(entry.name) or entry.is_symlink() or not entry.is_dir():
            raise ConfigError(
                f"{entry}: not a rerere resolution (a directory named by a hex conflict id); "
                "remove it"
            )
        files: dict[str, bytes] = {}
        for item in sorted(entry.iterdir()):
            if not _FILE.match(item.name) or item.is_symlink() or not item.is_file():
                raise ConfigError(f"{item}: not a rerere preimage/postimage file; remove it")
            if item.stat().st_size > MAX_FILE:
                raise ConfigError(f"{item}: larger than {MAX_FILE} bytes; refused")
            files[item.name] = item.read_bytes()
        if any(name.startswith("postimage") for name in files):
            out[entry.name] = files
    return out


def load(repo: Path, series_dir: Path) -> int:
    """Copy the resolutions kept with a series into the vendor repo; how many there are."""
    saved = read_saved(series_dir)
    for name, files in saved.items():
        dest = cache_dir(repo) / name
        dest.mkdir(parents=True, exist_ok=True)
        for file, data in files.items():
            (dest / file).write_bytes(data)
    return len(saved)


def resolved(repo: Path) -> dict[str, dict[str, bytes]]:
    """The vendor repo's recorded resolutions (entries with a postimage)."""
    root = cache_dir(repo)
    if not root.is_dir():
        return {}
    out: dict[str, dict[str, bytes]] = {}
    for entry in sorted(root.iterdir()):
        if not _ENTRY.match(entry.name) or not entry.is_dir():
            continue
        files = {f.name: f.read_bytes() for f in sorted(entry.iterdir()) if _FILE.match(f.name)}
        if any(name.startswith("postimage") for name in files):
            out[entry.name] = files
    return out


def save(entries: dict[str, dict[str, bytes]], series_dir: Path) -> list[str]:
    """Write resolutions into ``<series_dir>/rr-cache`` (new or changed files only); the ids
    written."""
    written = []
    for name, files in sorted(entries.items()):
        dest = series_dir / RR_CACHE / name
        changed = False
        for file, data in files.items():
            path = dest / file
            if path.is_file() and path.read_bytes() == data:
                continue
            dest.mkdir(parents=True, exist_ok=True)
            atomic.write_bytes(path, data)
            changed = True
        if changed:
            written.append(name)
    return written


def forget_unresolved(repo: Path) -> None:
    """Drop entries without a resolution (preimages of conflicts nobody resolved)."""
    root = cache_dir(repo)
    if not root.is_dir():
        return
    for entry in root.iterdir():
        if entry.is_dir() and not any(p.name.startswith("postimage") for p in entry.iterdir()):
            shutil.rmtree(entry, ignore_errors=True)


def record(repo: Path) -> list[str]:
    """Let rerere record the resolutions of the conflicts just resolved; the paths recorded."""
    proc = vendor_git.run(repo, "-c", "rerere.enabled=true", "rerere", check=False)
    text = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    return _RECORDED.findall(text)


def used(output: bytes) -> list[str]:
    """The paths a git command's output says rerere resolved from a remembered resolution."""
    return _USED.findall(output.decode("utf-8", "replace"))
