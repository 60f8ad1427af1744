"""Pages of the bisect, roll and benchmark reports, each from its JSON.

A benchmark report has no fixed schema (each script under benchmarks/ writes its own
``--json``): a list of records is one table, an object a table of its fields; values that are
not scalars are shown as compact JSON, so every figure on the page is one the file holds.
"""

from __future__ import annotations

from typing import Any

from patchwheel.errors import ResultsError
from patchwheel.results.catalog import Report
from patchwheel.results.markdown import cell, table


def _object(report: Report) -> dict[str, Any]:
    if not isinstance(report.data, dict):
        raise ResultsError(f"{report.source}: a {report.kind} report is a JSON object")
    return report.data


def _revision(rev: Any) -> str:
    if not isinstance(rev, dict):
        return cell(rev)
    ident = str(rev.get("id"))
    short = ident[:10] if len(ident) == 40 else ident
    return f"{short} ({str(rev.get('date'))[:10]}: {cell(rev.get('subject'))})"


def bisect_title(report: Report) -> str:
    data = _object(report)
    return (
        f"Bisect, {data.get('target')}: {data.get('project')} ({data.get('mode')}), {report.stem}"
    )


def bisect_body(report: Report) -> list[str]:
    data = _object(report)
    lines = [
        f"- Command: `{data.get('command') or '(run by a roll)'}`",
        f"- Good: {_revision(data.get('good'))}",
        f"- Bad: {_revision(data.get('bad'))}",
        f"- Consumer: {cell(data.get('consumer'))}",
        f"- Provider: {cell(data.get('provider'))}",
        f"- Baseline: {cell(data.get('baseline'))}",
        f"- {data.get('steps')} revisions in the range, {data.get('audit_runs')} audits "
        f"({data.get('engine')}), {data.get('seconds')} s.",
        "",
        "## Where each finding changes",
        "",
    ]
    flips = data.get("flips") or []
    rows = []
    for flip in flips:
        finding = flip.get("finding") or {}
        rows.append(
            [
                finding.get("kind"),
                finding.get("symbol"),
                finding.get("patch") or "-",
                flip.get("change"),
                _revision(flip.get("commit")),
            ]
        )
    lines += (
        table(["kind", "symbol", "patch", "change", "first commit"], rows)
        if rows
        else ["No finding changes status inside the range."]
    )
    unchanged = data.get("unchanged") or []
    if unchanged:
        lines += ["", f"{len(unchanged)} findings unchanged: {cell(data.get('unchanged_note'))}"]
    return lines


def roll_title(report: Report) -> str:
    data = _object(report)
    return (
        f"Roll, {data.get('target')} onto {(data.get('new') or {}).get('version')}: {report.stem}"
    )


def roll_body(report: Report) -> list[str]:
    data = _object(report)
    old = (data.get("old") or {}).get("pins") or {}
    new = (data.get("new") or {}).get("pins") or {}
    lines = [
        f"Started {data.get('started')}; status **{data.get('status')}** (exit "
        f"{data.get('exit-status')}); output target `{data.get('output')}`; channel "
        f"{cell((data.get('channel') or {}).get('kind'))}.",
        "",
        "## Pins",
        "",
        *table(
            ["pin", "before", "after"], [[k, old.get(k), new.get(k)] for k in sorted({*old, *new})]
        ),
        "",
        "## Steps",
        "",
    ]
    rows = []
    for step in ("rebase", "build", "audit", "bisect", "verification"):
        value = data.get(step)
        state = value.get("status") if isinstance(value, dict) else value
        if step == "rebase" and isinstance(value, dict):
            state = "; ".join(
                f"{p.get('name')}: {cell(p.get('counts'))}" for p in value.get("projects") or []
            )
        reason = value.get("reason") if isinstance(value, dict) else None
        rows.append([step, state, reason, (data.get("timings") or {}).get(step)])
    lines += table(["step", "result", "why", "seconds"], rows)
    missing = data.get("missing-variants") or []
    if missing:
        lines += ["", "## Variants upstream did not build", ""]
        lines += table(
            ["variant", "kept pin", "policy", "why"],
            [[m.get("variant"), m.get("old_pin"), m.get("policy"), m.get("why")] for m in missing],
        )
    audit = data.get("audit") or {}
    if isinstance(audit, dict) and audit.get("findings"):
        lines += ["", "## Audit findings", ""]
        lines += table(
            ["kind", "symbol", "where"],
            [
                [f.get("kind"), f.get("symbol"), f"{f.get('path')}:{f.get('line')}"]
                for f in audit["findings"]
            ],
        )
    if data.get("next"):
        lines += ["", "## Next", ""] + [f"- {cell(step)}" for step in data["next"]]
    lines += ["", f"Total {(data.get('timings') or {}).get('total')} s."]
    return lines


def bench_title(report: Report) -> str:
    return f"Benchmark, {report.stem}"


def bench_body(report: Report) -> list[str]:
    data = report.data
    records = data if isinstance(data, list) else [data]
    if not records or not all(isinstance(r, dict) for r in records):
        raise ResultsError(f"{report.source}: a benchmark report is an object or a list of them")
    columns: list[str] = []
    for record in records:
        columns += [k for k in record if k not in columns]
    if len(records) == 1:
        return table(["figure", "value"], [[k, records[0][k]] for k in columns])
    return table(columns, [[r.get(k) for k in columns] for r in records])
