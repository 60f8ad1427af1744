"""The carried wheels into the cache (sha256-verified) and their METADATA, read from the file
or, without it, from the index (PEP 658 or range requests).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from packaging.requirements import Requirement
from packaging.utils import (
    NormalizedName,
)

from patchwheel import atomic, console
from patchwheel.upstream import wheelmeta
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.fetch import fetch_url
from patchwheel.wheelhouse import closure
from patchwheel.wheelhouse.destination import Destination
from patchwheel.wheelhouse.plan import Carried, Plan


def download(carried: list[Carried], cache: Cache) -> None:
    """Fetch every index wheel into the cache (sha256-verified; cached ones are not fetched)."""
    todo = [c for c in carried if c.origin == "index"]
    total = sum(c.size for c in todo)
    console.status(f"fetching {len(todo)} wheel(s), {console.human_bytes(total)} …")
    for number, item in enumerate(todo, start=1):
        assert item.url is not None
        if not cache.blob_path(item.sha256).is_file():
            console.status(f"({number}/{len(todo)}) {item.name} {item.version}")
        item.path = fetch_url(item.url, item.sha256, cache, what=f"{item.name}=={item.version}")
        item.size = item.size or item.path.stat().st_size


def metadata_graph(
    carried: list[Carried],
    plan: Plan,
    destination: Destination,
    cache: Cache,
    extras: dict[NormalizedName, bytes],
) -> closure.Graph:
    """The requirement graph of the carried wheels (stubs' metadata for installed extras)."""
    sources = {**_metadata(carried, cache), **extras}
    return closure.walk(
        [Requirement(r.requirement) for r in plan.roots],
        set(sources),
        lambda name: sources[name],
        destination.marker_environment(),
    )


def _metadata(carried: list[Carried], cache: Cache) -> dict[NormalizedName, bytes]:
    """Each carried wheel's METADATA: from the file when present, else PEP 658 from the index."""

    def one(item: Carried) -> tuple[NormalizedName, bytes]:
        if item.path is not None:
            return item.name, closure.wheel_metadata(item.path)
        assert item.url is not None
        return item.name, _remote_metadata(item, cache)

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(pool.map(one, carried))


def _remote_metadata(item: Carried, cache: Cache) -> bytes:
    """A wheel's METADATA without the wheel: cached by the wheel's sha256 once read."""
    cached = cache.verified_blob(item.sha256)
    if cached is not None:
        return closure.wheel_metadata(cached)
    stored = cache.root / "metadata" / item.sha256[:2] / f"{item.sha256}.METADATA"
    if stored.is_file():
        return stored.read_bytes()
    assert item.url is not None
    data = wheelmeta.remote_metadata(item.url, item.size, what=f"{item.name}=={item.version}")
    stored.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(stored, data)
    return data
