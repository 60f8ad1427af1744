"""Releases as the steps of a bisect: the project's final releases from good to bad, as sdists.

When no git history reaches a change, the release sdists on the package index (full source
trees for vLLM) still bracket it between two releases. ``--good vllm==0.28.0 --bad
vllm==0.29.0`` makes every final release from the one to the other a step; each step's tree is
the sdist, fetched, hash-checked and extracted by :mod:`patchwheel.upstream.sources`.
"""

from __future__ import annotations

from pathlib import Path

from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import Version

from patchwheel.bisect.history import Revision
from patchwheel.config.pins import IndexPin, Pin, parse_pin
from patchwheel.errors import BisectError, PinError
from patchwheel.http import configured_index_urls, redact
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.simple_api import IndexFile, project_files
from patchwheel.upstream.sources import source_tree


def release_pin(text: str, option: str) -> IndexPin | None:
    """`text` as ``name==version`` (a release), or None when it is not written like one."""
    if "==" not in text:
        return None
    try:
        pin: Pin = parse_pin(text)
    except PinError as exc:
        raise BisectError(f"{option}: {exc}") from exc
    if not isinstance(pin, IndexPin):
        return None
    return pin


class ReleaseTrees:
    """Every final release from `good` to `bad` (both included), oldest first."""

    def __init__(self, project: str, good: IndexPin, bad: IndexPin, cache: Cache) -> None:
        for option, pin in (("--good", good), ("--bad", bad)):
            if canonicalize_name(pin.name) != canonicalize_name(project):
                raise BisectError(
                    f"{option} {pin.text!r} names {pin.name}, not the project {project}"
                )
        low, high = Version(good.version), Version(bad.version)
        if low == high:
            raise BisectError(f"--good and --bad are the same release {good.version}")
        if low > high:
            raise BisectError(f"--good {good.version} is newer than --bad {bad.version}: swap them")
        self.cache = cache
        self.project = project
        files = _sdists(project)
        if not files:
            raise BisectError(f"the package index has no sdist of {project}")
        wanted = {
            v: f
            for v, f in files.items()
            if low <= v <= high and not (v.is_prerelease or v.is_devrelease)
        }
        wanted[low] = files.get(low) or _missing(project, good.version)
        wanted[high] = files.get(high) or _missing(project, bad.version)
        finals = [v for v in files if not (v.is_prerelease or v.is_devrelease)]
        self.newest = str(max(finals)) if finals else None
        self.later = sum(1 for v in finals if v > high)
        self.revisions = [
            Revision(
                f"{project}=={v}",
                wanted[v].upload_time or "",
                f"{project} {v} (sdist {wanted[v].filename})",
            )
            for v in sorted(wanted)
        ]

    def tree(self, step: int) -> Path:
        return source_tree(self.revisions[step].id, self.cache)

    def provenance(self) -> dict[str, object]:
        """The indexes read, the releases used, and how many finals come after bad."""
        return {
            "indexes": [redact(url) for url in configured_index_urls()],  # never a token
            "releases": [r.id for r in self.revisions],
            "newest": self.newest,
            "later_on_main_line": self.later,
        }


def _sdists(project: str) -> dict[Version, IndexFile]:
    out: dict[Version, IndexFile] = {}
    for item in project_files(project):
        if item.yanked or not item.filename.endswith((".tar.gz", ".zip")):
            continue
        try:
            name, version = parse_sdist_filename(item.filename)
        except InvalidSdistFilename:
            continue
        if name == canonicalize_name(project):
            out.setdefault(version, item)
    return out


def _missing(project: str, version: str) -> IndexFile:
    raise BisectError(f"{project}=={version}: the package index has no sdist of that release")
