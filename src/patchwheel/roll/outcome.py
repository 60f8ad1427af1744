"""What a roll tells: its outcome (status, report, next steps), roll.md and roll.json written
into ``build/<output>``, and the console's lines — at the end of its steps, when it is up to
date, or when its rebase stopped at a conflict.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich.markup import escape

from patchwheel import console
from patchwheel.config.targets import POOLS_DIR, load_target
from patchwheel.errors import PatchwheelError
from patchwheel.index import outputs
from patchwheel.portable import portable, roots
from patchwheel.rebase import replay
from patchwheel.rebase.finish import report_files
from patchwheel.rebase.state import load as load_rebase
from patchwheel.roll import paths
from patchwheel.roll import report as roll_report
from patchwheel.roll import state as roll_state
from patchwheel.roll.check import Checks
from patchwheel.roll.state import RollState
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


def finish(workspace: Workspace, state: RollState) -> RollOutcome:
    """Write roll.md / roll.json; a green roll ends, any other stays to be continued.

    A variant the rebase dropped without a declared ``missing`` policy asks a person even when
    every check is green: the roll stays at its report step until ``--continue`` accepts the
    drop or ``--abort`` undoes the roll (to run it again keeping the variant)."""
    checks = Checks.of(state)
    asked = _asked(state, checks)
    green = checks.green and not asked
    status: Status = "green" if green else "needs-person"
    next_steps = asked + ([] if checks.green else _next_after_checks(state, checks, workspace))
    data = _machine_free(
        workspace,
        roll_report.build_report(
            state, status=status, rebase=state.rebase, checks=checks, next_steps=next_steps
        ),
    )
    extra = report_files(state.rebase, state.rebase_markdown) if state.rebase else {}
    data, files = _write(workspace, state.output, data, extra)
    if green:
        roll_state.remove(workspace, state.target)
    else:
        # --continue checks again once a person has fixed what is named; with only the asked
        # variants left, it accepts their drop
        state.step = "build" if not checks.green else "report"
        state.asked = bool(asked)
        roll_state.save(workspace, state)
    _say(status, state, files, next_steps)
    return RollOutcome(status, state.target, state.output, data, files, next_steps)


def _asked(state: RollState, checks: Checks) -> list[str]:
    """The rebase's questions on variants dropped without a policy (the command that keeps them,
    where to declare the answer), and, once the checks are green, how to accept the drop; none
    once it is accepted."""
    if state.accepted:
        return []
    asked = [str(step) for step in (state.rebase or {}).get("next") or []]
    if asked and checks.green:
        asked.append(f"or accept the drop: nox -s roll -- --target {state.target} --continue")
    return asked


def up_to_date(workspace: Workspace, state: RollState, verified: dict[str, Any]) -> RollOutcome:
    checks = Checks(
        build=dict(verified.get("build") or {}),
        audit=dict(verified.get("audit") or {}),
        bisect=verified.get("bisect"),
        verification=dict(verified.get("verification") or {}),
    )
    data = _machine_free(
        workspace, roll_report.build_report(state, status="up-to-date", rebase=None, checks=checks)
    )
    data, files = _write(workspace, state.target, data, {})
    newest = state.new.get("newest")
    said = roll_report.newest_words(state.new, newest) if newest else ""
    console.status(
        f"[green]{state.target} is up to date[/]: at {state.project} {revision(state)}, "
        "built, audited and verified at its pins"
        + (f"; {escape(said)}, is older than the pin" if newest else "")
    )
    return RollOutcome("up-to-date", state.target, state.target, data, files)


def stopped(workspace: Workspace, state: RollState, stop: replay.Stop) -> RollOutcome:
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
    data = _machine_free(
        workspace,
        roll_report.build_report(
            state, status="needs-person", rebase=progress, stop=detail, next_steps=next_steps
        ),
    )
    data, out = _write(workspace, state.output, data, {})
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


_NUMBER = re.compile(r"^(\d{4})-")


def _answer_drift(workspace: Workspace, name: str, project: str = "speculators") -> str:
    """How to answer the consumer's drift: export the vendor tree's commit into the target's
    series, or, when its series is a pool, add it to the pool as a gated patch."""
    vendor = f"vendor/{name}/{project}"
    try:
        pool = load_target(workspace.patches, name).project(project).pool
    except PatchwheelError:
        pool = None
    if not pool:
        return (
            f"answer the drift in {vendor} (commit the fix), then: "
            f"patchwheel export --target {name} --project {project}"
        )
    folder = f"patches/{POOLS_DIR}/{pool}"
    numbered = (_NUMBER.match(p.name) for p in (workspace.patches / POOLS_DIR / pool).iterdir())
    start = max((int(m.group(1)) for m in numbered if m), default=0) + 1
    return (
        f"answer the drift in {vendor} (commit the fix, its message saying Applies-When: "
        "vllm >= <the release the Bisect section names>), then add it to the pool the target "
        "shares: "
        f"git -C {vendor} format-patch -1 --start-number {start} -o ../../../{folder} "
        f"and list the new file at the end of {folder}/series"
    )


def _next_after_checks(state: RollState, checks: Checks, workspace: Workspace) -> list[str]:
    name = state.output
    base = f"nox -s roll -- --target {state.target}"
    undo_step = f"{base} --abort   (undo the roll: the pins, the series and vendor/ as before)"
    if checks.build.get("status") != "built":
        return [f"fix what the build names (see roll.md), then: {base} --continue", undo_step]
    if checks.audit.get("status") == "findings":
        return [
            _answer_drift(workspace, name),
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


def _machine_free(workspace: Workspace, data: dict[str, Any]) -> dict[str, Any]:
    """The report as it is written and returned: no path of this machine in it."""
    cleaned: dict[str, Any] = paths.machine_free(data, paths.replacements(workspace))
    return cleaned


def _write(
    workspace: Workspace, name: str, data: dict[str, Any], extra: dict[str, bytes]
) -> tuple[dict[str, Any], list[Path]]:
    """Write roll.md and roll.json (and ``extra``) into build/<name>; the report as written
    (no path of this machine in it: the checkout's relative, the cache's by name)."""
    data = portable(data, roots(workspace.patches.parent))
    pairs = paths.replacements(workspace)
    extra = {
        file: paths.machine_free(content.decode("utf-8"), pairs).encode("utf-8")
        for file, content in extra.items()
    }
    files = {
        **extra,
        roll_report.REPORT_MD: roll_report.markdown(data).encode("utf-8"),
        roll_report.REPORT_JSON: (json.dumps(data, indent=2) + "\n").encode("utf-8"),
    }
    written = outputs.add_files(workspace.build, name, files)
    return data, [p for p in written if p.name in (roll_report.REPORT_MD, roll_report.REPORT_JSON)]


def revision(state: RollState) -> str:
    """The revision rolled onto, in words: its version and commit (what is known of them)."""
    version, commit = state.new.get("version"), str(state.new.get("commit") or "")[:12]
    if version and commit:
        return f"{version} ({commit})"
    return str(version or commit or "?")


def _say(status: str, state: RollState, files: list[Path], next_steps: list[str]) -> None:
    colour = "green" if status == "green" else "red"
    console.status(
        f"[{colour}]roll {status}[/]: {state.target} → {state.output} at {state.project} "
        f"{revision(state)}"
    )
    for record in state.new.get("missing", []):
        console.status(f"[yellow]{escape(roll_report.missing_sentence(record, state.output))}[/]")
    for path in files:
        console.status(f"report: {path}")
    if next_steps:
        console.status("next:")
        for step in next_steps:
            console.status(f"  {escape(step)}")
