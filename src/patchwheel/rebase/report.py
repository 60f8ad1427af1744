"""The rebase report: ``build/<target>/rebase.json`` (machine) and ``rebase.md`` (people).

Per patch: its class, why, offsets, conflicts and how they were resolved, whether its text
changed (with a ``git range-diff`` when it did), and advice from its DEP-3 header read against
the new pins (a ``Drop-When`` that now holds; a ``Vllm-Change`` newer than the new vLLM pin).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

from patchwheel.config.lock import LockedPin
from patchwheel.patching.patches import Patch
from patchwheel.rebase import dropwhen
from patchwheel.rebase import missing as missing_mod
from patchwheel.rebase.dropwhen import pin_versions
from patchwheel.rebase.state import CLASSES, PatchState, RebaseState

SCHEMA = "patchwheel.rebase/1"
_CHANGE_VERSION = re.compile(r"\(([0-9][0-9A-Za-z.+!-]*)\)\s*$")


def project_versions(state: RebaseState) -> dict[str, Version | None]:
    """The version each project's new source pin names (None: unknown, e.g. a git pin)."""
    return pin_versions(LockedPin(**entry) for entry in state.lock)


def build_versions(state: RebaseState) -> list[dict[str, Version | None]]:
    """The version sets of the new pins' builds: the sources', then one per variant kept at
    another release (``dropwhen.build_versions``); a ``Drop-When`` must hold for each."""
    return dropwhen.build_versions(LockedPin(**entry) for entry in state.lock)


def notes_for(
    patch: Patch,
    versions: Mapping[str, Version | None],
    builds: Sequence[Mapping[str, Version | None]] = (),
) -> list[str]:
    """Advice from a patch's DEP-3 header, read against the new pins (``builds``: every build's
    version set, see :func:`build_versions`; default the sources' alone)."""
    notes = []
    drop = patch.fields.get("Drop-When", "")
    if drop and dropwhen.evaluate_each(drop, builds or [versions]).holds:
        notes.append(f"Drop-When holds for the new pins ({drop}): the patch may not be needed")
    elif drop and len(builds) > 1 and drop_when_holds(drop, versions):
        notes.append(
            f"Drop-When holds for the new source pins ({drop}) but not for a variant kept at an "
            "older release: kept for that variant's wheel"
        )
    change = patch.fields.get("Vllm-Change", "")
    match = _CHANGE_VERSION.search(change)
    pinned = versions.get("vllm")
    if match and pinned is not None:
        try:
            since = Version(match.group(1))
        except InvalidVersion:
            since = None
        if since is not None and pinned < since:
            notes.append(
                f"its Vllm-Change names vLLM {since}, newer than the new pin {pinned}: "
                "check the patch is right for this vLLM"
            )
    return notes


def drop_when_holds(text: str, versions: Mapping[str, Version | None]) -> bool:
    """Whether a ``Drop-When`` is true for these versions (unknown is not true)."""
    return dropwhen.evaluate(text, versions).holds


def build_report(
    state: RebaseState,
    patches: Mapping[str, Mapping[str, Patch]],
    rewritten: Mapping[str, Mapping[str, dict[str, Any]]],
    audit: dict[str, Any] | None,
    remembered: Mapping[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The JSON report. ``patches``: old patches by project and name; ``rewritten``: per patch
    ``text-changed``, ``sha256``, ``range-diff``."""
    versions = project_versions(state)
    builds = build_versions(state)
    flagged = _flagged_by_audit(audit)
    projects = []
    for project in state.projects:
        rows = []
        for record in project.patches:
            patch = patches[project.name][record.name]
            extra = rewritten.get(project.name, {}).get(record.name, {})
            notes = notes_for(patch, versions, builds) + flagged.get(record.name, [])
            if record.dropped and record.reason.startswith("its Drop-When holds"):
                notes = [n for n in notes if not n.startswith("Drop-When holds")]
            rows.append(_patch_row(record, patch, extra, notes))
        counts = Counter(r.klass for r in project.patches)
        projects.append(
            {
                "name": project.name,
                "replayed": project.affected,
                "vendor": project.vendor,
                "old-upstream": project.old_upstream,
                "new-upstream": project.new_upstream or project.old_upstream,
                "patches": rows,
                "counts": {k: counts[k] for k in CLASSES if counts[k]},
                "dropped": [r.name for r in project.patches if r.dropped],
                "touch-upstream-changes": [r.name for r in project.patches if r.touched_upstream],
                "rerere": {
                    "loaded": project.remembered,
                    "reused-by": [r.name for r in project.patches if r.remembered],
                    "recorded": list((remembered or {}).get(project.name, [])),
                },
            }
        )
    return {
        "schema": SCHEMA,
        "target": state.target,
        "output": state.output,
        "new-target": state.new_target,
        "onto": state.onto,
        "changed": True,
        "pins": state.changes,
        "warnings": state.warnings,
        "projects": projects,
        "missing-variants": _missing_rows(state),
        "next": _asking(state),
        "audit": audit,
        "seconds": round(state.seconds, 2),
    }


def _missing_rows(state: RebaseState) -> list[dict[str, Any]]:
    """The variants the new version has no wheel of; for a kept one, the patches of its project
    dropped because the new sources have their change (the kept wheel's files may not)."""
    rows = []
    for data in state.missing:
        row = dict(data)
        project = str(data["key"]).split(":", 1)[0]
        row["lost-patches"] = (
            [
                r.name
                for p in state.projects
                if p.name == project
                for r in p.patches
                if r.dropped and not r.reason.startswith("its Drop-When holds")
            ]
            if data["policy"] == "keep"
            else []
        )
        rows.append(row)
    return rows


def _asking(state: RebaseState) -> list[str]:
    """The commands for a person, when a variant was dropped without a declared policy."""
    missing = [missing_mod.from_dict(m) for m in state.missing]
    asked = [m for m in missing if m.asks]
    if not asked or not state.rerun:
        return []
    return [
        "to keep "
        + ", ".join(f"{m.variant} at {m.old_pin}" for m in asked)
        + " instead: "
        + missing_mod.keep_command(
            asked, target=state.target, output=state.output, rerun=state.rerun, undo=state.undo
        ),
        missing_mod.make_rule(asked, state.target),
    ]


def _flagged_by_audit(audit: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """Notes for the patches whose own lines the audit flags (they break on the new pins)."""
    out: dict[str, list[str]] = {}
    for pair in (audit or {}).get("pairs", []):
        for finding in pair.get("findings", []):
            if finding.get("patch"):
                out.setdefault(finding["patch"], []).append(
                    f"the audit flags a line this patch wrote: {finding['location']} "
                    f"{finding['kind']} {finding['symbol']}"
                )
    return out


def _patch_row(
    record: PatchState, patch: Patch, extra: Mapping[str, Any], notes: list[str]
) -> dict[str, Any]:
    return {
        "name": record.name,
        "subject": patch.subject,
        "class": record.klass,
        "reason": record.reason,
        "offsets": record.offsets,
        "files": record.files,
        "resolution": record.resolution or ("dropped" if record.dropped else "automatic"),
        "kept": not record.dropped,
        "sha256": record.sha256,
        "new-sha256": extra.get("sha256", record.sha256 if not record.dropped else None),
        "text-changed": bool(extra.get("text-changed", False)),
        "range-diff": extra.get("range-diff"),
        "notes": notes,
        "touches-upstream-changes": record.touched_upstream,
        "remembered": record.remembered,
    }


def unchanged_report(target: str, onto: Sequence[str], reasons: Sequence[str]) -> dict[str, Any]:
    """The report of a rebase that changes nothing (printed, never written)."""
    return {
        "schema": SCHEMA,
        "target": target,
        "onto": list(onto),
        "changed": False,
        "reasons": list(reasons),
    }


# --------------------------------------------------------------------------- markdown


def markdown(report: Mapping[str, Any]) -> str:
    """The human-readable report."""
    lines = [f"# Rebase of `{report['target']}` onto {', '.join(f'`{o}`' for o in report['onto'])}"]
    lines.append("")
    if report["new-target"]:
        lines.append(
            f"Written as the new target `{report['output']}`; `{report['target']}` is untouched."
        )
    else:
        lines.append(f"Target `{report['target']}` rewritten in place.")
    lines += ["", "## Pins", "", "| pin | before | after | why |", "| --- | --- | --- | --- |"]
    for change in report["pins"]:
        lines.append(
            f"| {change['key']} | `{change['old']}` | `{change['new']}` | {change['why']} |"
        )
    for warning in report["warnings"]:
        lines.append(f"\n> warning: {warning}")
    for project in report["projects"]:
        lines += ["", _project_title(project), ""]
        if not project["patches"]:
            lines.append("No patches.")
            continue
        counts = ", ".join(f"{n} {k}" for k, n in project["counts"].items())
        lines += [f"{len(project['patches'])} patches: {counts}.", ""]
        lines += _upstream_lines(project)
        lines += ["| # | patch | class | details |", "| --- | --- | --- | --- |"]
        for number, row in enumerate(project["patches"], start=1):
            lines.append(f"| {number} | `{row['name']}` | {row['class']} | {_details(row)} |")
        diffs = [r for r in project["patches"] if r["range-diff"]]
        for row in diffs:
            lines += ["", f"### range-diff of `{row['name']}`", "", "```", row["range-diff"], "```"]
    lines += _missing_lines(report)
    lines += ["", "## API audit", "", *_audit_lines(report.get("audit"))]
    lines += ["", "## Next", "", *_next_lines(report)]
    lines.append(f"\n_took {report['seconds']} s_")
    return "\n".join(lines) + "\n"


def _missing_lines(report: Mapping[str, Any]) -> list[str]:
    rows = report.get("missing-variants") or []
    if not rows:
        return []
    lines = ["", "## Variants upstream did not build", ""]
    for row in rows:
        lines.append(f"- {missing_mod.from_dict(row).sentence(report['output'])}.")
        if row.get("lost-patches"):
            names = ", ".join(f"`{n}`" for n in row["lost-patches"])
            lines.append(
                f"  **The kept wheel loses {names}**: dropped because the new sources already "
                "have their change, which the kept release may not"
            )
    return lines


def _next_lines(report: Mapping[str, Any]) -> list[str]:
    output = report["output"]
    lines = [f"- {step}" for step in report.get("next") or []]
    for pair in (report.get("audit") or {}).get("pairs", []):
        findings = pair.get("findings", [])
        flagged = sorted({f["patch"] for f in findings if f.get("patch")})
        export = f"`patchwheel export --target {output} --project {pair['project']}`"
        where = f"`vendor/{output}/{pair['project']}`"
        if flagged:
            names = ", ".join(f"`{n}`" for n in flagged)
            lines.append(
                f"- revise {names}: the audit flags lines they wrote. Fix them in {where} "
                f"(`git commit --fixup`, then `git rebase -i --autosquash upstream`), then {export}"
            )
        if any(not f.get("patch") for f in findings):
            lines.append(
                f"- answer the drift in upstream code with new patches: commit the fix in "
                f"{where}, then {export}"
            )
    lines.append(f"- build it: `nox -s build -- --target {output}`")
    return lines


def _upstream_lines(project: Mapping[str, Any]) -> list[str]:
    """Which patches touch files upstream changed, and what rerere remembered or reused."""
    if not project["replayed"]:
        return []
    touching = [r for r in project["patches"] if r.get("touches-upstream-changes")]
    lines = []
    if touching:
        lines.append("Patches touching files that changed upstream between the old and new pins:")
        lines += [
            f"- `{r['name']}`: {', '.join(f'`{p}`' for p in r['touches-upstream-changes'])}"
            for r in touching
        ]
    else:
        lines.append("No patch touches a file that changed upstream between the old and new pins.")
    rr = project.get("rerere") or {}
    parts = []
    if rr.get("loaded"):
        parts.append(f"{rr['loaded']} remembered conflict resolution(s) loaded from the series")
    if rr.get("reused-by"):
        names = ", ".join(f"`{n}`" for n in rr["reused-by"])
        parts.append(f"conflicts of {names} resolved by a remembered resolution (rerere)")
    if rr.get("recorded"):
        parts.append(
            f"{len(rr['recorded'])} new resolution(s) remembered in `rr-cache/` beside the series, "
            "so the same conflict resolves itself next time"
        )
    if parts:
        lines += ["", "Conflict resolutions: " + "; ".join(parts) + "."]
    return [*lines, ""]


def _project_title(project: Mapping[str, Any]) -> str:
    if project["replayed"]:
        return (
            f"## {project['name']}: replayed onto {project['new-upstream'][:12]} "
            f"(was {project['old-upstream'][:12]})"
        )
    return f"## {project['name']}: pin unchanged (series kept as it is)"


def _details(row: Mapping[str, Any]) -> str:
    parts = []
    if row["reason"] and row["class"] not in ("clean",):
        parts.append(row["reason"])
    if row["offsets"]:
        parts.append("offsets: " + "; ".join(row["offsets"]))
    if row["files"]:
        parts.append("files: " + ", ".join(f"`{f}`" for f in row["files"]))
    if row["resolution"] not in ("automatic",):
        parts.append(row["resolution"])
    if row["text-changed"]:
        parts.append("text changed (range-diff below)")
    if row.get("touches-upstream-changes"):
        changed = ", ".join(f"`{p}`" for p in row["touches-upstream-changes"])
        parts.append(f"touches files changed upstream: {changed}")
    parts += [f"**note:** {n}" for n in row["notes"]]
    return "; ".join(parts).replace("|", "\\|").replace("\n", " ") or "-"


def _audit_lines(audit: Mapping[str, Any] | None) -> list[str]:
    if not audit:
        return ["Not run."]
    if audit.get("status") != "ran":
        return [str(audit.get("reason", "Not run."))]
    lines = []
    for pair in audit.get("pairs", []):
        title = f"`{pair['consumer']}` → `{pair['provider']}` (baseline `{pair['baseline']}`)"
        if "error" in pair:
            lines.append(f"- {title}: could not run: {pair['error']}")
            continue
        findings = pair["findings"]
        if not findings:
            lines.append(f"- {title}: no new drift.")
            continue
        lines.append(f"- {title}: **{len(findings)} new drift finding(s) no patch answers yet**:")
        for finding in findings:
            origin = (
                f"in a line of patch `{finding['patch']}`"
                if finding.get("patch")
                else "in upstream code"
            )
            lines.append(
                f"  - `{finding['location']}` ({origin}) {finding['kind']} "
                f"`{finding['symbol']}`: {finding['message']}"
            )
    return lines or ["No consumer/provider pair changed: nothing to audit."]
