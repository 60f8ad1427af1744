"""Roll a target onto its channel's newest (or a given) revision, in one command, resumably.

1. **discover** (:mod:`patchwheel.roll.discover`): the revision, its full commit, its wheels;
   :mod:`patchwheel.roll.position` says whether it is newer than the pin. A roll never moves a
   pin backwards unless asked (``--to`` an older revision needs ``allow_downgrade``); when the
   channel's newest is older than the pin, the pin stays and the roll checks the pins it has.
2. **record** (:mod:`patchwheel.roll.undo`): each vendor tree's state and ``patches/<target>``
   are kept aside, then the roll's state is saved (:mod:`patchwheel.roll.state`).
3. **rebase** (:mod:`patchwheel.rebase`): the series replayed onto the new pins; patches whose
   ``Drop-When`` holds or whose change is upstream are dropped; remembered resolutions answer
   known conflicts; a new conflict stops the roll (exit status 1).
4. **build, audit, bisect, verify** (:mod:`patchwheel.roll.check`).
5. **report**: ``build/<target>/roll.md`` and ``roll.json`` (and the rebase's own report).

The state records the step reached after each step, so a roll stopped or killed at any step
goes on with ``--continue`` from there; ``--skip`` drops the patch a conflict stopped at (or
skips the bisect); ``--abort`` puts ``target.toml``, ``target.lock``, the series and the vendor
trees back as they were before the roll. A roll stays in progress until it is green or aborted:
one that needs a person after its rebase (drift, a failed build or verification) is checked
again by ``--continue`` once the fix is in.

Outcomes: ``green`` (exit 0), ``up-to-date`` (exit 0: the build, audit and verification of the
target's inputs are green already), ``needs-person`` (exit 1: the report and the console say
what to run next). Errors of the roll itself (configuration, network) raise; the command line
makes them exit 2, and the roll stays where it was.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from patchwheel import console, rebase
from patchwheel.config.lock import LockedPin, locked_pins
from patchwheel.config.targets import load_target
from patchwheel.errors import ConfigError, PatchwheelError
from patchwheel.index import outputs
from patchwheel.rebase import replay
from patchwheel.rebase.finish import REPORT_JSON as REBASE_JSON
from patchwheel.rebase.finish import REPORT_MD as REBASE_MD
from patchwheel.rebase.finish import report_files
from patchwheel.rebase.state import load as load_rebase
from patchwheel.roll import check, undo
from patchwheel.roll import report as roll_report
from patchwheel.roll import state as roll_state
from patchwheel.roll.check import Checks
from patchwheel.roll.discover import RollPlan, plan_roll
from patchwheel.roll.position import (
    Position,
    describe_pins,
    pinned_version,
    position,
    verified_report,
)
from patchwheel.roll.state import RollState, Verify
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.channel import LATEST
from patchwheel.workspace import Workspace, check_target_name

Status = Literal["green", "needs-person", "up-to-date", "aborted"]
Action = Literal["start", "continue", "skip"]


@dataclass
class RollOutcome:
    """What a roll command did."""

    status: Status
    target: str
    output: str
    report: dict[str, Any] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)

    @property
    def exit_status(self) -> int:
        """0 green (or nothing to do), 1 a person is needed."""
        return 1 if self.status == "needs-person" else 0


def start(
    workspace: Workspace,
    cache: Cache,
    target_name: str,
    *,
    to: str | None = None,
    new_target: str | None = None,
    verify: Verify = "extraction",
    allow_downgrade: bool = False,
) -> RollOutcome:
    """Roll ``target_name`` onto its channel's newest revision (or ``to``)."""
    began = time.monotonic()
    check_target_name(target_name)
    if new_target is not None:
        check_target_name(new_target, "--new-target")
    _refuse_in_progress(workspace, target_name)
    target = load_target(workspace.patches, target_name)
    lock = locked_pins(target)
    plan = plan_roll(target, lock, cache, to=to)
    where = position(plan, lock, cache)
    moved = _moves(plan, lock, where, to=to, allow_downgrade=allow_downgrade)
    state = _new_state(plan, lock, target_name, new_target, verify, moved)
    if where == "older" and not moved:
        state.new["newest"] = plan.build.version  # the channel's newest, older than the pin
    state.add_time("discover", time.monotonic() - began)
    if not moved:
        verified = verified_report(workspace, target_name)
        if verified is not None:
            return _up_to_date(workspace, state, verified)
        if new_target:
            console.status(f"[yellow]note:[/] {new_target} is not written: the pins do not move")
        console.status(
            f"{target_name}: not built, audited and verified at its pins yet: checking them"
        )
    undo.record(workspace, state, target)
    roll_state.save(workspace, state)
    return _drive(workspace, cache, state, "start")


def resume(workspace: Workspace, cache: Cache, target_name: str) -> RollOutcome:
    """``--continue``: go on from the step the roll reached (after resolving a conflict, after
    fixing what a check found, or after the roll was killed)."""
    return _drive(workspace, cache, _find(workspace, target_name), "continue")


def skip(workspace: Workspace, cache: Cache, target_name: str) -> RollOutcome:
    """``--skip``: drop the patch the rebase stopped at (or skip the bisect) and go on."""
    state = _find(workspace, target_name)
    current = load_rebase(workspace.vendor, state.target) if state.step == "rebase" else None
    stopped = current is not None and any(p.stopped for p in current.projects)
    if not stopped and state.step != "bisect":
        base = f"nox -s roll -- --target {state.target}"
        where = "its rebase" if state.step == "rebase" else f"its {state.step} step"
        raise ConfigError(
            f"the roll of {state.target} is at {where}, not stopped at a patch: --skip drops "
            f"the patch a conflict stopped at (or skips the bisect); `{base} --continue` goes "
            f"on, `{base} --abort` undoes the roll"
        )
    return _drive(workspace, cache, state, "skip")


def abort(workspace: Workspace, target_name: str) -> RollOutcome:
    """``--abort``: the target, its lock, its series and vendor trees as before the roll."""
    state = _find(workspace, target_name)
    if load_rebase(workspace.vendor, state.target) is not None:
        rebase.abort(workspace, state.target)
    undo.restore(workspace, state)
    roll_state.remove(workspace, state.target)
    console.status(
        f"[green]roll of {state.target} aborted[/]: patches/{state.target} (target.toml, "
        "target.lock, the series) and its vendor trees are as before the roll"
        + (
            f"; patches/{state.output} and vendor/{state.output} removed"
            if state.new_target
            else ""
        )
    )
    if (workspace.build / state.output).is_symlink():
        console.status(
            f"build/{state.output} still holds what the roll built: "
            f"`nox -s build -- --target {state.target}` builds the restored pins"
        )
    return RollOutcome("aborted", state.target, state.output)


# --------------------------------------------------------------------------- steps


def _drive(workspace: Workspace, cache: Cache, state: RollState, action: Action) -> RollOutcome:
    """Run the roll's steps from the one it reached; the state is saved after each."""
    while state.step != "report":
        if state.step == "rebase":
            stopped = _rebase(workspace, cache, state, action)
            if stopped is not None:
                return stopped
            state.step = "build"
        elif state.step == "build":
            state.step = check.build_step(workspace, cache, state)
        elif state.step == "bisect":
            if action == "skip":
                state.step = check.skip_bisect(state)
            else:
                state.step = check.bisect_step(workspace, cache, state)
        else:
            state.step = check.verify_step(workspace, state)
        action = "continue"
        roll_state.save(workspace, state)
    return _report(workspace, state)


def _rebase(
    workspace: Workspace, cache: Cache, state: RollState, action: Action
) -> RollOutcome | None:
    """The rebase step: started, resumed or skipped on; the outcome when it stops."""
    began = time.monotonic()
    current = load_rebase(workspace.vendor, state.target)
    if current is not None and current.phase == "prepare":
        console.status("the rebase was interrupted while preparing: undoing it, starting again")
        rebase.abort(workspace, state.target)
        current = None
    if current is not None:
        step = rebase.skip if action == "skip" else rebase.resume
        outcome = step(workspace, cache, state.target)
    elif _rebased(workspace, state):  # finished before the roll could say so
        outcome = _finished_rebase(workspace, state)
    else:
        try:
            outcome = rebase.start(
                workspace,
                cache,
                state.target,
                [],
                new_target=state.output if state.new_target else None,
                pins=state.key_pins(),
                versions=state.versions,
            )
        except BaseException:
            if load_rebase(workspace.vendor, state.target) is None:
                roll_state.remove(workspace, state.target)  # the rebase undid itself: no roll
            raise
    state.add_time("rebase", time.monotonic() - began)
    if outcome.stop is not None:
        roll_state.save(workspace, state)
        return _stopped(workspace, state, outcome.stop)
    state.rebase = outcome.report or None
    state.rebase_markdown = outcome.markdown
    return None


def _rebased(workspace: Workspace, state: RollState) -> bool:
    """Whether the output target holds the new pins (its rebase finished)."""
    try:
        lock = locked_pins(load_target(workspace.patches, state.output))
    except PatchwheelError:
        return False
    return all(key in lock and lock[key].pin == pin.pin for key, pin in state.key_pins().items())


def _finished_rebase(workspace: Workspace, state: RollState) -> rebase.Outcome:
    """A rebase that finished before the roll recorded it: its report from build/<output>."""
    store = outputs.current(workspace.build, state.output)
    data: dict[str, Any] = {}
    text = ""
    if store is not None and (store / REBASE_JSON).is_file():
        try:
            data = json.loads((store / REBASE_JSON).read_text("utf-8"))
            text = (store / REBASE_MD).read_text("utf-8")
        except (ValueError, OSError, RecursionError):
            data, text = {}, ""
    return rebase.Outcome("done", state.target, state.output, report=data, markdown=text)


def _report(workspace: Workspace, state: RollState) -> RollOutcome:
    """Write roll.md / roll.json; a green roll ends, any other stays to be continued."""
    checks = Checks.of(state)
    status: Status = "green" if checks.green else "needs-person"
    next_steps = [] if checks.green else _next_after_checks(state, checks)
    data = roll_report.build_report(
        state, status=status, rebase=state.rebase, checks=checks, next_steps=next_steps
    )
    extra = report_files(state.rebase, state.rebase_markdown) if state.rebase else {}
    files = _write(workspace, state.output, data, extra)
    if checks.green:
        roll_state.remove(workspace, state.target)
    else:
        state.step = "build"  # --continue checks again once a person has fixed what is named
        roll_state.save(workspace, state)
    _say(status, state, files, next_steps)
    return RollOutcome(status, state.target, state.output, data, files, next_steps)


def _up_to_date(workspace: Workspace, state: RollState, verified: dict[str, Any]) -> RollOutcome:
    checks = Checks(
        build=dict(verified.get("build") or {}),
        audit=dict(verified.get("audit") or {}),
        bisect=verified.get("bisect"),
        verification=dict(verified.get("verification") or {}),
    )
    data = roll_report.build_report(state, status="up-to-date", rebase=None, checks=checks)
    files = _write(workspace, state.target, data, {})
    newest = state.new.get("newest")
    console.status(
        f"[green]{state.target} is up to date[/]: at {state.project} {_revision(state)}, "
        "built, audited and verified at its pins"
        + (f"; the channel's newest build, {newest}, is older than the pin" if newest else "")
    )
    return RollOutcome("up-to-date", state.target, state.target, data, files)


def _stopped(workspace: Workspace, state: RollState, stop: replay.Stop) -> RollOutcome:
    record = stop.patch
    files = [c.path for c in stop.conflicts] or record.files
    base = f"nox -s roll -- --target {state.target}"
    next_steps = [
        f"resolve {', '.join(files)} in {stop.vendor}, then: "
        f"git -C {stop.vendor} add {' '.join(files)}",
        f"{base} --continue",
        f"{base} --skip    (drop {record.name} from the series instead)",
        f"{base} --abort   (undo the roll)",
    ]
    detail = {
        "project": stop.project,
        "patch": record.name,
        "subject": stop.subject,
        "class": record.klass,
        "reason": record.reason,
        "vendor": str(stop.vendor),
        "conflicts": [
            {"path": c.path, "kind": c.kind, "regions": c.regions, "hunks": c.hunks}
            for c in stop.conflicts
        ],
    }
    progress = _progress(workspace, state)
    data = roll_report.build_report(
        state, status="needs-person", rebase=progress, stop=detail, next_steps=next_steps
    )
    out = _write(workspace, state.output, data, {})
    _say("needs-person", state, out, next_steps)
    return RollOutcome("needs-person", state.target, state.output, data, out, next_steps)


def _progress(workspace: Workspace, state: RollState) -> dict[str, Any] | None:
    """The classes so far of a rebase stopped at a conflict, shaped like its report."""
    current = load_rebase(workspace.vendor, state.target)
    if current is None:
        return None
    projects = []
    for project in current.projects:
        rows = [
            {
                "name": p.name,
                "class": p.klass or "pending",
                "reason": p.reason,
                "resolution": p.resolution or ("dropped" if p.dropped else "automatic"),
                "kept": not p.dropped,
                "touches-upstream-changes": p.touched_upstream,
                "remembered": p.remembered,
            }
            for p in project.patches
        ]
        projects.append({"name": project.name, "replayed": project.affected, "patches": rows})
    return {"projects": projects, "seconds": round(current.seconds, 2)}


def _next_after_checks(state: RollState, checks: Checks) -> list[str]:
    name = state.output
    base = f"nox -s roll -- --target {state.target}"
    undo_step = f"{base} --abort   (undo the roll: the pins, the series and vendor/ as before)"
    if checks.build.get("status") != "built":
        return [f"fix what the build names (see roll.md), then: {base} --continue", undo_step]
    if checks.audit.get("status") == "findings":
        return [
            f"answer the drift in vendor/{name}/speculators (commit the fix), then: "
            f"patchwheel export --target {name} --project speculators",
            f"{base} --continue   (builds, audits against the old pins and verifies again)",
            undo_step,
        ]
    if checks.audit.get("status") == "error":
        return [
            f"the audit could not run ({checks.audit.get('error')}): fix that, then: "
            f"{base} --continue",
            undo_step,
        ]
    report = "verify-install.json" if state.verify == "install" else "verify-cpu.json"
    return [
        f"read build/{name}/{report}, fix the series, then: {base} --continue",
        undo_step,
    ]


def _write(
    workspace: Workspace, name: str, data: dict[str, Any], extra: dict[str, bytes]
) -> list[Path]:
    files = {
        **extra,
        roll_report.REPORT_MD: roll_report.markdown(data).encode("utf-8"),
        roll_report.REPORT_JSON: (json.dumps(data, indent=2) + "\n").encode("utf-8"),
    }
    written = outputs.add_files(workspace.build, name, files)
    return [p for p in written if p.name in (roll_report.REPORT_MD, roll_report.REPORT_JSON)]


def _revision(state: RollState) -> str:
    """The revision rolled onto, in words: its version and commit (what is known of them)."""
    version, commit = state.new.get("version"), str(state.new.get("commit") or "")[:12]
    if version and commit:
        return f"{version} ({commit})"
    return str(version or commit or "?")


def _say(status: str, state: RollState, files: list[Path], next_steps: list[str]) -> None:
    colour = "green" if status == "green" else "red"
    console.status(
        f"[{colour}]roll {status}[/]: {state.target} → {state.output} at {state.project} "
        f"{_revision(state)}"
    )
    for path in files:
        console.status(f"report: {path}")
    if next_steps:
        console.status("next:")
        for step in next_steps:
            console.status(f"  {step}")


# --------------------------------------------------------------------------- start


def _moves(
    plan: RollPlan,
    lock: dict[str, LockedPin],
    where: Position,
    *,
    to: str | None,
    allow_downgrade: bool,
) -> bool:
    """Whether the roll moves the pins: onto a newer revision, or back on purpose."""
    if where != "older":
        return where == "newer"
    entry = lock[plan.project.source.key]
    pinned = pinned_version(entry)
    pin = f"{pinned or entry.pin}" + (f" ({entry.commit[:12]})" if entry.commit else "")
    found = f"{plan.build.version} ({plan.build.commit[:12]})"
    if to is None or to == LATEST:
        console.status(
            f"{plan.project.name}: the channel's newest build, {found}, is older than the pin "
            f"{pin}: the pin stays"
        )
        return False
    if not allow_downgrade:
        raise ConfigError(
            f"--to {to}: {found} is older than the pin {pin}; a roll never moves a pin "
            "backwards unless asked: add --allow-downgrade to move it back on purpose"
        )
    console.status(f"[yellow]moving {plan.project.name} back[/] from {pin} to {found}, as asked")
    return True


def _new_state(
    plan: RollPlan,
    lock: dict[str, LockedPin],
    target: str,
    new_target: str | None,
    verify: Verify,
    moved: bool,
) -> RollState:
    project = plan.project.name
    channel = {"index": plan.channel.index, "repository": plan.channel.repository}
    described = (
        plan.describe() if moved else describe_pins(lock[plan.project.source.key], lock, project)
    )
    return RollState(
        target=target,
        output=(new_target or target) if moved else target,
        project=project,
        verify=verify,
        started=datetime.now(UTC).isoformat(timespec="seconds"),
        old={key: asdict(entry) for key, entry in lock.items()},
        new={**described, "channel": channel},
        step="rebase" if moved else "build",
        moved=moved,
        pins={key: asdict(pin) for key, pin in plan.pins.items()} if moved else {},
        versions=dict(plan.versions) if moved else {},
    )


def _refuse_in_progress(workspace: Workspace, target_name: str) -> None:
    if roll_state.leftover(workspace, target_name):
        roll_state.remove(workspace, target_name)  # killed while it started: nothing changed
    state = roll_state.load(workspace, target_name)
    if state is not None:
        base = f"nox -s roll -- --target {target_name}"
        raise ConfigError(
            f"a roll of {target_name} is in progress (at its {state.step} step): "
            f"`{base} --continue` to finish it (after resolving or fixing what roll.md names), "
            f"`{base} --skip` at a conflict, or `{base} --abort` to undo it"
        )
    if load_rebase(workspace.vendor, target_name) is not None:
        raise ConfigError(
            f"a rebase of {target_name} is in progress: finish it (`nox -s rebase -- --target "
            f"{target_name} --continue`) or undo it (`--abort`) before rolling"
        )


def _find(workspace: Workspace, target_name: str) -> RollState:
    check_target_name(target_name)
    state = roll_state.load(workspace, target_name)
    if state is None:
        raise ConfigError(
            f"no roll of {target_name} is in progress (start one: nox -s roll -- --target "
            f"{target_name})"
        )
    return state
