"""Roll a target onto its channel's newest (or a given) revision, in one command.

1. **discover** (:mod:`patchwheel.roll.discover`): the revision, its full commit, its wheels.
2. **rebase** (:mod:`patchwheel.rebase`): the series replayed onto the new pins; patches whose
   ``Drop-When`` holds or whose change is upstream are dropped; remembered resolutions answer
   known conflicts; a new conflict stops the roll (exit status 1) with the commands that resume
   it (``--continue`` after resolving, ``--skip``, ``--abort``).
3. **build, audit, bisect, verify** (:mod:`patchwheel.roll.check`).
4. **report**: ``build/<target>/roll.md`` and ``roll.json`` (and the rebase's own report).

Outcomes: ``green`` (exit 0), ``up-to-date`` (exit 0), ``needs-person`` (exit 1: a conflict,
new drift, a failed build or verification — the report and the console say what to run next).
Errors of the roll itself (configuration, network) raise; the command line makes them exit 2.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from rich.markup import escape

from patchwheel import console, rebase
from patchwheel.config.lock import locked_pins
from patchwheel.config.targets import MissingPolicy, load_target
from patchwheel.errors import ConfigError
from patchwheel.index import outputs
from patchwheel.rebase import replay
from patchwheel.rebase.finish import report_files
from patchwheel.rebase.state import load as load_rebase
from patchwheel.roll import report as roll_report
from patchwheel.roll import state as roll_state
from patchwheel.roll.check import Checks, run_checks
from patchwheel.roll.discover import plan_roll, roll_command
from patchwheel.roll.state import RollState, Verify
from patchwheel.upstream.cache import Cache
from patchwheel.workspace import Workspace

Status = Literal["green", "needs-person", "up-to-date", "aborted"]


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
    pre: bool = False,
    project: str | None = None,
    missing: Mapping[str, MissingPolicy] | None = None,
) -> RollOutcome:
    """Roll ``target_name`` onto its channel's newest revision (or ``to``); ``pre``: a release
    channel's pre-releases count; ``missing``: answers for variants without a new wheel."""
    began = time.monotonic()
    _refuse_in_progress(workspace, target_name)
    target = load_target(workspace.patches, target_name)
    lock = locked_pins(target)
    plan = plan_roll(target, lock, cache, to=to, pre=pre, project=project, missing=missing)
    output = new_target or target_name
    state = RollState(
        target=target_name,
        output=output,
        project=plan.project.name,
        verify=verify,
        started=datetime.now(UTC).isoformat(timespec="seconds"),
        old={key: asdict(entry) for key, entry in lock.items()},
        new=plan.describe(),
    )
    state.add_time("discover", time.monotonic() - began)
    if plan.up_to_date(lock):
        return _up_to_date(workspace, state)
    roll_state.save(workspace, state)
    began = time.monotonic()
    try:
        outcome = rebase.start(
            workspace,
            cache,
            target_name,
            [],
            new_target=new_target,
            pins=plan.pins,
            versions=plan.versions,
            missing_variants=plan.missing,
            rerun=roll_command(
                target_name,
                version=plan.version,
                new_target=new_target,
                project=project,
                verify=verify,
                pre=pre,
                missing=missing or {},
            ),
        )
    except BaseException:
        roll_state.remove(workspace, target_name)  # the rebase undid itself
        raise
    return _after_rebase(workspace, cache, state, outcome, began)


def resume(workspace: Workspace, cache: Cache, target_name: str) -> RollOutcome:
    """``--continue``: take the resolution of the stopped patch, finish the rebase, go on."""
    state = _find(workspace, target_name)
    began = time.monotonic()
    outcome = rebase.resume(workspace, cache, state.target)
    return _after_rebase(workspace, cache, state, outcome, began)


def skip(workspace: Workspace, cache: Cache, target_name: str) -> RollOutcome:
    """``--skip``: drop the stopped patch from the series and go on."""
    state = _find(workspace, target_name)
    began = time.monotonic()
    outcome = rebase.skip(workspace, cache, state.target)
    return _after_rebase(workspace, cache, state, outcome, began)


def abort(workspace: Workspace, target_name: str) -> RollOutcome:
    """``--abort``: undo the roll's rebase; the target, its lock and vendor trees as before."""
    state = _find(workspace, target_name)
    if load_rebase(workspace.vendor, state.target) is not None:
        rebase.abort(workspace, state.target)
    roll_state.remove(workspace, state.target)
    console.status(f"[green]roll of {state.target} aborted[/]")
    return RollOutcome("aborted", state.target, state.output)


# --------------------------------------------------------------------------- steps


def _after_rebase(
    workspace: Workspace,
    cache: Cache,
    state: RollState,
    outcome: rebase.Outcome,
    began: float,
) -> RollOutcome:
    state.add_time("rebase", time.monotonic() - began)
    if outcome.stop is not None:
        roll_state.save(workspace, state)
        return _stopped(workspace, state, outcome.stop)
    if outcome.status == "unchanged":
        roll_state.remove(workspace, state.target)
        return _up_to_date(workspace, state)
    checks = run_checks(workspace, cache, state)
    asked = list((outcome.report or {}).get("next") or [])  # variants dropped by default
    status: Status = "green" if checks.green and not asked else "needs-person"
    next_steps = asked + ([] if checks.green else _next_after_checks(state, checks))
    data = roll_report.build_report(
        state, status=status, rebase=outcome.report, checks=checks, next_steps=next_steps
    )
    extra = report_files(outcome.report, outcome.markdown) if outcome.report else {}
    files = _write(workspace, state.output, data, extra)
    roll_state.remove(workspace, state.target)
    _say(status, state, files, next_steps)
    return RollOutcome(status, state.target, state.output, data, files, next_steps)


def _up_to_date(workspace: Workspace, state: RollState) -> RollOutcome:
    data = roll_report.build_report(state, status="up-to-date", rebase=None)
    files = _write(workspace, state.target, data, {})
    console.status(
        f"[green]{state.target} is up to date[/]: already at {state.project} "
        f"{state.new.get('version')} ({str(state.new.get('commit', ''))[:12]})"
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
    if checks.build.get("status") != "built":
        return [
            f"fix what the build names (see roll.md), then: nox -s build -- --target {name}",
            f"nox -s verify -- --target {name}",
        ]
    if checks.audit.get("status") == "findings":
        return [
            f"answer the drift in vendor/{name}/speculators (commit the fix), then: "
            f"patchwheel export --target {name} --project speculators",
            f"nox -s build -- --target {name}",
            f"nox -s verify -- --target {name}",
        ]
    report = "verify-install.json" if state.verify == "install" else "verify-cpu.json"
    return [
        f"read build/{name}/{report}, fix the series, then: nox -s build -- --target {name}",
        f"nox -s verify -- --target {name}",
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


def _say(status: str, state: RollState, files: list[Path], next_steps: list[str]) -> None:
    colour = "green" if status == "green" else "red"
    console.status(
        f"[{colour}]roll {status}[/]: {state.target} → {state.output} at {state.project} "
        f"{state.new.get('version')}"
    )
    for record in state.new.get("missing", []):
        console.status(f"[yellow]{escape(roll_report.missing_sentence(record, state.output))}[/]")
    for path in files:
        console.status(f"report: {path}")
    if next_steps:
        console.status("next:")
        for step in next_steps:
            console.status(f"  {escape(step)}")


def _refuse_in_progress(workspace: Workspace, target_name: str) -> None:
    if roll_state.load(workspace, target_name) is not None:
        base = f"nox -s roll -- --target {target_name}"
        raise ConfigError(
            f"a roll of {target_name} is in progress: `{base} --continue` after resolving, "
            f"`{base} --skip` or `{base} --abort`"
        )
    if load_rebase(workspace.vendor, target_name) is not None:
        raise ConfigError(
            f"a rebase of {target_name} is in progress: finish it (`nox -s rebase -- --target "
            f"{target_name} --continue`) or undo it (`--abort`) before rolling"
        )


def _find(workspace: Workspace, target_name: str) -> RollState:
    state = roll_state.load(workspace, target_name)
    if state is None:
        raise ConfigError(
            f"no roll of {target_name} is in progress (start one: nox -s roll -- --target "
            f"{target_name})"
        )
    return state
