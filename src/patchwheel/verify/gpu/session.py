"""The GPU session: install (or reuse the install), then the stages this call runs
(``--stages``: correctness per family against both oracles, training, throughput), and the
report (see the package doc); ``run`` prints its outcome, ``main`` is
``python -m patchwheel.verify.gpu``.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from rich.markup import escape

from patchwheel.errors import InvalidNameError, VerifyError
from patchwheel.verify.env.install import built_inputs, built_target
from patchwheel.verify.generator.gpu.correctness import check_family
from patchwheel.verify.generator.gpu.throughput import measure_throughput
from patchwheel.verify.generator.gpu.training import train_draft
from patchwheel.verify.generator.gpu.userjob import failed_record, run_user_job
from patchwheel.verify.gpu import environment, imports
from patchwheel.verify.gpu.install import (
    Runtime,
    gpu_wheels,
    install_baseline,
    installed_packages,
    prepare_runtime,
)
from patchwheel.verify.gpu.loaded_kernels import loaded_kernels
from patchwheel.verify.gpu.machine import gpu_facts
from patchwheel.verify.gpu.options import GpuOptions, add_arguments, options_from
from patchwheel.verify.gpu.report import GpuReport, write_report
from patchwheel.verify.oracles.compare import RTOL
from patchwheel.verify.served.gpu.session import is_served, verify_served_gpu
from patchwheel.workspace import Workspace

DESCRIPTION = "GPU verification: the built wheels on a CUDA machine, checked and timed."
VERSIONS = ("torch", "transformers", "vllm", "speculators", "triton", "flashinfer-python")


# --------------------------------------------------------------------------- the whole run


def verify_gpu(options: GpuOptions, console: Console | None = None) -> GpuReport:
    """Run the stages; write the report after each; raise VerifyError on any failure."""
    console = console or Console(stderr=True, soft_wrap=True)
    started = time.monotonic()
    report = GpuReport(
        target=built_target(options.manifest_dir),
        inputs=built_inputs(options.manifest_dir),
        dtype=options.dtype,
        rtol=RTOL[options.dtype],
        tensor_parallel_size=options.tp,
        runs=[
            {
                "started": datetime.now(UTC).isoformat(timespec="seconds"),
                "stages": list(options.stages),
                "families": list(options.families),
                "profile": options.profile,
                "baseline_speculators": options.baseline_speculators.name
                if options.baseline_speculators
                else None,
            }
        ],
    )
    gpu = gpu_facts(options.tp)  # no GPU: refuse before writing any report
    console.print(
        f"GPU: {gpu['count']} x {gpu['name']} ({gpu['sm']}), driver {gpu['driver']}, "
        f"CUDA {gpu['cuda']}, torch {gpu['torch']}"
    )
    errors: list[str] = []
    try:
        wheels = gpu_wheels(options.manifest_dir, options.wheelhouse)
        runtime = prepare_runtime(options, wheels, console)
        report.packages = installed_packages(runtime, wheels)
        report.machine = {"gpu": gpu, "versions": _versions(runtime)}
        report.environment = _environment(runtime)
        rerun = options.families if "correctness" in options.stages else ()
        report.keep_from(options.report_path, options.stages, rerun)
        console.print(
            "installed "
            + ", ".join(f"{p['distribution']}=={p['version']}" for p in report.packages)
            + " (sha256 and every file checked)"
        )
        # Each stage runs even when an earlier one failed: one call shows everything.
        if "correctness" in options.stages:
            _stage(errors, lambda: _correctness(options, runtime, report, console, started))
        if "training" in options.stages:
            _stage(errors, lambda: _training(options, runtime, report, console, started))
        if "throughput" in options.stages:
            _stage(errors, lambda: _throughput(options, runtime, report, console))
        if "userjob" in options.stages:
            _stage(errors, lambda: _user_job(options, runtime, report, console))
        _stage(errors, lambda: _imports(options, runtime, report, console))
    except VerifyError as exc:  # installing: nothing can run
        errors.append(str(exc))
    except KeyboardInterrupt:  # SIGTERM at a call's limit, or Ctrl-C: never "passed"
        errors.append("interrupted (SIGTERM or Ctrl-C) before this call's stages finished")
        raise
    finally:
        if errors:
            report.error = "; ".join(errors)
        write_report(report, options.report_path, started, options.report_roots())
    if errors:
        raise VerifyError(report.error or "; ".join(errors))
    return report


def _stage(errors: list[str], run: Callable[[], None]) -> None:
    try:
        run()
    except VerifyError as exc:
        errors.append(str(exc))


def _training(
    options: GpuOptions, runtime: Runtime, report: GpuReport, console: Console, started: float
) -> None:
    try:
        report.training = train_draft(options, runtime, console)
    except VerifyError as exc:
        report.training = {"error": str(exc), "passed": False}
        raise
    write_report(report, options.report_path, started, options.report_roots())
    if not report.training["passed"]:
        raise VerifyError(
            "training did not lower the loss (or it is not finite): "
            f"{report.training['loss_before']} -> {report.training['loss_after']}"
        )


def _throughput(options: GpuOptions, runtime: Runtime, report: GpuReport, console: Console) -> None:
    baseline = (
        install_baseline(options, runtime, console)
        if options.baseline_speculators is not None
        else None
    )
    try:
        report.throughput = measure_throughput(options, runtime, console, baseline)
    except VerifyError as exc:
        report.throughput = {"error": str(exc)}
        raise
    goal = report.throughput.get("goal")
    if goal:
        console.print(
            f"extraction / compiled default = {goal['ratio']} "
            f"(goal {goal['min_ratio']}: {'met' if goal['met'] else 'NOT met'})"
        )


def _user_job(options: GpuOptions, runtime: Runtime, report: GpuReport, console: Console) -> None:
    try:
        report.user_job = run_user_job(options, runtime, console)
    except VerifyError as exc:
        report.user_job = failed_record(exc) or {"error": str(exc), "passed": False}
        raise


def _environment(runtime: Runtime) -> dict[str, Any]:
    """What the child processes run with beyond the session's environment, and why."""
    allowed = runtime.allowed
    if allowed is None:
        return {}
    return {
        "user_source": allowed.user.source,
        "user_variables": sorted(allowed.user.variables)
        + (["PYTHONPATH"] if allowed.user.pythonpath_site else []),
        "harness": environment.describe(runtime.env, runtime.base, allowed),
        "user_job": environment.describe(runtime.user_env(), runtime.base, allowed),
        "inherited": environment.inherited(runtime.base),
    }


def _imports(options: GpuOptions, runtime: Runtime, report: GpuReport, console: Console) -> None:
    """This call's import trace: what each run imported; the drop list checked against it."""
    folder = runtime.trace_dir
    if folder is None or not folder.is_dir():
        return
    runs = imports.read(folder)
    dropped = imports.dropped_requirements(options.wheelhouse)
    modules = set().union(*(run.imported for run in runs)) if runs else set()
    provided = imports.distributions(runtime.python, runtime.env, modules)
    # Runs of earlier calls of this report (same build) stay in it, checked again.
    earlier = imports.earlier_runs(report.imports)
    folders = [*list(report.imports.get("trace_dirs") or []), str(folder)]
    for run in earlier:
        provided.update(imports.distributions(runtime.python, runtime.env, run.imported))
    report.imports = imports.summary([*earlier, *runs], dropped, provided, folders)
    sm = str((report.machine.get("gpu") or {}).get("sm", ""))
    report.imports["kernels"] = loaded_kernels(options.manifest_dir, sm, [*earlier, *runs])
    if report.imports["violations"]:
        raise VerifyError("the drop list does not hold: " + "; ".join(report.imports["violations"]))
    kernels = report.imports["kernels"]
    console.print(
        f"import trace: {len(runs)} runs, {len(modules)} top-level modules; none of the "
        f"{len(dropped)} dropped requirements imported; CUDA modules loaded on "
        f"{kernels.get('device')}: "
        + (
            ", ".join(f"{k['module']} ({k['runs_as']})" for k in kernels.get("loaded", []))
            or "none"
        )
    )


def _correctness(
    options: GpuOptions, runtime: Runtime, report: GpuReport, console: Console, started: float
) -> None:
    crashed: list[str] = []
    for family in options.families:
        try:
            result = check_family(options, runtime, family, options.tp, console)
        except VerifyError as exc:  # the other families still run
            crashed.append(f"{family}: {exc}")
            console.print(f"[bold red]{family} could not be checked:[/] {escape(str(exc))}")
            continue
        report.families.append(result)
        write_report(report, options.report_path, started, options.report_roots())
        ora, tra = result["extraction_vs_vllm_oracle"], result["extraction_vs_transformers"]
        console.print(
            f"{family} (TP {options.tp}): vs vLLM oracle "
            + ", ".join(f"{k}: {v:.3g}" for k, v in ora["max_abs_error_per_layer"].items())
            + f" ({ora['bitwise_identical']}/{ora['tensors']} bitwise); vs transformers "
            + ", ".join(f"{k}: {v:.3g}" for k, v in tra["max_abs_error_per_layer"].items())
            + f" ({tra['role']}) -> {'passed' if result['passed'] else 'FAILED'}"
        )
    if crashed:
        raise VerifyError("; ".join(crashed))
    failed = [f for f in report.families if not f["passed"]]
    if failed:
        details = []
        for f in failed:
            for key in ("extraction_vs_vllm_oracle", "extraction_vs_transformers"):
                details += [f"{f['family']} {key}: {d}" for d in f[key]["first_failures"][:2]]
        raise VerifyError("extracted hidden states out of tolerance: " + "; ".join(details[:8]))


def _versions(runtime: Runtime) -> dict[str, str]:
    """Versions of the stack the wheels run on, as that python sees them."""
    code = (
        "import importlib.metadata as m, json\n"
        f"names = {list(VERSIONS)!r}\n"
        "out = {}\n"
        "for n in names:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [runtime.python, "-c", code],
        capture_output=True,
        text=True,
        env=runtime.env,
        check=False,
        timeout=120,
    )
    try:
        found: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        found = {}
    return found


def run(options: GpuOptions, console: Console) -> int:
    """Run the verification of the build's generation and print its outcome; return the exit
    status (a served target's stages: :mod:`patchwheel.verify.served.gpu.session`)."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if is_served(options.manifest_dir):
            status = verify_served_gpu(options, console)["status"]
        else:
            status = verify_gpu(options, console).status
    except VerifyError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return exc.exit_status
    except KeyboardInterrupt as exc:
        # A device call's time limit (``timeout``) or Ctrl-C: the report holds what finished.
        console.print(
            f"[bold red]interrupted[/] ({escape(str(exc) or 'SIGINT')}): {options.report_path} "
            "holds the stages that finished",
            highlight=False,
        )
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    # "incomplete": this call's stages passed and others have no result yet (a split run).
    console.print(f"[green]verify-gpu {status}[/]: {options.report_path}")
    return 0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (``timeout`` at a device call's limit) unwinds like Ctrl-C: servers and sides
    are stopped by their ``with`` blocks and the report is written with what finished."""
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """``python -m patchwheel.verify.gpu``."""
    parser = argparse.ArgumentParser(prog="patchwheel gpu", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    console = Console(stderr=True, soft_wrap=True)
    try:
        options = options_from(args, Workspace.at(Path.cwd()))
    except (VerifyError, InvalidNameError) as exc:  # a --target that is not a name: exit 2
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return exc.exit_status
    return run(options, console)
