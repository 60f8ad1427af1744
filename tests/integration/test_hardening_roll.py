"""Issue 24: hostile names, interrupted rolls, rolls backwards, hostile channel answers.

On the roll world (:mod:`tests.roll_world`: a vLLM-shaped repository whose nightlies N1..N7 are
served on loopback like wheels.vllm.ai, a tiny speculators-shaped consumer, target ``nightly``
pinned to N1 with patches P1 and P2), black-box through ``python -m patchwheel``, judged by the
exit status, the output and the filesystem:

1. **Names.** Every verb that takes a target or project name refuses ``../x``, ``a/b``, ``-x``,
   a name with a space, an absolute path and ``../patches/nightly`` (what a roll's "restoring
   everything" turned into ``rm -r patches/nightly/vllm``) with exit status 2, naming the value
   and the rule, without a traceback, and the checkout (patches/, vendor/, build/) is byte for
   byte as before — after every single call.
2. **Kills.** A roll N1 → N2 is SIGKILLed (the audit hook of ``hardening_support.run_killed``)
   just before the first filesystem change or git command of each of its steps — the rebase,
   the state that says it finished, the build, the audit, the verification, the report — and
   one N1 → N6 before its bisect. Then: a new roll says one is in progress (exit 2);
   ``--continue`` ends as the uninterrupted roll did (status, pins, patches, checks) and the
   next roll is up to date; and, on a second killed copy, ``--abort`` puts patches/ and every
   vendor tree back exactly. ``pytest --kill-all`` kills before every distinct site of the roll
   instead (slow, not in CI).
3. **Backwards.** ``--to`` an older nightly is refused (exit 2) naming both versions and
   ``--allow-downgrade``, which then moves back; a channel whose newest is older than the pin
   leaves the pin (exit 0, "up to date", the newest named).
4. **Hostile channel answers** through the command: a JSON page nested 100000 deep, a wheel
   redirected to another host: exit 2 naming them, the other host never asked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import channel_support as cs
from tests.roll_world import World, make_world, write_target

from . import hardening_support as hs

TARGET = "nightly"
PROJECTS = ("speculators", "vllm")
RULE = "one plain path component"
WORKERS = int(os.environ.get("HARDENING_KILL_WORKERS", str(min(2, os.cpu_count() or 2))))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with make_world(tmp_path_factory.mktemp("roll-hardening")) as made:
        yield made


def checkout(world: World, root: Path, patches: tuple[str, ...] = ("0001", "0002")) -> hs.Workspace:
    """Target ``nightly`` pinned to N1 with the chosen patches, locked and built."""
    write_target(world, root, patches)
    ws = hs.Workspace(root=root, cache=world.cache)
    hs.assert_ok(ws.run("lock"))
    hs.assert_ok(ws.run("build", "--no-audit"))
    return ws


def copy(ws: hs.Workspace, dest: Path) -> hs.Workspace:
    shutil.copytree(ws.root, dest, symlinks=True)
    return hs.Workspace(root=dest, cache=ws.cache)


def state_of(root: Path) -> dict[str, object]:
    """What a roll's --abort must put back: patches/ byte for byte, each vendor tree's HEAD,
    status, commits since upstream and work-tree files."""
    out: dict[str, object] = {"patches": hs.snapshot(root / "patches")}
    for project in PROJECTS:
        tree = root / "vendor" / TARGET / project
        out[project] = {**hs.vendor_state(tree), "files": hs.vendor_files(tree)}
    return out


def differences(before: dict[str, object], after: dict[str, object]) -> list[str]:
    found = []
    for key in before.keys() | after.keys():
        a, b = before.get(key), after.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += [f"{key}/{k}" for k in a.keys() | b.keys() if a.get(k) != b.get(k)]
        elif a != b:
            found.append(key)
    return sorted(found)


def roll(ws: hs.Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    return ws.run("roll", "--target", TARGET, "--verify", "install", *args)


def report(ws: hs.Workspace, name: str = TARGET) -> dict:
    return json.loads((ws.build / name / "roll.json").read_text())


# --------------------------------------------------------------------------- 1. names

# Every call runs in one Python process (the `patchwheel` entry point, main(argv)), each with
# the checkout hashed before and after: what changed, per call.
DRIVER = r"""
import contextlib, hashlib, io, json, os, sys, traceback
from pathlib import Path
from patchwheel.cli import main

root = Path(sys.argv[2])

def tree():
    out = {}
    for base, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".locks"]
        for name in dirs + files:
            path = Path(base, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                out[rel] = "dir"
    return out

results = []
for argv in json.loads(Path(sys.argv[1]).read_text()):
    before = tree()
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            status = main(["--root", str(root), *argv])
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        status = None
        err.write(traceback.format_exc())
    after = tree()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    results.append({"argv": argv, "status": status, "output": out.getvalue() + err.getvalue(),
                    "changed": changed})
print(json.dumps(results))
"""


def name_calls(world: World, hostile: str) -> list[list[str]]:
    """Every verb's name options, each given ``hostile`` (the rest of the call is valid)."""
    n2 = world.build(2)
    t = f"--target={TARGET}"
    onto = f"vllm @ git+{world.vllm.as_uri()}@{n2.commit}"
    bisect = ["--good", world.build(1).commit, "--bad", n2.commit]
    return [
        ["build", f"--target={hostile}"],
        ["lock", f"--target={hostile}"],
        ["audit", f"--target={hostile}"],
        ["verify", f"--target={hostile}", "--families=none", "--no-user-path"],
        ["gpu", f"--target={hostile}"],
        ["wheelhouse", f"--target={hostile}", "--dry-run"],
        ["publish", f"--target={hostile}", "--repository-url", "http://127.0.0.1:9/"],
        ["export", f"--target={hostile}", "--project", "vllm"],
        ["export", t, f"--project={hostile}"],
        ["rebase", f"--target={hostile}", "--onto", onto],
        ["rebase", t, "--onto", onto, f"--new-target={hostile}"],
        ["rebase", f"--target={hostile}", "--abort"],
        ["roll", f"--target={hostile}", "--verify", "install"],
        ["roll", t, "--to", n2.version, f"--new-target={hostile}", "--verify", "install"],
        ["roll", f"--target={hostile}", "--continue"],
        ["roll", f"--target={hostile}", "--abort"],
        # issue 23's options: the project rolled, a variant's answer when it has no new wheel
        ["roll", t, f"--project={hostile}", "--verify", "install"],
        ["roll", t, "--to", n2.version, f"--missing={hostile}=keep", "--verify", "install"],
        ["roll", t, f"--missing=vllm:{hostile}=drop", "--verify", "install"],
        ["rebase", t, "--onto", onto, f"--missing={hostile}=keep"],
        # issue 21's: a served target's generator target
        ["verify", t, f"--against={hostile}"],
        ["bisect", f"--target={hostile}", *bisect],
        ["bisect", t, f"--consumer-target={hostile}", *bisect],
        ["bisect", t, f"--project={hostile}", *bisect],
    ]


def test_every_verb_refuses_a_hostile_name_and_touches_nothing(
    world: World, base: hs.Workspace, tmp_path: Path
) -> None:
    ws = copy(base, tmp_path / "checkout")
    series = sorted(p.name for p in (ws.patches / TARGET / "vllm").iterdir())
    hostile = ["../x", "a/b", "-x", "a b", str(ws.patches / TARGET), "../patches/nightly"]
    calls = [call for value in hostile for call in name_calls(world, value)]
    plan = tmp_path / "calls.json"
    plan.write_text(json.dumps(calls))
    ran = subprocess.run(
        [sys.executable, "-c", DRIVER, str(plan), str(ws.root)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATCHWHEEL_CACHE": str(world.cache), "COLUMNS": "400"},
        timeout=600,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    results = json.loads(ran.stdout)
    assert len(results) == len(calls) == 6 * 24
    problems = []
    for result in results:
        value = next(v for v in hostile if any(v in arg for arg in result["argv"]))
        text = hs.flat(result["output"])
        why = []
        if result["status"] != 2:
            why.append(f"exit status {result['status']}")
        if "Traceback" in result["output"]:
            why.append(f"a traceback ({hs.raised(result['output'])})")
        if repr(value) not in text or RULE not in text:
            why.append("the output names not both the value and the rule")
        if result["changed"]:
            why.append(f"changed {result['changed'][:5]}")
        if why:
            problems.append(f"{' '.join(result['argv'])}: {'; '.join(why)}: {text[-300:]}")
    assert not problems, f"{len(problems)} of {len(results)} calls:\n" + "\n".join(problems)
    assert sorted(p.name for p in (ws.patches / TARGET / "vllm").iterdir()) == series


def test_a_target_directory_with_a_hostile_name_is_refused(
    base: hs.Workspace, tmp_path: Path
) -> None:
    ws = copy(base, tmp_path / "checkout")
    shutil.copytree(ws.patches / TARGET, ws.patches / "a b")
    before = hs.snapshot(ws.root)
    for args in (["targets"], ["build", "--all", "--no-audit"], ["lock", "--all"]):
        text = hs.assert_refused(ws.run(*args), "'a b'", RULE)
        assert "patches/a b" in text
        assert ws.run(*args).returncode == 2
    assert hs.snapshot(ws.root) == before


# --------------------------------------------------------------------------- 2. kills

# Where each step of a roll makes its first change: a kill before it is a kill "before the
# step" (the runner kills before the first mutation whose site, the chain of patchwheel frames,
# contains the marker, so the point does not depend on how many changes came before).
STEP_SITES = {
    "rebase": "patchwheel.rebase.run:start",
    "preparing": "patchwheel.rebase.prepare:prepare",  # the rebase's vendor trees
    "replaying": "patchwheel.rebase.replay:replay_project",  # its first patch
    "build": "patchwheel.building.run:build_target",
    "audit": "patchwheel.audit.",
    "verify": "patchwheel.roll.check:verify:",
    "report": "patchwheel.roll.outcome:_write:",
    "bisect": "patchwheel.bisect.run:bisect_target",
}
# The state saved when the rebase has finished (the step the kill hit: "rebased …").
REBASED = "patchwheel.roll.state:save:"


@dataclass
class Probe:
    """An uninterrupted roll of a copy of a built checkout: its mutations and its outcome."""

    base: hs.Workspace
    rolled: hs.Workspace  # the probe's own copy, after its roll
    args: tuple[str, ...]
    events: list[str]  # "N\tdescription\tsite"
    before: dict[str, object]
    after: dict[str, object]
    report: dict
    status: int

    def sites(self) -> list[str]:
        return [line.split("\t")[2] for line in self.events]

    def step_points(self) -> dict[str, str]:
        """Each step's marker, in the order the roll reaches them (for the steps this roll
        runs), with ``rebased``: the state save after the rebase's last change (its frames down
        to the roll's step loop, which a roll that is continued runs too)."""
        sites = self.sites()
        last = max(i for i, site in enumerate(sites) if "patchwheel.rebase." in site)
        markers = dict(STEP_SITES)
        loop = "patchwheel.roll.run:_drive:"
        saved = next((s for s in sites[last:] if REBASED in s and loop in s), None)
        if saved is not None:
            end = saved.index(" <", saved.index(loop))
            markers["rebased"] = saved[saved.index(REBASED) : end]
        found = {
            label: next(i for i, site in enumerate(sites) if marker in site)
            for label, marker in markers.items()
            if any(marker in site for site in sites)
        }
        return {label: markers[label] for label in sorted(found, key=found.__getitem__)}


def probe(base: hs.Workspace, args: tuple[str, ...], scratch: Path) -> Probe:
    ran = copy(base, scratch / "probe")
    result, events = hs.run_killed(
        ran, 0, scratch / "probe.log", "roll", "--target", TARGET, "--verify", "install", *args
    )
    assert result.returncode in (0, 1), hs.failure(result)
    return Probe(
        base,
        ran,
        args,
        events,
        state_of(base.root),
        state_of(ran.root),
        report(ran),
        result.returncode,
    )


@pytest.fixture(scope="module")
def base(world: World, tmp_path_factory: pytest.TempPathFactory) -> hs.Workspace:
    """Target ``nightly`` at N1 with P1 and P2, built: every test of the module copies it."""
    return checkout(world, tmp_path_factory.mktemp("base") / "checkout")


@pytest.fixture(scope="module")
def green(world: World, base: hs.Workspace, tmp_path_factory: pytest.TempPathFactory) -> Probe:
    """N1 → N2: P1 and P2 clean, no drift, verified (exit 0)."""
    made = probe(base, ("--to", world.build(2).version), tmp_path_factory.mktemp("green"))
    assert made.status == 0 and made.report["status"] == "green", made.report
    return made


@pytest.fixture(scope="module")
def drift(world: World, tmp_path_factory: pytest.TempPathFactory) -> Probe:
    """N1 → latest (N6: N7 lacks its CPU wheel) with P2 only: new drift, bisected (exit 1)."""
    scratch = tmp_path_factory.mktemp("drift")
    made = probe(checkout(world, scratch / "checkout", patches=("0002",)), (), scratch)
    assert made.status == 1 and made.report["bisect"]["status"] == "ran", made.report
    return made


def essentials(data: dict) -> dict:
    """What two rolls onto the same revision must agree on."""
    rebase = data.get("rebase") or {}
    build = data.get("build") or {}
    audit = data.get("audit") or {}
    bisect = (data.get("bisect") or {}).get("report") or {}
    return {
        "status": data["status"],
        "new": {k: data["new"].get(k) for k in ("version", "commit", "pins")},
        "classes": {
            p["name"]: [(r["name"], r["class"]) for r in p["patches"]]
            for p in rebase.get("projects", [])
        },
        "build": build.get("status"),
        "wheels": sorted(w["filename"] for w in build.get("wheels", [])),
        "audit": audit.get("status"),
        "findings": sorted(f["symbol"] for f in audit.get("findings", [])),
        "bisect": [f["commit"]["id"] for f in bisect.get("flips", [])],
        "verification": (data.get("verification") or {}).get("status"),
    }


ROLL = ("roll", "--target", TARGET, "--verify", "install")


def kill(
    made: Probe, marker: str, where: Path, args: tuple[str, ...] = ()
) -> tuple[hs.Workspace, list[str]]:
    """Run ``args`` (default: the probe's roll, on a copy of its checkout at ``where``) killed
    before its first mutation at ``marker``."""
    ws = copy(made.base, where) if not args else hs.Workspace(root=where, cache=made.base.cache)
    log = where.parent / f"{where.name}-{len(list(where.parent.glob('*.log')))}.log"
    result, events = hs.run_killed(ws, 0, log, *(args or (*ROLL, *made.args)), kill_site=marker)
    if result.returncode != -9:
        return ws, [f"not killed (exit {result.returncode}: {hs.failure(result)})"]
    # killed at the first mutation there: logged last, or nearly (the audit's threads may log a
    # few more before the kill lands)
    assert any(marker in line.split("\t")[2] for line in events), events[-4:]
    return ws, []


def check_abort(made: Probe, ws: hs.Workspace) -> list[str]:
    undone = ws.run("roll", "--target", TARGET, "--abort")
    if undone.returncode != 0:
        return [f"--abort: {hs.failure(undone)}"]
    now = state_of(ws.root)
    problems = [f"--abort left {d} changed" for d in differences(made.before, now)]
    leftovers = [ws.build / ".work" / TARGET / "roll", ws.vendor / TARGET / ".patchwheel-rebase"]
    return problems + [f"--abort left {p}" for p in leftovers if p.exists()]


def check_finished(
    made: Probe, ws: hs.Workspace, done: subprocess.CompletedProcess[str]
) -> list[str]:
    """A --continue that ran to the end: the uninterrupted roll's outcome."""
    if done.returncode != made.status or "Traceback" in done.stderr:
        return [f"the last --continue: {hs.failure(done)} (expected {made.status})"]
    problems = []
    if essentials(report(ws)) != essentials(made.report):
        problems.append(f"--continue: {essentials(report(ws))}, not {essentials(made.report)}")
    now = state_of(ws.root)
    if made.status == 0:
        problems += [f"--continue left {d} unlike the roll" for d in differences(made.after, now)]
        if (ws.build / ".work" / TARGET / "roll").exists():
            problems.append("a green roll left its state")
        latest = roll(ws, *made.args)
        if latest.returncode != 0 or f"{TARGET} is up to date:" not in hs.flat(latest.stderr):
            problems.append(f"the next roll is not up to date: {hs.failure(latest)}")
    else:  # a person is needed: the roll stays in progress, its pins and series as rolled
        problems += [f"--continue left {d}" for d in differences(made.after, now) if "/" in d]
        if not (ws.build / ".work" / TARGET / "roll" / "state.json").is_file():
            problems.append("a roll that needs a person is no longer in progress")
    return problems


def kill_through(made: Probe, points: dict[str, str], where: Path) -> list[str]:
    """One roll killed before each step in turn: the roll is killed before the first, each
    ``--continue`` before the next, the last ``--continue`` runs to the end. After every kill
    a new roll is refused (one is in progress), ``--skip`` is refused and changes nothing (no
    patch is stopped at), and ``--abort`` on a copy of what the kill left puts everything back
    (a fresh kill where a rebase was in progress: its state names its own checkout)."""
    ws = copy(made.base, where / "chain")
    args: tuple[str, ...] = (*ROLL, *made.args)
    problems: list[str] = []
    skips: list[str] = []  # reported last: the headline is what --continue and --abort did
    for label, marker in points.items():
        _, found = kill(made, marker, ws.root, args)
        if found:
            run = "the roll" if args[-1] != "--continue" else "--continue"
            return [*problems, f"{run}, to be killed before {label}: {found[0]}", *skips]
        args = ("roll", "--target", TARGET, "--continue")
        if (ws.vendor / TARGET / ".patchwheel-rebase").exists():
            other, found = kill(made, marker, where / f"abort-{label}")
        else:
            other, found = copy(ws, where / f"abort-{label}"), []
        problems += [f"killed before {label}: {p}" for p in found or check_abort(made, other)]
        again = roll(ws, *made.args)
        if again.returncode != 2 or "is in progress" not in hs.flat(again.stderr):
            problems.append(f"killed before {label}: a new roll: {hs.failure(again)}")
        if label != "bisect":  # --skip drops a conflicting patch or skips a bisect, nothing else
            before = state_of(ws.root)
            skipped = ws.run("roll", "--target", TARGET, "--skip")
            if skipped.returncode != 2 or "not stopped at a patch" not in hs.flat(skipped.stderr):
                skips.append(f"killed before {label}: --skip: {hs.failure(skipped)}")
            skips += [f"--skip changed {d}" for d in differences(before, state_of(ws.root))]
    done = ws.run(*args)
    return problems + check_finished(made, ws, done) + skips


def test_a_roll_killed_before_each_step_continues_and_aborts(
    green: Probe, drift: Probe, tmp_path: Path
) -> None:
    points = green.step_points()
    problems = kill_through(green, points, tmp_path / "green")
    problems += kill_through(drift, {"bisect": STEP_SITES["bisect"]}, tmp_path / "drift")
    steps = ["rebase", "preparing", "replaying", "rebased", "build", "audit", "verify", "report"]
    if list(points) != steps:  # a step the roll never reached would go untested
        problems.append(f"the roll's steps were {list(points)}, not {steps}")
    assert not problems, "\n".join(p[:800] for p in problems)


def kill_continue_abort(made: Probe, label: str, site: str, where: Path) -> list[str]:
    """Kill the roll before ``site``; --continue to the end on what it left, --abort on a copy
    (or on a second kill where a rebase was in progress). A kill before the roll saved its
    state, or after it removed it, leaves no roll: the checkout is as before it, or as after it
    (then the next roll is up to date), and a new roll ends as the probe's did."""
    ws, problems = kill(made, site, where / "continue")
    if problems:
        return [f"killed before {label} ({site[:160]}): {p[:600]}" for p in problems]
    if not (ws.build / ".work" / TARGET / "roll" / "state.json").is_file():
        now = state_of(ws.root)
        if differences(made.before, now) and differences(made.after, now):
            problems.append(f"no roll in progress, and the checkout changed: {now}")
        fresh = roll(ws, *made.args)
        if not differences(made.after, now):  # it had finished
            if fresh.returncode != 0 or f"{TARGET} is up to date:" not in hs.flat(fresh.stderr):
                problems.append(f"the next roll is not up to date: {hs.failure(fresh)}")
        else:
            problems += check_finished(made, ws, fresh)
        return [f"killed before {label} ({site[:160]}): {p[:600]}" for p in problems]
    if (ws.vendor / TARGET / ".patchwheel-rebase").exists():
        other, problems = kill(made, site, where / "abort")
    else:
        other = copy(ws, where / "abort")
    problems += check_abort(made, other) if not problems else []
    problems += check_finished(made, ws, ws.run("roll", "--target", TARGET, "--continue"))
    return [f"killed before {label} ({site[:160]}): {p[:600]}" for p in problems]


@pytest.mark.slow
@pytest.mark.kill_all  # pytest --kill-all (tests/tiers.py)
def test_a_roll_killed_before_every_mutation_site_continues_and_aborts(
    green: Probe, tmp_path: Path
) -> None:
    # The sites of a roll with warm caches, as every killed roll here is (the probe's own run
    # filled them: a site only a cold run has would never be reached)
    warm = probe(green.base, green.args, tmp_path / "warm")
    assert essentials(warm.report) == essentials(green.report)
    sites = list(dict.fromkeys(warm.sites()))

    def one(numbered: tuple[int, str]) -> tuple[int, list[str]]:
        number, site = numbered
        where = tmp_path / f"site{number}"
        try:
            return number, kill_continue_abort(warm, f"site {number}", site, where)
        finally:
            shutil.rmtree(where, ignore_errors=True)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        found = dict(pool.map(one, enumerate(sites)))
    # A site the parallel runs raced past (two runs storing the same download in the shared
    # cache take different paths) is killed again alone, as the probe ran
    for number in [n for n, p in found.items() if p and "not killed" in p[0]]:
        found[number] = one((number, sites[number]))[1]
    problems = [p for number in sorted(found) for p in found[number]]
    assert not problems, f"{len(problems)} problems over {len(sites)} sites:\n" + "\n".join(
        problems
    )


# --------------------------------------------------------------------------- 3. backwards


def test_a_roll_never_moves_a_pin_backwards_unless_asked(
    world: World, green: Probe, tmp_path: Path
) -> None:
    ws = copy(green.rolled, tmp_path / "checkout")  # rolled onto N2, green
    n1, n2 = world.build(1), world.build(2)
    same = roll(ws, "--to", n2.version)
    assert same.returncode == 0 and f"{TARGET} is up to date:" in hs.flat(same.stderr)
    before = state_of(ws.root)

    older = roll(ws, "--to", n1.version)
    text = hs.assert_refused(older, n1.version, n2.version, "--allow-downgrade")
    assert older.returncode == 2 and "older than the pin" in text
    assert differences(before, state_of(ws.root)) == []

    nightly = world.channel.root / "nightly"
    newest = world.channel.builds[-1]
    shutil.rmtree(nightly)
    world.channel._pages(nightly, n1, ("", "cpu"))  # the channel rolled back to N1
    try:
        stays = roll(ws)
        assert stays.returncode == 0, hs.failure(stays)
        said = hs.flat(stays.stderr)
        assert f"the channel's newest build, {n1.version}" in said and "the pin stays" in said
        assert f"{TARGET} is up to date" in said
        assert report(ws)["status"] == "up-to-date"
        assert report(ws)["new"]["newest"] == n1.version
        assert differences(before, state_of(ws.root)) == []
    finally:
        shutil.rmtree(nightly)
        world.channel._pages(nightly, newest, tuple(newest.wheels))

    back = roll(ws, "--to", n1.version, "--allow-downgrade")
    assert back.returncode == 0, hs.failure(back)
    assert f"@{n1.commit}" in (ws.patches / TARGET / "target.toml").read_text()
    assert report(ws)["status"] == "green"


def test_up_to_date_means_built_audited_and_verified_at_the_pins(
    world: World, base: hs.Workspace, tmp_path: Path
) -> None:
    """A target already at the channel's revision, but never checked there (or built at other
    inputs since), is not "up to date": the roll builds and verifies it."""
    ws = copy(base, tmp_path / "checkout")
    n1 = world.build(1)
    first = roll(ws, "--to", n1.version)
    assert first.returncode == 0, hs.failure(first)
    assert f"{TARGET} is up to date:" not in hs.flat(first.stderr)
    assert report(ws)["status"] == "green" and report(ws)["moved"] is False
    assert report(ws)["verification"]["status"] == "passed"
    again = roll(ws, "--to", n1.version)
    assert again.returncode == 0 and f"{TARGET} is up to date:" in hs.flat(again.stderr)
    # the series changes: build/ is at other inputs, so the roll checks the pins again
    series = (ws.patches / TARGET / "vllm") / "series"
    series.write_text(series.read_text().splitlines()[0] + "\n")
    changed = roll(ws, "--to", n1.version)
    assert changed.returncode == 0, hs.failure(changed)
    assert f"{TARGET} is up to date:" not in hs.flat(changed.stderr)
    assert report(ws)["build"]["up-to-date"] is False


# --------------------------------------------------------------------------- 4. channel answers


def test_hostile_channel_answers_are_errors_naming_them(
    world: World, base: hs.Workspace, tmp_path: Path
) -> None:
    ws = copy(base, tmp_path / "checkout")
    n2 = world.build(2)
    before = state_of(ws.root)

    deep = world.channel.root / n2.commit / "vllm" / "index.json"
    deep.write_bytes(b"[" * 100_000)
    try:
        nested = roll(ws, "--to", n2.version)
    finally:
        deep.unlink()
    text = hs.assert_refused(nested, f"{n2.commit}/vllm/", "levels deep")
    assert nested.returncode == 2, text

    other = cs.ChannelServer(world.channel.root)
    wheel = n2.wheels["cpu"].name
    path = f"/{n2.commit}/{wheel}"
    with other.running():
        world.server.redirects[path] = other.url + urllib.parse.quote(path.lstrip("/"))
        try:
            moved = roll(ws, "--to", n2.version)
        finally:
            del world.server.redirects[path]
    text = hs.assert_refused(moved, "redirects to", other.url, "outside the channel")
    assert moved.returncode == 2 and other.requests == [], text
    assert differences(before, state_of(ws.root)) == []
    assert not re.search(r"\bTraceback\b", moved.stderr + nested.stderr)
