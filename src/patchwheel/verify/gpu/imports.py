"""What the session's child processes imported (the import trace, ``verify/payloads/importtrace``),
and the check that the wheelhouse's drop list holds: no dropped requirement is imported on the
verified path.

Every process of a session call writes one record into the call's trace folder. ``read``
groups them by the run they belong to (the script the session launched: each record's
ancestors are followed through ``ppid`` to a process the session started), and ``summary``
gives each run's imported top-level modules, the names it looked for in vain (with who
looked, and how) and, for the report, the distributions the modules come from.

``check_dropped`` takes the wheelhouse's ``dropped`` list (wheelhouse.lock.json: each
requirement's import names, default its name with ``-`` as ``_``, and ``tolerated-by``) and
fails naming the requirement when a run imported one of its modules, or an import statement
asked for one (ModuleNotFoundError, caught or not) from a package not in ``tolerated-by``. A
``find_spec`` probe that finds nothing is no import: it is listed, not counted.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchwheel.errors import VerifyError

LOCK_NAME = "wheelhouse.lock.json"
DISTRIBUTIONS_CODE = (
    "import importlib.metadata as m, json, sys\n"
    "names = json.loads(sys.stdin.read())\n"
    "table = m.packages_distributions()\n"
    "print(json.dumps({n: sorted(set(table.get(n, []))) for n in names}))\n"
)


@dataclass(frozen=True)
class DroppedRequirement:
    """A requirement the wheelhouse leaves out, and the modules that would be it."""

    name: str
    imports: tuple[str, ...]
    tolerated_by: tuple[str, ...] = ()
    why: str = ""


@dataclass
class Run:
    """The processes of one launched script, and what they imported."""

    label: str
    pids: list[int] = field(default_factory=list)
    imported: set[str] = field(default_factory=set)
    missing: dict[str, dict[str, str]] = field(default_factory=dict)
    # shared objects of installed packages its processes mapped (``vllm/_C.abi3.so``)
    libraries: set[str] = field(default_factory=set)


def dropped_requirements(wheelhouse: Path | None) -> list[DroppedRequirement]:
    """The ``dropped`` entries of the wheelhouse's lock (none without a wheelhouse)."""
    if wheelhouse is None:
        return []
    path = wheelhouse / LOCK_NAME
    try:
        lock = json.loads(path.read_text("utf-8"))
        entries = lock.get("dropped", [])
        out = []
        for entry in entries:
            name = str(entry["name"])
            imports = tuple(entry.get("imports") or (name.replace("-", "_").replace(".", "_"),))
            out.append(
                DroppedRequirement(
                    name,
                    imports,
                    tuple(entry.get("tolerated-by") or ()),
                    str(entry.get("why", "")),
                )
            )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise VerifyError(
            f"{path}: cannot read the wheelhouse's dropped requirements ({exc}); the import "
            "check needs them (rebuild the wheelhouse with `nox -s wheelhouse`)"
        ) from exc
    return out


def read(folder: Path) -> list[Run]:
    """The trace folder's records, grouped by the run (launched script) they belong to."""
    records: dict[int, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text("utf-8"))
            pid = int(record["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a process killed while writing: its last complete record is gone
        records[pid] = record
    runs: dict[int, Run] = {}
    for pid, record in sorted(records.items()):
        root = pid
        seen = {pid}
        while records.get(root, {}).get("ppid") in records and records[root]["ppid"] not in seen:
            root = int(records[root]["ppid"])
            seen.add(root)
        run = runs.get(root)
        if run is None:
            run = runs[root] = Run(label=_label(records[root]))
        run.pids.append(pid)
        run.imported |= set(record.get("imported", []))
        run.libraries |= {str(x) for x in record.get("libraries", [])}
        for name, info in dict(record.get("missing", {})).items():
            run.missing.setdefault(str(name), {k: str(v) for k, v in dict(info).items()})
    for run in runs.values():
        run.missing = {k: v for k, v in run.missing.items() if k not in run.imported}
    return list(runs.values())


def earlier_runs(imports: dict[str, Any]) -> list[Run]:
    """The runs an earlier call of the same report recorded (its ``imports`` block), so that a
    report gathered over several calls checks the drop list against all of them."""
    runs = []
    for entry in imports.get("runs") or []:
        try:
            runs.append(
                Run(
                    label=str(entry["run"]),
                    pids=[0] * int(entry["processes"]),
                    imported=set(entry["modules"]),
                    missing={str(k): dict(v) for k, v in dict(entry["looked_for_in_vain"]).items()},
                    libraries={str(x) for x in entry.get("libraries", [])},
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return runs


def _label(record: dict[str, Any]) -> str:
    argv = [str(a) for a in record.get("argv", [])]
    if not argv:
        return f"pid {record.get('pid')}"
    if argv[0] == "-c":
        return "python -c"
    words = [Path(argv[0]).name, *argv[1:2]]
    return " ".join(w for w in words if w and not w.startswith(("/", "-")))


def distributions(python: str, env: dict[str, str], modules: set[str]) -> dict[str, list[str]]:
    """Which installed distributions provide each top-level module (that python's view)."""
    proc = subprocess.run(
        [python, "-c", DISTRIBUTIONS_CODE],
        input=json.dumps(sorted(modules)),
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    try:
        found: dict[str, list[str]] = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}
    return found


def check_dropped(runs: list[Run], dropped: list[DroppedRequirement]) -> list[str]:
    """Each way a run reached for a dropped requirement, naming it; empty when none did."""
    problems = []
    for requirement in dropped:
        for run in runs:
            for module in requirement.imports:
                if module in run.imported:
                    problems.append(
                        f"{requirement.name} (dropped from the wheelhouse) was imported as "
                        f"`{module}` by {run.label}: carry it (remove it from [drop])"
                    )
                    continue
                info = run.missing.get(module)
                if info is None or info.get("how") != "import":
                    continue
                importer = info.get("importer", "?")
                if importer.partition(".")[0] in requirement.tolerated_by:
                    continue
                problems.append(
                    f"{requirement.name} (dropped from the wheelhouse): {importer} imported "
                    f"`{module}` in {run.label} and got ModuleNotFoundError: carry it, or, if "
                    f"{importer.partition('.')[0]} is built to run without it, list it under "
                    f"tolerated-by"
                )
    return problems


def summary(
    runs: list[Run],
    dropped: list[DroppedRequirement],
    provided_by: dict[str, list[str]],
    folders: list[str],
) -> dict[str, Any]:
    """The report's ``imports``: per run, the modules and their distributions; the check."""
    problems = check_dropped(runs, dropped)
    return {
        "trace_dirs": folders,
        "runs": [
            {
                "run": run.label,
                "processes": len(run.pids),
                "modules": sorted(run.imported),
                "distributions": sorted({d for m in run.imported for d in provided_by.get(m, [])}),
                "looked_for_in_vain": {
                    name: info
                    for name, info in sorted(run.missing.items())
                    if any(name in r.imports for r in dropped) or info.get("how") == "import"
                },
                "libraries": sorted(run.libraries),
            }
            for run in runs
        ],
        "dropped": [
            {
                "name": r.name,
                "imports": list(r.imports),
                "tolerated_by": list(r.tolerated_by),
                "imported_by": sorted(run.label for run in runs if set(r.imports) & run.imported),
                "looked_for_by": sorted(
                    {
                        f"{run.missing[m].get('importer')} ({run.missing[m].get('how')})"
                        for run in runs
                        for m in r.imports
                        if m in run.missing
                    }
                ),
            }
            for r in dropped
        ],
        "violations": problems,
        "passed": not problems,
    }
