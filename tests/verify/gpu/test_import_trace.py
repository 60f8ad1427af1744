"""The import trace (verify/payloads/importtrace/sitecustomize.py) in real processes, and the
drop-list check on what it recorded: spawned and forked children are traced with their parent's
run; an imported package on a test wheelhouse's drop list fails the check naming it; a caught failed
import fails unless its importer tolerates it; a find_spec probe does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchwheel.errors import VerifyError
from patchwheel.verify.gpu import environment, imports

SCRIPT = """
import importlib, importlib.util, multiprocessing, sys

def child():
    import rich.text  # a real package, imported only in the children

def main():
    importlib.util.find_spec("pw_probed_only")
    try:
        import pw_caught  # noqa: F401
    except ImportError:
        pass
    try:
        importlib.import_module("pw_by_name")
    except ImportError:
        pass
    for method in ("spawn", "fork"):
        p = multiprocessing.get_context(method).Process(target=child)
        p.start()
        p.join()
        assert p.exitcode == 0, method

if __name__ == "__main__":
    main()
"""


def traced_run(tmp_path: Path, trace: Path, name: str = "job.py") -> None:
    script = tmp_path / name
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(environment.TRACE_DIR)
    env[environment.TRACE_VARIABLE] = str(trace)
    proc = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def write_lock(house: Path, dropped: list[dict[str, object]]) -> Path:
    house.mkdir(parents=True, exist_ok=True)
    (house / imports.LOCK_NAME).write_text(json.dumps({"dropped": dropped}))
    return house


def test_children_are_traced_and_grouped_with_their_run(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    traced_run(tmp_path, trace)
    runs = imports.read(trace)
    assert [r.label for r in runs] == ["job.py"]
    run = runs[0]
    assert len(run.pids) >= 3  # the script, its spawned and its forked child
    assert "rich" in run.imported  # imported by the children only
    assert run.missing["pw_probed_only"] == {"how": "probe", "importer": "__main__"}
    assert run.missing["pw_caught"] == {"how": "import", "importer": "__main__"}
    assert run.missing["pw_by_name"]["how"] == "import"


def test_a_dropped_requirement_imported_fails_the_check_naming_it(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    traced_run(tmp_path, trace)
    house = write_lock(
        tmp_path / "house",
        [
            {"name": "rich", "why": "test: claimed never imported"},  # default import name
            {"name": "pw-caught", "why": "t", "imports": ["pw_caught"]},
            {"name": "pw-probed", "why": "t", "imports": ["pw_probed_only"]},
            {"name": "pw-tolerated", "why": "t", "imports": ["pw_by_name"],
             "tolerated-by": ["__main__"]},
        ],
    )  # fmt: skip
    dropped = imports.dropped_requirements(house)
    assert dropped[0].imports == ("rich",)
    problems = imports.check_dropped(imports.read(trace), dropped)
    assert len(problems) == 2
    assert problems[0].startswith("rich (dropped from the wheelhouse) was imported as `rich`")
    assert problems[1].startswith("pw-caught (dropped from the wheelhouse): __main__ imported")
    summary = imports.summary(imports.read(trace), dropped, {"rich": ["rich"]}, [str(trace)])
    assert not summary["passed"]
    by_name = {d["name"]: d for d in summary["dropped"]}
    assert by_name["rich"]["imported_by"] == ["job.py"]
    assert by_name["pw-probed"]["looked_for_by"] == ["__main__ (probe)"]
    assert summary["runs"][0]["distributions"] == ["rich"]
    # a later call of the same report checks the earlier call's runs again
    again = imports.earlier_runs(summary)
    assert [r.label for r in again] == ["job.py"] and "rich" in again[0].imported
    assert len(imports.check_dropped(again, dropped)) == 2


def test_nothing_dropped_imported_passes(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    traced_run(tmp_path, trace)
    house = write_lock(tmp_path / "house", [{"name": "deepspeed", "why": "never imported"}])
    dropped = imports.dropped_requirements(house)
    assert imports.check_dropped(imports.read(trace), dropped) == []
    provided = imports.distributions(sys.executable, dict(os.environ), {"rich", "pytest"})
    assert provided["rich"] == ["rich"] and provided["pytest"] == ["pytest"]


def test_the_trace_runs_the_sitecustomize_it_shadows(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    marker = tmp_path / "marker"
    (other / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(environment.TRACE_DIR), str(other)])
    env[environment.TRACE_VARIABLE] = str(tmp_path / "trace")
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True, timeout=60)
    assert marker.read_text() == "ran"
    assert list((tmp_path / "trace").glob("*.json"))


def test_a_damaged_lock_is_an_error_naming_it(tmp_path: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    (house / imports.LOCK_NAME).write_text("{not json")
    with pytest.raises(VerifyError, match=r"wheelhouse.lock.json: cannot read"):
        imports.dropped_requirements(house)
    assert imports.dropped_requirements(None) == []
