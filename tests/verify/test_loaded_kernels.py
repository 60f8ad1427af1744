"""The import trace records the installed packages' shared objects a process mapped, and the
GPU session judges those the build records as CUDA modules for the device's architecture.

The process is real (it loads pydantic_core's compiled module, and a forked child loads a
copy of it from a second sys.path folder through ctypes); the build record is manifest.json's
``gpu`` table, written as the build writes it. Without a GPU here, no CUDA module can be
loaded: the compiled modules stand in for them in the table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pydantic_core

from patchwheel import manifest
from patchwheel.verify.gpu import environment, imports
from patchwheel.verify.gpu.loaded_kernels import loaded_kernels
from patchwheel.verify.gpu.report import _imports_lines

SCRIPT = """
import ctypes, os, sys
import pydantic_core  # its compiled module is mapped by the import
pid = os.fork()
if pid == 0:
    ctypes.CDLL(sys.argv[1])  # loaded without an import, as torch.ops.load_library does
    os._exit(0)
os.waitpid(pid, 0)
"""


def compiled(package: object) -> Path:
    (path,) = Path(package.__file__).parent.glob("_*.so")  # type: ignore[attr-defined]
    return path


def traced(tmp_path: Path, library: Path, site: Path) -> list[imports.Run]:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    trace = tmp_path / "trace"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(environment.TRACE_DIR), str(site)])
    env[environment.TRACE_VARIABLE] = str(trace)
    proc = subprocess.run(
        [sys.executable, str(script), str(library)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return imports.read(trace)


def test_the_trace_records_mapped_libraries_and_the_session_judges_them(tmp_path: Path) -> None:
    core = compiled(pydantic_core)
    core_rel = core.relative_to(Path(pydantic_core.__file__).parents[1]).as_posix()
    site = tmp_path / "site"  # a second folder on sys.path, as `pip install --target` makes
    extra = site / "fakecuda" / "_k.abi3.so"
    extra.parent.mkdir(parents=True)
    shutil.copyfile(core, extra)
    extra_rel = "fakecuda/_k.abi3.so"

    (run,) = traced(tmp_path, extra, site)
    assert core_rel in run.libraries and extra_rel in run.libraries
    assert not any(lib.startswith(("/", "lib/python")) for lib in run.libraries)

    built = tmp_path / "build"
    built.mkdir()
    table = {
        "archs": ["sm_90", "sm_100"],
        "modules": [
            {"module": core_rel, "sass": ["sm_90a"], "ptx": []},
            {"module": extra_rel, "sass": ["sm_80"], "ptx": ["sm_80"]},
            {"module": "vllm/not_loaded.abi3.so", "sass": ["sm_90"], "ptx": []},
        ],
    }
    data = manifest.Manifest(target="t", wheels=(), gpu=table).to_json()
    manifest.path_in(built).write_text(json.dumps(data))

    hopper = loaded_kernels(built, "sm_90", [run])
    assert hopper["device"] == "sm_90" and hopper["capability"] == "9.0"
    assert hopper["cuda_modules"] == 3
    got = {k["module"]: k["runs_as"] for k in hopper["loaded"]}
    assert got == {core_rel: "sass", extra_rel: "ptx"}
    blackwell = loaded_kernels(built, "sm_100", [run])
    assert {k["module"]: k["runs_as"] for k in blackwell["loaded"]}[core_rel] == "MISSING"

    summary = imports.summary([run], [], {}, [str(tmp_path)])
    summary["kernels"] = hopper
    text = "\n".join(_imports_lines(summary))
    assert f"| {core_rel} | sass | job.py |" in text
    restored = imports.earlier_runs(summary)
    assert restored[0].libraries == run.libraries


def test_without_a_readable_manifest_the_session_says_so(tmp_path: Path) -> None:
    out = loaded_kernels(tmp_path, "sm_90", [])
    assert out["device"] == "sm_90" and "manifest cannot be read" in out["error"]
