"""The GPU session: install, check at tensor parallel 1 and ``--tp``, time, report (see the
package doc); ``run`` prints its outcome, ``main`` is ``python -m patchwheel.verify.gpu``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from patchwheel.errors import VerifyError
from patchwheel.verify.compare import RTOL
from patchwheel.verify.gpu.correctness import check_extraction
from patchwheel.verify.gpu.install import gpu_wheels, installed_packages, prepare_runtime
from patchwheel.verify.gpu.machine import gpu_facts
from patchwheel.verify.gpu.options import GpuOptions, add_arguments, options_from
from patchwheel.verify.gpu.report import GpuReport, write_report
from patchwheel.verify.gpu.throughput import measure_throughput
from patchwheel.verify.install import built_inputs
from patchwheel.verify.plan import VerifyPlan
from patchwheel.workspace import Workspace

DESCRIPTION = "GPU verification: the built wheels on a CUDA machine, checked and timed."


# --------------------------------------------------------------------------- the whole run


def verify_gpu(options: GpuOptions, console: Console | None = None) -> GpuReport:
    """Run the GPU verification; write the report; raise VerifyError on any failure."""
    console = console or Console(stderr=True, soft_wrap=True)
    started = time.monotonic()
    report = GpuReport(
        target=options.manifest_dir.name,
        inputs=built_inputs(options.manifest_dir),
        dtype=options.dtype,
        rtol=RTOL[options.dtype],
        layers=list(VerifyPlan().layer_ids),
    )
    report.gpu = gpu_facts(options.tp)  # no GPU: refuse before writing any report
    try:
        console.print(
            f"GPU: {report.gpu['count']} x {report.gpu['name']} ({report.gpu['sm']}), driver "
            f"{report.gpu['driver']}, CUDA {report.gpu['cuda']}, torch {report.gpu['torch']}"
        )
        wheels = gpu_wheels(options.manifest_dir, options.wheelhouse)
        runtime = prepare_runtime(options, wheels, console)
        report.packages = installed_packages(runtime, wheels)
        console.print(
            "installed "
            + ", ".join(f"{p['distribution']}=={p['version']}" for p in report.packages)
            + " (sha256 and every file checked)"
        )
        for tp in sorted({1, options.tp}):
            result = check_extraction(options, runtime, tp, console)
            report.correctness.append(result)
            write_report(report, options.report_path, started)
            console.print(
                f"tensor parallel {tp}: max abs error per layer "
                + ", ".join(f"{k}: {v:.3g}" for k, v in result["max_abs_error_per_layer"].items())
                + f" ({result['checks']} checks, {len(result['failed'])} failed)"
            )
        failed = [f for r in report.correctness for f in r["failed"]]
        if failed:
            report.status = "mismatch"
            report.error = "extracted hidden states differ from transformers: " + "; ".join(
                failed[:8]
            )
            raise VerifyError(report.error)
        if options.throughput:
            report.throughput = measure_throughput(options, runtime, console)
        report.status = "passed"
    except VerifyError as exc:
        report.error = report.error or str(exc)
        raise
    finally:
        write_report(report, options.report_path, started)
    return report


def run(options: GpuOptions, console: Console) -> int:
    """Run the verification and print its outcome; return the exit status."""
    try:
        verify_gpu(options, console)
    except VerifyError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return exc.exit_status
    console.print(f"[green]verify-gpu passed[/]: {options.report_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m patchwheel.verify.gpu``."""
    parser = argparse.ArgumentParser(prog="patchwheel gpu", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    workspace = Workspace.at(Path.cwd())
    return run(options_from(args, workspace), Console(stderr=True, soft_wrap=True))
