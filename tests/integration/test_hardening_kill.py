"""Issue 11: kill -9 at any moment of a build loses nothing and leaks nothing.

Deterministic instead of timed: the build runs in a child Python whose audit hook counts every
filesystem mutation (a file opened for writing, rename/replace, link, symlink, unlink, mkdir,
rmdir, rmtree, chmod, utime, temp files) and every subprocess it starts (each git command),
and SIGKILLs its own process group just before the N-th one. An uninterrupted run counts them
first, each with its *site*: the event (and git subcommand) and the chain of patchwheel frames
it came from. The CI test kills before the first event of every distinct site — every link
swap, every index and manifest write, every step of a vendor tree, every collection — which
covers each line of code that mutates something once (a loop's later rounds run the same
code); the slow test kills before every event, N = 1 … total; two more tests kill at the two
moments the issue names.

Starting point: target ``tiny`` (``tinyproj``, an overlay build with series A = patches 1, 2;
``tinydep``, an sdist served unchanged) built with A. The killed build is of series B =
patches 1, 3 (patch 2 dropped: the vendor tree goes back to patch 1, then forward). After each
kill:

1. every file that ``build/simple``, ``build/tiny/simple`` and the manifest list exists and has
   its sha256 (what pip would download);
2. a build with series A succeeds and leaves every vendor tree clean at A's patched commit
   (recovery before the up-to-date check), build/ holds nothing but the two links, their
   stores and the locks, and ``patchwheel export`` writes nothing (the series' patches exactly);
3. a build with series B then succeeds alike, at B's patched commit.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import hardening_support as hs

PROJECTS = ("tinyproj", "tinydep")
# Kill points run side by side, one per core up to four (each is a chain of subprocesses);
# HARDENING_KILL_WORKERS overrides.
WORKERS = int(os.environ.get("HARDENING_KILL_WORKERS", str(min(4, os.cpu_count() or 2))))


@dataclass
class KillTemplate:
    base: Path
    ws: hs.Workspace
    series_a: list[str]
    series_b: list[str]
    vendor_a: dict[str, dict[str, object]]
    vendor_b: dict[str, dict[str, object]]
    events: list[str]  # the mutations of an uninterrupted build of B: "N\tdescription"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> KillTemplate:
    base = tmp_path_factory.mktemp("kill")
    ws = hs.overlay_workspace(base, with_sdist_dep=True)
    names = hs.add_overlay_patches(ws, count=3)
    series_a, series_b = names[:2], [names[0], names[2]]
    hs.write_series(ws.series_dir(), series_a)
    hs.assert_ok(ws.run("lock"))
    ws.build_ok()
    vendor_a = {p: hs.vendor_state(ws.vendor_dir(p)) for p in PROJECTS}

    probe_dir = tmp_path_factory.mktemp("kill-probe")
    probe = hs.copy_workspace(ws, base, probe_dir)
    hs.write_series(probe.series_dir(), series_b)
    result, events = hs.run_killed(probe, 0, probe_dir / "events.log", "build", "--no-audit")
    hs.assert_ok(result)
    assert len(events) > 50, events
    vendor_b = {p: hs.vendor_state(probe.vendor_dir(p)) for p in PROJECTS}
    assert vendor_b["tinyproj"]["head"] != vendor_a["tinyproj"]["head"]
    return KillTemplate(base, ws, series_a, series_b, vendor_a, vendor_b, events)


def build_dir_leaks(ws: hs.Workspace) -> list[str]:
    """Entries of build/ a finished build should not leave: stray links, unlinked stores."""
    problems = []
    allowed = {"tiny", "simple", ".store", ".locks", "README.md"}
    problems += [f"build/ holds {p.name}" for p in ws.build.iterdir() if p.name not in allowed]
    linked = {(ws.build / name).resolve() for name in ("tiny", "simple")}
    store = ws.build / ".store"
    problems += [
        f"build/.store holds unlinked {p.name}"
        for p in store.iterdir()
        if p.resolve() not in linked
    ]
    return problems


def check_outputs(ws: hs.Workspace, when: str) -> list[str]:
    found = hs.index_problems(ws.build / "simple") + hs.index_problems(
        ws.build / hs.TARGET / "simple"
    )
    found += hs.manifest_problems(ws.build / hs.TARGET)
    return [f"{when}: {p}" for p in found]


def rebuild_and_check(
    ws: hs.Workspace, series: list[str], vendor: dict[str, dict[str, object]], label: str
) -> list[str]:
    """Build ``series`` after the kill; check vendor trees, outputs and an export."""
    hs.write_series(ws.series_dir(), series)
    result = ws.run("build", "--no-audit")
    if result.returncode != 0 or "Traceback" in result.stderr:
        return [f"build {label} after the kill failed: {hs.failure(result)}"]
    problems = []
    up_to_date = "up to date" in result.stderr
    for project in PROJECTS:
        state = hs.vendor_state(ws.vendor_dir(project))
        for key in ("head", "status", "subjects"):
            if state[key] != vendor[project][key]:
                problems.append(
                    f"build {label}{' (said: up to date)' if up_to_date else ''} left "
                    f"vendor/{project} {key} {state[key]!r}, expected {vendor[project][key]!r}"
                )
    problems += check_outputs(ws, f"after build {label}")
    problems += [f"after build {label}: {p}" for p in build_dir_leaks(ws)]
    before = hs.snapshot(ws.series_dir())
    export = ws.run("export", "--project", "tinyproj")
    if export.returncode != 0:
        problems.append(f"export after build {label} failed: {hs.failure(export)}")
    after = hs.snapshot(ws.series_dir())
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if changed:
        problems.append(f"export after build {label} changed the series: {changed}")
    return problems


def kill_and_recover(t: KillTemplate, n: int, where: Path) -> tuple[str, list[str]]:
    """Kill a build of B before its n-th mutation; return that mutation and what went wrong."""
    ws = hs.copy_workspace(t.ws, t.base, where)
    hs.write_series(ws.series_dir(), t.series_b)
    result, events = hs.run_killed(ws, n, where / "events.log", "build", "--no-audit")
    event = events[-1].split("\t")[1] if events else "?"
    problems = []
    if result.returncode != -9:
        problems.append(f"the run was not killed (exit {result.returncode}, {len(events)} events)")
    problems += check_outputs(ws, "right after the kill")
    problems += rebuild_and_check(ws, t.series_a, t.vendor_a, "A")
    problems += rebuild_and_check(ws, t.series_b, t.vendor_b, "B")
    return event, problems


def normalize(problem: str, where: Path) -> str:
    """A problem without the run's paths and hashes, so equal problems group together."""
    problem = problem.replace(str(where), "<ws>")
    return re.sub(r"\b[0-9a-f]{7,64}\b", "<hex>", problem)


def event_number(t: KillTemplate, pattern: str, offset: int = 0) -> int:
    for line in t.events:
        number, description = line.split("\t")[:2]
        if re.search(pattern, description):
            return int(number) + offset
    raise AssertionError(f"no mutation matches {pattern!r}: {t.events}")


def report(failures: dict[int, tuple[str, list[str]]], total: int) -> str:
    by_problem: dict[str, list[int]] = defaultdict(list)
    for n, (_, problems) in sorted(failures.items()):
        for problem in problems:
            by_problem[problem].append(n)
    lines = [f"{len(failures)} of {total} kill points lose or leak something:"]
    for problem, ns in sorted(by_problem.items(), key=lambda kv: kv[1][0]):
        first = failures[ns[0]][0]
        lines.append(f"- N={_ranges(ns)} (first before: {first[:120]}): {problem[:400]}")
    return "\n".join(lines)


def _ranges(ns: list[int]) -> str:
    out: list[str] = []
    start = prev = ns[0]
    for n in [*ns[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ",".join(out)


@pytest.mark.parametrize(
    ("moment", "pattern", "offset"),
    [
        # right after build/tiny is swapped to the new store: the old one is collected next
        pytest.param(
            "after-target-link-swap",
            r"^os\.rename .*/\.tiny\.link-\S+ \S+/build/tiny$",
            1,
            id="after-target-link-swap",
        ),
        # in the middle of patching the vendor tree (a patch written, not yet committed)
        pytest.param(
            "while-patching-vendor", r"^subprocess git add", 0, id="while-patching-vendor"
        ),
    ],
)
def test_kill_at_a_named_moment_loses_and_leaks_nothing(
    template: KillTemplate, tmp_path: Path, moment: str, pattern: str, offset: int
) -> None:
    n = event_number(template, pattern, offset)
    event, problems = kill_and_recover(template, n, tmp_path / moment)
    assert not problems, f"killed before mutation {n} ({event}):\n" + "\n".join(problems)


# Killing before one of these leaves what killing before the next event leaves: a git command
# that changes no file, ref or index (commit-tree and write-tree add unreferenced objects
# only), and the audit events that announce the mutation logged right after them (mkstemp's
# and mkdtemp's own open/mkdir, rmtree's first unlink).
SAME_STATE_AS_NEXT = re.compile(
    r"^(subprocess\.Popen git (version|cat-file|diff|status|rev-parse|write-tree|commit-tree)"
    r"|tempfile\.mkstemp|tempfile\.mkdtemp|shutil\.rmtree)\b"
)


def site_kill_points(events: list[str]) -> list[int]:
    """The first event of each distinct site (event kind, git subcommand, patchwheel frames),
    leaving out events before which a kill leaves the same state as before the next one."""
    seen: set[str] = set()
    points = []
    for line in events:
        number, _description, site = line.split("\t")
        if site not in seen and not SAME_STATE_AS_NEXT.match(site):
            seen.add(site)
            points.append(int(number))
    return points


def kill_at_each(template: KillTemplate, points: list[int], tmp_path: Path) -> str | None:
    """Kill and recover at each point (two at a time); the grouped report of failures."""

    def one(n: int) -> tuple[int, str, list[str]]:
        where = tmp_path / f"n{n:04d}"
        event, problems = kill_and_recover(template, n, where)
        shutil.rmtree(where, ignore_errors=True)
        return n, normalize(event, where), [normalize(p, where) for p in problems]

    failures: dict[int, tuple[str, list[str]]] = {}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for n, event, problems in pool.map(one, points):
            if problems:
                failures[n] = (event, problems)
    return report(failures, len(points)) if failures else None


def test_kill_before_every_mutation_site_of_a_build_loses_and_leaks_nothing(
    template: KillTemplate, tmp_path: Path
) -> None:
    points = site_kill_points(template.events)
    sites = {line.split("\t")[2] for line in template.events}
    assert len(points) == len({s for s in sites if not SAME_STATE_AS_NEXT.match(s)})
    # Every link swap is a kill point of its own, and so is a write of every kind of index
    # page (HTML and JSON, root and project) of both stores (the target's, build/simple's).
    by_number = {int(e.split("\t")[0]): e.split("\t")[1] for e in template.events}
    swaps = [
        n for n, d in by_number.items() if re.search(r"^os\.rename .*/build/(tiny|simple)$", d)
    ]
    assert len(swaps) == 2 and set(swaps) <= set(points), swaps
    pages = {
        (m.group(1), m.group(2) is not None, m.group(3))
        for n in points
        if (
            m := re.search(
                r"/\.store/(tiny|simple)\.[^/]+/(?:simple/)?(\w+/)?index\.(html|json) w$",
                by_number[n],
            )
        )
    }
    assert len(pages) == 8, sorted(pages)
    failed = kill_at_each(template, points, tmp_path)
    assert failed is None, failed


@pytest.mark.slow
@pytest.mark.kill_all  # pytest --kill-all (tests/tiers.py)
def test_kill_before_every_mutation_of_a_build_loses_and_leaks_nothing(
    template: KillTemplate, tmp_path: Path
) -> None:
    total = len(template.events)
    stride = int(os.environ.get("HARDENING_KILL_STRIDE", "1"))  # 1: every mutation
    failed = kill_at_each(template, list(range(1, total + 1, stride)), tmp_path)
    assert failed is None, failed
