"""Resolving a plan with uv until every extra asked of an installed package is covered.

Installed packages stand in as stub wheels pinned by constraints; a conflict with one is
diagnosed by letting the named packages go until a resolution exists.
"""

from __future__ import annotations

import dataclasses
import re
import time
import zipfile
from pathlib import Path

from packaging.utils import (
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import Version

from patchwheel import console
from patchwheel.errors import FetchError
from patchwheel.http import configured_index_urls
from patchwheel.upstream import wheelmeta
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.simple_api import project_files
from patchwheel.wheelhouse import closure, resolve
from patchwheel.wheelhouse.check import file_version, mismatch_error
from patchwheel.wheelhouse.destination import Destination, Installed
from patchwheel.wheelhouse.download import download, metadata_graph
from patchwheel.wheelhouse.plan import Carried, Options, Plan
from patchwheel.wheels.names import wheel_filename

NEVER = "sys_platform == 'never'"
MAX_EXTRA_ROUNDS = 3


def solve(
    plan: Plan, options: Options, cache: Cache, work: Path
) -> tuple[list[Carried], closure.Graph]:
    """Resolve (and download) until every extra asked of an installed package is covered.

    An installed ``httpx`` satisfies ``httpx[http2]`` only if the extra's own requirements
    (``h2``) are there too: those are read from the installed version's metadata on the index
    and put into its stub, and the closure is resolved again.
    """
    destination = options.destination
    extras: dict[NormalizedName, bytes] = {}
    for attempt in range(1, MAX_EXTRA_ROUNDS + 1):
        pinned = _resolve(plan, destination, cache, work / f"round-{attempt}", extras)
        carried = _carried(pinned, plan, destination)
        if not options.dry_run:
            download(carried, cache)
        graph = metadata_graph(carried, plan, destination, cache, extras)
        wanted = _installed_extras(graph, plan, extras)
        if not wanted or attempt == MAX_EXTRA_ROUNDS:
            return carried, graph
        for name, names in sorted(wanted.items()):
            extras[name] = _stub_metadata(name, plan, destination, names)
    raise AssertionError("unreachable")


def _installed_extras(
    graph: closure.Graph, plan: Plan, done: dict[NormalizedName, bytes]
) -> dict[NormalizedName, set[str]]:
    """Installed packages required with extras whose requirements are not yet in a stub."""
    wanted: dict[NormalizedName, set[str]] = {}
    for name, edges in graph.requirements.items():
        if plan.installed.version(name) is None or name in done:
            continue
        asked = {str(canonicalize_name(e)) for _, req in edges for e in req.extras}
        if asked:
            wanted[name] = asked
    return wanted


def _stub_metadata(
    name: NormalizedName, plan: Plan, destination: Destination, extras: set[str]
) -> bytes:
    """A stub METADATA carrying only what ``extras`` add to the installed version's needs."""
    version = plan.installed.version(name)
    assert version is not None
    lines = [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"]
    lines += [f"Provides-Extra: {extra}\n" for extra in sorted(extras)]
    env = destination.marker_environment()
    metadata = _installed_metadata(name, version, destination)
    if metadata is None:
        console.status(
            f"[yellow]note:[/] {name} {version} (installed) is asked for with extra(s) "
            f"{', '.join(sorted(extras))}, but its metadata is not on the index; the extras' own "
            "requirements are taken as installed"
        )
    for req in closure.requires_dist(metadata or b"", what=name):
        marker = req.marker
        if marker is None or marker.evaluate({**env, "extra": ""}):
            continue
        if any(marker.evaluate({**env, "extra": extra}) for extra in extras):
            lines.append(f"Requires-Dist: {req}\n")
    return "".join(lines).encode()


def _installed_metadata(
    name: NormalizedName, version: Version, destination: Destination
) -> bytes | None:
    rank = {str(tag): i for i, tag in enumerate(destination.supported_tags())}
    wheels = [
        f
        for f in project_files(name)
        if f.filename.endswith(".whl") and file_version(f.filename) == version
    ]
    if not wheels:
        return None

    def score(filename: str) -> int:
        return min(rank.get(str(t), len(rank)) for t in parse_wheel_filename(filename)[3])

    best = min(wheels, key=lambda f: score(f.filename))
    return wheelmeta.remote_metadata(best.url, best.size, what=f"{name}=={version} (installed)")


def _request(plan: Plan, destination: Destination, cache: Cache, links: Path) -> resolve.Request:
    known = {n: v for n, v in plan.installed.packages.items() if v is not None}
    unknown = [n for n, v in plan.installed.packages.items() if v is None]
    overrides = [f"{n} ; {NEVER}" for n in sorted(unknown) if n not in plan.accepted]
    overrides += [f"{n} ; {NEVER}" for n in sorted(plan.dropped)]
    overrides += [f"{n}=={v}" for n, v in sorted(plan.accepted.items())]
    return resolve.Request(
        requirements=[r.requirement for r in plan.roots],
        destination=destination,
        indexes=configured_index_urls(),
        cache_dir=cache.root / "uv",
        exclude_newer=plan.cutoff,
        constraints=[f"{n}=={v}" for n, v in sorted(known.items()) if n not in plan.dropped],
        overrides=overrides,
        find_links=[links],
    )


def _resolve(
    plan: Plan,
    destination: Destination,
    cache: Cache,
    work: Path,
    extras: dict[NormalizedName, bytes],
) -> list[resolve.Pinned]:
    links = work / "links"
    links.mkdir(parents=True)
    _offer(plan, links, extras)
    request = _request(plan, destination, cache, links)
    when = f" as of {plan.cutoff}" if plan.cutoff else ""
    console.status(
        f"resolving {len(plan.roots)} requirement(s) for {destination.describe()}{when} "
        f"with {resolve.uv_version()} ({len(plan.installed.packages)} installed package(s) "
        "taken as given)"
    )
    started = time.monotonic()
    try:
        result = resolve.resolve(request, work / "resolve")
    except resolve.ResolutionError as exc:
        if not _installed_in(exc.explanation, plan.installed):
            raise
        mismatches, fitting = _diagnose(plan, destination, cache, work, exc)
        raise mismatch_error(mismatches, plan, exc.explanation, fitting) from None
    if result.undated_files:
        console.status(
            f"[yellow]note:[/] {result.undated_files} file(s) on indexes without upload times "
            "were not considered (--exclude-newer needs PEP 700 upload times)"
        )
    console.status(
        f"resolved {len(result.packages)} package(s) in {time.monotonic() - started:.1f} s"
    )
    return result.packages


def _offer(plan: Plan, links: Path, extras: dict[NormalizedName, bytes]) -> None:
    """Fill the resolver's find-links folder with metadata-only stand-ins.

    A built wheel is offered as a stub with its own file name and METADATA: the resolver
    needs nothing else, and uv unpacks every local wheel it is shown into its cache (a
    300 MB vLLM wheel, once per run, since each run's folder is new). Installed packages
    get one stub each.
    """
    for _, path in plan.built.values():
        _stub_of(links, path)
    for name, version in plan.installed.packages.items():
        if version is not None and name not in plan.dropped:
            _write_stub(links, name, version, extras.get(name))


def _stub_of(directory: Path, wheel: Path) -> Path:
    """A stub of a real wheel: the same file name, METADATA and WHEEL, no payload."""
    with zipfile.ZipFile(wheel) as zf:
        dist = next(
            n.split("/", 1)[0]
            for n in zf.namelist()
            if n.endswith(".dist-info/METADATA") and n.count("/") == 1
        )
        members = {f"{dist}/{m}": zf.read(f"{dist}/{m}") for m in ("METADATA", "WHEEL")}
    members[f"{dist}/RECORD"] = b""
    path = directory / wheel.name
    with zipfile.ZipFile(path, "w") as out:
        for member, data in members.items():
            out.writestr(member, data)
    return path


def _write_stub(
    directory: Path, name: NormalizedName, version: Version, metadata: bytes | None = None
) -> Path:
    """A wheel that stands for an installed package during resolution.

    It needs nothing (what it needs is installed), except what asked-for extras add.
    """
    path = directory / wheel_filename(name, str(version), "py3-none-any")
    dist = f"{path.name.split('-')[0]}-{version}.dist-info"
    plain = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    members = {
        f"{dist}/METADATA": metadata.decode() if metadata else plain,
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: patchwheel\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{dist}/RECORD": "",
    }
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in members.items():
            zf.writestr(member, text)
    return path


def _diagnose(
    plan: Plan,
    destination: Destination,
    cache: Cache,
    work: Path,
    failure: resolve.ResolutionError,
) -> tuple[list[closure.Mismatch], dict[NormalizedName, str]]:
    """Find every installed package that stands in the way, and the version that would fit.

    uv explains one conflict at a time; each installed package it names is let go (resolved
    freely instead of pinned) until a resolution exists. The requirements those packages fail
    are then read from the wheels' metadata.
    """
    relaxed: set[NormalizedName] = set()
    attempt = 0
    while True:
        named = _installed_in(failure.explanation, plan.installed.without(relaxed))
        if not named:
            raise resolve.ResolutionError(
                f"{failure.args[0].splitlines()[0]} (even letting go of the installed "
                f"{', '.join(sorted(relaxed))})",
                failure.explanation,
            )
        relaxed |= named
        shown = ", ".join(f"{n} {plan.installed.version(n)}" for n in sorted(named))
        console.status(f"conflict with the destination's {shown}; resolving without it …")
        trial = dataclasses.replace(plan, installed=plan.installed.without(relaxed))
        attempt += 1
        links = work / f"links-{attempt}"
        links.mkdir()
        _offer(trial, links, {})
        try:
            result = resolve.resolve(
                _request(trial, destination, cache, links), work / f"diagnose-{attempt}"
            )
        except resolve.ResolutionError as exc:
            failure = exc
            continue
        carried = _carried(result.packages, trial, destination)
        graph = metadata_graph(carried, trial, destination, cache, {})
        only = Installed(
            plan.installed.source,
            plan.installed.sha256,
            {n: v for n, v in plan.installed.packages.items() if n in relaxed},
        )
        found = [
            m for m in closure.installed_mismatches(graph, only) if m.name not in plan.accepted
        ]
        return found, {c.name: c.version for c in carried}


def _installed_in(explanation: str, installed: Installed) -> set[NormalizedName]:
    """The installed packages (at their installed version) that uv's explanation names."""
    found = set()
    for name, version in re.findall(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s,;{}()]+)", explanation):
        key = canonicalize_name(name)
        have = installed.packages.get(key)
        if have is not None and version.rstrip(".") == str(have):
            found.add(key)
    return found


def _carried(pinned: list[resolve.Pinned], plan: Plan, destination: Destination) -> list[Carried]:
    """The resolved packages to put in the wheelhouse, each with the wheel that fits best."""
    rank = {str(tag): i for i, tag in enumerate(destination.supported_tags())}
    out: list[Carried] = []
    for item in pinned:
        if item.name in plan.installed.packages:
            continue
        if item.name in plan.built:
            entry, path = plan.built[item.name]
            out.append(
                Carried(
                    name=item.name,
                    version=entry.version,
                    filename=entry.filename,
                    sha256=entry.sha256,
                    size=int(entry.size or 0),
                    origin="build",
                    url=None,
                    upload_time=None,
                    path=path,
                )
            )
            continue
        wheel = _best_wheel(item, rank, destination)
        if wheel.sha256 is None:
            raise FetchError(
                f"{item.name}=={item.version}: the index lists {wheel.filename} without a sha256; "
                "a wheelhouse needs verifiable files: use an index that publishes hashes"
            )
        out.append(
            Carried(
                name=item.name,
                version=item.version,
                filename=wheel.filename,
                sha256=wheel.sha256,
                size=int(wheel.size or 0),
                origin="index",
                url=wheel.url,
                upload_time=wheel.upload_time,
            )
        )
    return out


def _best_wheel(
    item: resolve.Pinned, rank: dict[str, int], destination: Destination
) -> resolve.WheelRef:
    def score(wheel: resolve.WheelRef) -> int:
        tags = parse_wheel_filename(wheel.filename)[3]
        return min((rank.get(str(t), len(rank)) for t in tags), default=len(rank))

    wheels = [w for w in item.wheels if w.filename.endswith(".whl")]
    best = min(wheels, key=score, default=None)
    if best is None or score(best) == len(rank):
        raise resolve.ResolutionError(
            f"{item.name}=={item.version}: no wheel for {destination.describe()} in uv's answer"
        )
    return best
