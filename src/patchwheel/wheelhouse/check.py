"""Checks of a resolution against the wheels' own metadata: installed versions that do not fit,
required packages nobody carries, fallbacks to ancient releases; and why each wheel is there.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from patchwheel.upstream.simple_api import project_files
from patchwheel.wheelhouse import closure, resolve
from patchwheel.wheelhouse.destination import Destination
from patchwheel.wheelhouse.plan import CONFIG_FILE, Carried, Plan

FALLBACK_AGE_DAYS = 365


def mismatch_error(
    mismatches: list[closure.Mismatch],
    plan: Plan,
    explanation: str,
    fitting: dict[NormalizedName, str] | None = None,
) -> resolve.ResolutionError:
    """The error listing installed versions that fail requirements, with both ways out."""
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


def check(carried: list[Carried], plan: Plan, graph: closure.Graph) -> None:
    """Fail on an unmet installed requirement or a required package nobody carries."""
    unexpected = [
        m
        for m in closure.installed_mismatches(graph, plan.installed)
        if m.name not in plan.accepted
    ]
    if unexpected:
        raise mismatch_error(unexpected, plan, "")
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


def check_fallbacks(
    carried: list[Carried], plan: Plan, graph: closure.Graph, destination: Destination
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
            version = file_version(entry.filename)
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


def file_version(filename: str) -> Version | None:
    """The version a wheel or sdist file name carries (None when it has none)."""
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def explain(carried: list[Carried], plan: Plan, graph: closure.Graph) -> None:
    """Say why each wheel is here: requested (and why), and which packages need it."""
    reasons = {canonicalize_name(Requirement(r.requirement).name): r.reason for r in plan.roots}
    for item in carried:
        item.requested = reasons.get(item.name)
        item.dependency_of = [
            p for p in graph.parents(item.name) if p not in (closure.REQUESTED, item.name)
        ]


def relied_on(plan: Plan, graph: closure.Graph) -> list[dict[str, Any]]:
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
