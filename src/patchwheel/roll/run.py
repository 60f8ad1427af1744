"""Roll a target onto its channel's newest (or a given) revision, in one command, resumably.

1. **discover** (:mod:`patchwheel.roll.discover`): the revision (a nightly channel's build, or
   a release on the package index), its wheels, what its missing variants get;
   :mod:`patchwheel.roll.position` says whether it is newer than the pin. A roll never moves a
   pin backwards unless asked (``--to`` an older revision needs ``allow_downgrade``); when the
   channel's newest is older than the pin, the pin stays and the roll checks the pins it has.
2. **record** (:mod:`patchwheel.roll.undo`): each vendor tree's state and ``patches/<target>``
   are kept aside, then the roll's state is saved (:mod:`patchwheel.roll.state`).
3. **rebase** (:mod:`patchwheel.rebase`): the series replayed onto the new pins; patches whose
   ``Drop-When`` holds or whose change is upstream are dropped; remembered resolutions answer
   known conflicts; a new conflict stops the roll (exit status 1).
4. **build, audit, bisect, verify** (:mod:`patchwheel.roll.check`).
5. **report** (:mod:`patchwheel.roll.outcome`): ``build/<target>/roll.md`` and ``roll.json``
   (and the rebase's own report).

The state records the step reached after each step, so a roll stopped or killed at any step
goes on with ``--continue`` from there; ``--skip`` drops the patch a conflict stopped at (or
skips the bisect); ``--abort`` puts ``target.toml``, ``target.lock``, the series and the vendor
trees back as they were before the roll. A roll stays in progress until it is green or aborted:
one that needs a person after its rebase (drift, a failed build or verification) is checked
again by ``--continue`` once the fix is in. One whose checks are green but which dropped a
variant with no declared ``missing`` policy asks a person: ``--abort`` and the printed command
keep the variant instead; ``--continue`` accepts the drop.

Outcomes: ``green`` (exit 0), ``up-to-date`` (exit 0: the build, audit and verification of the
target's inputs are green already), ``needs-person`` (exit 1: the report and the console say
what to run next). Errors of the roll itself (configuration, network) raise; the command line
makes them exit 2, and the roll stays where it was.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, Literal

from patchwheel import console, rebase
from patchwheel.config.lock import LockedPin, locked_pins
from patchwheel.config.targets import MissingPolicy, load_target
from patchwheel.errors import ConfigError, PatchwheelError
from patchwheel.index import outputs
from patchwheel.rebase.finish import REPORT_JSON as REBASE_JSON
from patchwheel.rebase.finish import REPORT_MD as REBASE_MD
from patchwheel.rebase.missing import from_dict
from patchwheel.rebase.state import load as load_rebase
from patchwheel.rebase.state import remove_leftover
from patchwheel.roll import check, outcome, undo
from patchwheel.roll import state as roll_state
from patchwheel.roll.discover import RollPlan, plan_roll, roll_command
from patchwheel.roll.position import (
    Position,
    describe_pins,
    pinned_version,
    position,
    verified_report,
)
from patchwheel.roll.report import newest_words
from patchwheel.roll.state import RollState, Verify
from patchwheel.upstream.cache import Cache
from patchwheel.upstream.channel import LATEST
from patchwheel.workspace import Workspace, check_name, check_target_name

Action = Literal["start", "continue", "skip"]


def start(
    workspace: Workspace,
    cache: Cache,
    target_name: str,
    *,
    to: str | None = None,
    new_target: str | None = None,
    verify: Verify = "extraction",
    pre: bool = False,
    project: str | None = None,
    missing: Mapping[str, MissingPolicy] | None = None,
    allow_downgrade: bool = False,
) -> outcome.RollOutcome:
    """Roll ``target_name`` onto its channel's newest revision (or ``to``); ``pre``: a release
    channel's pre-releases count; ``missing``: answers for variants without a new wheel."""
    began = time.monotonic()
    check_target_name(target_name)
    if new_target is not None:
        check_target_name(new_target, "--new-target")
    if project is not None:
        check_name(project, "--project")
    for key in missing or {}:
        for part in key.split(":"):
            check_name(part, "--missing: variant")
    _refuse_in_progress(workspace, target_name)
    target = load_target(workspace.patches, target_name)
    lock = locked_pins(target)
    plan = plan_roll(target, lock, cache, to=to, pre=pre, project=project, missing=missing)
    where = position(plan, lock, cache)
    moved = _moves(plan, lock, where, to=to, allow_downgrade=allow_downgrade)
    state = _new_state(plan, lock, target_name, new_target, verify, moved)
    if moved:
        state.rerun = roll_command(
            target_name,
            version=plan.version,
            new_target=new_target,
            project=project,
            verify=verify,
            pre=pre,
            missing=missing or {},
            allow_downgrade=where == "older",
        )
    if where == "older" and not moved:
        state.new["newest"] = plan.version  # the channel's newest, older than the pin
    state.add_time("discover", time.monotonic() - began)
    if not moved:
        verified = verified_report(workspace, target_name)
        if verified is not None:
            return outcome.up_to_date(workspace, state, verified)
        if new_target:
            console.status(f"[yellow]note:[/] {new_target} is not written: the pins do not move")
        console.status(
            f"{target_name}: not built, audited and verified at its pins yet: checking them"
        )
    undo.record(workspace, state, target)
    roll_state.save(workspace, state)
    return _drive(workspace, cache, state, "start")


def resume(workspace: Workspace, cache: Cache, target_name: str) -> outcome.RollOutcome:
    """``--continue``: go on from the step the roll reached (after resolving a conflict, after
    fixing what a check found, or after the roll was killed)."""
    return _drive(workspace, cache, _find(workspace, target_name), "continue")


def skip(workspace: Workspace, cache: Cache, target_name: str) -> outcome.RollOutcome:
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


def abort(workspace: Workspace, target_name: str) -> outcome.RollOutcome:
    """``--abort``: the target, its lock, its series and vendor trees as before the roll."""
    state = _find(workspace, target_name)
    if load_rebase(workspace.vendor, state.target) is not None:
        rebase.abort(workspace, state.target)
    else:  # a rebase killed as it started or ended leaves its folder without a state
        remove_leftover(workspace.vendor, state.target)
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
    return outcome.RollOutcome("aborted", state.target, state.output)


# --------------------------------------------------------------------------- steps


def _drive(
    workspace: Workspace, cache: Cache, state: RollState, action: Action
) -> outcome.RollOutcome:
    """Run the roll's steps from the one it reached; the state is saved after each."""
    if state.step == "report" and action == "continue" and state.asked:
        state.accepted = True  # the person accepts the variants dropped without a policy
        dropped = [m["variant"] for m in state.new.get("missing", []) if m.get("asks")]
        state.new.setdefault("notes", []).append(
            f"variant(s) {', '.join(dropped)} dropped without a `missing` policy: the drop was "
            "accepted with --continue"
        )
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
    return outcome.finish(workspace, state)


def _rebase(
    workspace: Workspace, cache: Cache, state: RollState, action: Action
) -> outcome.RollOutcome | None:
    """The rebase step: started, resumed or skipped on; the outcome when it stops."""
    began = time.monotonic()
    current = load_rebase(workspace.vendor, state.target)
    if current is not None and current.phase == "prepare":
        console.status("the rebase was interrupted while preparing: undoing it, starting again")
        rebase.abort(workspace, state.target)
        current = None
    if current is not None:
        step = rebase.skip if action == "skip" else rebase.resume
        result = step(workspace, cache, state.target)
    elif _rebased(workspace, state):  # finished before the roll could say so
        result = _finished_rebase(workspace, state)
    else:
        try:
            result = rebase.start(
                workspace,
                cache,
                state.target,
                [],
                new_target=state.output if state.new_target else None,
                pins=state.key_pins(),
                versions=state.versions,
                missing_variants=[from_dict(m) for m in state.new.get("missing", [])],
                rerun=state.rerun,
                undo_command=f"nox -s roll -- --target {state.target} --abort",
            )
        except BaseException:
            if load_rebase(workspace.vendor, state.target) is None:
                roll_state.remove(workspace, state.target)  # the rebase undid itself: no roll
            raise
    state.add_time("rebase", time.monotonic() - began)
    if result.stop is not None:
        roll_state.save(workspace, state)
        return outcome.stopped(workspace, state, result.stop)
    state.rebase = result.report or None
    state.rebase_markdown = result.markdown
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
    found = plan.version + (f" ({plan.commit[:12]})" if plan.commit else "")
    if to is None or to == LATEST:
        console.status(
            f"{plan.project.name}: {newest_words(plan.describe(), found)}, is older than the pin "
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
    described = (
        plan.describe() if moved else describe_pins(lock[plan.project.source.key], lock, project)
    )
    channel = plan.describe()["channel"]
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
