"""The roll report: ``build/<target>/roll.json`` (machine) and ``roll.md`` (people).

Old and new pins, every patch's class and why (with the files it touches that changed upstream,
and whether a remembered resolution answered its conflict), the audit's findings, the bisect's
results, the verification, the next command when a person is needed, and the time each step
took.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from patchwheel.rebase.missing import from_dict
from patchwheel.roll.check import Checks
from patchwheel.roll.state import RollState

SCHEMA = "patchwheel.roll/1"
REPORT_MD = "roll.md"
REPORT_JSON = "roll.json"


def build_report(
    state: RollState,
    *,
    status: str,
    rebase: Mapping[str, Any] | None,
    checks: Checks | None = None,
    stop: Mapping[str, Any] | None = None,
    next_steps: list[str] | None = None,
) -> dict[str, Any]:
    """The JSON report of a roll that ended (``green``, ``needs-person``, ``up-to-date``)."""
    project = state.project
    old = {k: v for k, v in state.old.items() if k.split(":", 1)[0] == project}
    return {
        "schema": SCHEMA,
        "target": state.target,
        "output": state.output,
        "status": status,
        "exit-status": 0 if status in ("green", "up-to-date") else 1,
        "project": project,
        "moved": state.moved,
        "channel": state.new.get("channel"),
        "old": {
            "version": old.get(project, {}).get("version"),
            "commit": old.get(project, {}).get("commit"),
            "pins": {k: v.get("pin") for k, v in old.items()},
        },
        "new": {k: v for k, v in state.new.items() if k != "channel"},
        "missing-variants": _missing(state, rebase),
        "rebase": _rebase(rebase),
        "stop": dict(stop) if stop else None,
        "build": checks.build if checks else None,
        "audit": checks.audit if checks else None,
        "bisect": checks.bisect if checks else None,
        "verification": checks.verification if checks else None,
        "next": next_steps or [],
        "timings": {**state.timings, "total": round(sum(state.timings.values()), 2)},
        "started": state.started,
    }


def _missing(state: RollState, rebase: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The variants the new revision has no wheel of, what was done, and (kept) the patches
    the kept wheel loses (from the rebase's report, when it got that far)."""
    lost = {r["key"]: r.get("lost-patches", []) for r in (rebase or {}).get("missing-variants", [])}
    return [
        {**m, "sentence": missing_sentence(m, state.output), "lost-patches": lost.get(m["key"], [])}
        for m in state.new.get("missing", [])
    ]


def newest_words(new: Mapping[str, Any], version: str) -> str:
    """The channel's newest revision, in words: a nightly channel's build, or a release."""
    kind = (new.get("channel") or {}).get("kind")
    if kind == "releases":
        return f"the newest release on the package index, {version}"
    return f"the channel's newest build, {version}"


def missing_sentence(record: Mapping[str, Any], output: str) -> str:
    """One plain sentence on a missing variant."""
    return from_dict(record).sentence(output)


def _rebase(rebase: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not rebase:
        return None
    projects = []
    for project in rebase.get("projects", []):
        projects.append(
            {
                "name": project["name"],
                "replayed": project["replayed"],
                "counts": project.get("counts", {}),
                "rerere": project.get("rerere"),
                "patches": [
                    {
                        "name": row["name"],
                        "class": row["class"],
                        "reason": row["reason"],
                        "resolution": row["resolution"],
                        "kept": row["kept"],
                        "touches-upstream-changes": row.get("touches-upstream-changes", []),
                        "remembered": row.get("remembered", []),
                        "notes": row.get("notes", []),
                    }
                    for row in project["patches"]
                ],
            }
        )
    out: dict[str, Any] = {"seconds": rebase.get("seconds"), "projects": projects}
    if rebase.get("warnings"):  # e.g. what a pool's gates take in or leave out at the new pins
        out["notes"] = list(rebase["warnings"])
    return out


# --------------------------------------------------------------------------- markdown


def markdown(report: Mapping[str, Any]) -> str:
    """The human-readable report."""
    new = report["new"]
    revision = new.get("version") or str(new.get("commit") or "?")[:12]
    title = f"# Roll of `{report['target']}` onto {report['project']} {revision}"
    lines = [title, "", f"**{_verdict(report)}**", ""]
    if report["output"] != report["target"]:
        lines += [f"Written as the target `{report['output']}`.", ""]
    lines += ["## Pins", "", "| pin | before | after |", "| --- | --- | --- |"]
    for key, after in new.get("pins", {}).items():
        before = report["old"]["pins"].get(key, "")
        lines.append(f"| {key} | `{before}` | `{after}` |")
    channel = report.get("channel") or {}
    if channel.get("kind") == "releases":
        lines += [
            "",
            f"Release {new.get('version')} on the package index ({channel.get('index')}): "
            "the target has no channel table, so a roll follows its project's releases.",
        ]
    lines += [f"- {note}" for note in new.get("notes") or []]
    if new.get("commit"):
        lines += ["", f"Commit `{new['commit']}` (from the version's `+g` label)."]
        if new.get("probed", 1) > 1:
            lines.append(
                f"The newest nightly lacked a variant; {new['probed']} commits were probed."
            )
    lines += _missing_lines(report.get("missing-variants") or [])
    lines += _rebase_lines(report.get("rebase"), report.get("stop"))
    lines += _build_lines(report)
    lines += ["", "## Next", ""]
    lines += [f"- `{step}`" for step in report["next"]] or ["- nothing: the roll is green"]
    timings = ", ".join(f"{k} {v} s" for k, v in report["timings"].items())
    lines += ["", f"_timings: {timings}_"]
    return "\n".join(lines) + "\n"


def _missing_lines(rows: list[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = ["", "## Variants upstream did not build", ""]
    for row in rows:
        lines.append(f"- {row['sentence']}.")
        if row["policy"] == "keep":
            lines.append(
                f"  Its wheel stays {row['old_pin']}: built with the series applied to its own "
                "files, audited against them, and named at that version by the extras and the "
                "consumer set."
            )
        if row.get("lost-patches"):
            names = ", ".join(f"`{n}`" for n in row["lost-patches"])
            lines.append(
                f"  **The kept wheel loses {names}**: dropped because the new sources already "
                "have their change, which the kept release may not."
            )
    return lines


def _verdict(report: Mapping[str, Any]) -> str:
    status = str(report["status"])
    new = report.get("new") or {}
    newest = new.get("newest")
    older = f" ({newest_words(new, newest)}, is older than the pin)" if newest else ""
    green = (
        "green: rebased, built, audited and verified"
        if report.get("moved", True)
        else "green: the pins stay; built, audited and verified at them" + older
    )
    return {
        "green": green,
        "up-to-date": "up to date: built, audited and verified at its pins already" + older,
        "needs-person": "needs a person (exit status 1): see Next",
    }.get(status, status)


def _rebase_lines(rebase: Mapping[str, Any] | None, stop: Mapping[str, Any] | None) -> list[str]:
    lines: list[str] = []
    if stop:
        lines += ["", "## Stopped at a conflict", ""]
        lines.append(
            f"Patch `{stop['patch']}` of {stop['project']} ({stop['class']}): {stop['reason']}"
        )
        lines += [f"- `{c['path']}`: {c['kind']}" for c in stop.get("conflicts", [])]
        lines.append(f"\nThe vendor tree `{stop['vendor']}` is in git's conflict state.")
    if not rebase:
        return lines
    if rebase.get("notes"):
        lines += ["", "## Rebase notes", ""]
        lines += [f"- {note}" for note in rebase["notes"]]
    for project in rebase["projects"]:
        if not project["replayed"]:
            continue
        lines += ["", f"## {project['name']}: patches", ""]
        if not project["patches"]:
            lines.append("No patches.")
            continue
        lines += ["| patch | class | why | files changed upstream |", "| --- | --- | --- | --- |"]
        for row in project["patches"]:
            why = row["reason"] or "-"
            if row["resolution"] not in ("automatic", "dropped"):
                why += f" ({row['resolution']})"
            touched = ", ".join(f"`{p}`" for p in row["touches-upstream-changes"]) or "-"
            lines.append(f"| `{row['name']}` | {row['class']} | {_cell(why)} | {touched} |")
        rerere = project.get("rerere") or {}
        if rerere.get("reused-by"):
            names = ", ".join(f"`{n}`" for n in rerere["reused-by"])
            lines.append(f"\nRemembered resolutions (rerere) resolved the conflicts of {names}.")
        if rerere.get("recorded"):
            lines.append(
                f"\n{len(rerere['recorded'])} resolution(s) remembered beside the series "
                "(`rr-cache/`): the same conflict on the next nightly resolves itself."
            )
    return lines


def _build_lines(report: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    build = report.get("build")
    if build:
        lines += ["", "## Build", ""]
        if build["status"] == "built":
            lines += [f"- `{w['filename']}`" for w in build["wheels"]]
        else:
            lines.append(f"failed: {build.get('error')}")
    audit = report.get("audit")
    if audit:
        lines += ["", "## Audit", ""]
        for kept in audit.get("kept-variants") or []:
            lines.append(f"- against `{kept['provider']}`: {kept['status']}")
        if audit["status"] == "findings":
            lines.append(f"{len(audit['findings'])} new signature drift(s) at the new pins:")
            lines += [
                f"- `{f['location']}` {f['kind']} `{f['symbol']}`: {f['message']}"
                for f in audit["findings"]
            ]
        elif audit["status"] == "passed":
            lines.append(f"No new drift (baseline: the old pin's sources, `{audit['baseline']}`).")
        else:
            lines.append(str(audit.get("reason") or audit.get("error")))
    bisect = report.get("bisect")
    if bisect:
        lines += ["", "## Bisect", ""]
        if bisect["status"] == "ran":
            lines.append(str(bisect.get("markdown", "")).strip())
        else:
            lines.append(f"{bisect['status']}: {bisect.get('reason') or bisect.get('error')}")
    verification = report.get("verification")
    if verification:
        lines += ["", "## Verification", ""]
        status = verification["status"]
        if status == "passed":
            lines.append(f"passed ({verification['mode']}; `{verification['report']}`)")
            lines += [
                f"- {v}: {why}" for v, why in (verification.get("kept-variants") or {}).items()
            ]
        elif status == "gpu":
            lines.append(verification["reason"] + ":")
            lines += [f"- `{cmd}`" for cmd in verification["next"]]
        else:
            lines.append(f"{status}: {verification.get('error') or verification.get('reason')}")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
