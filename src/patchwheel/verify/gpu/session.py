"""The GPU session: options, the whole run, the report (see the package doc)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from patchwheel.errors import VerifyError
from patchwheel.verify.compare import RTOL, TensorCheck, max_error_per_layer
from patchwheel.verify.cpu import compare_with_reference, load_extraction
from patchwheel.verify.crash import diagnose, read_failure
from patchwheel.verify.install import (
    BuiltWheel,
    check_installed_files,
    read_manifest,
    select_wheels,
)
from patchwheel.verify.model import TinyLlamaSpec, make_tiny_llama
from patchwheel.verify.plan import VerifyPlan, write_request
from patchwheel.workspace import Workspace

EXTRACT_SCRIPT = Path(__file__).with_name("extract.py")
SPEED_SCRIPT = Path(__file__).with_name("speed.py")
REPORT_NAME = "verify-gpu.json"
DESCRIPTION = "GPU verification: the built wheels on a CUDA machine, checked and timed."
GPU_DISTRIBUTIONS = ("speculators", "vllm")
# Engine processes must not reach out, and vLLM's FlashInfer sampler is optional here.
_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_USE_FLASHINFER_SAMPLER": "0",
    "PYTHONUNBUFFERED": "1",
}
# A model that loads an H200-class GPU: ~1.1 B parameters, Llama layout.
BENCH_SPEC = TinyLlamaSpec(
    seed=1234,
    num_layers=16,
    hidden_size=2048,
    intermediate_size=5632,
    num_heads=16,
    num_kv_heads=8,
    vocab_size=32000,
    initializer_range=0.02,
)


@dataclass(frozen=True)
class GpuOptions:
    """What one GPU verification does."""

    manifest_dir: Path
    work_dir: Path
    report_path: Path
    wheelhouse: Path | None = None
    use_system_torch: bool = False
    model: Path | None = None
    tp: int = 1
    prompts: int = 256
    prompt_len: int = 1024
    dtype: str = "bfloat16"
    repeats: int = 2
    throughput: bool = True
    baseline_modes: tuple[str, ...] = ("eager", "default")
    tp_throughput: bool = True
    max_num_batched_tokens: int = 16384


@dataclass
class Runtime:
    """Where the installed wheels live and how to run a python that sees them."""

    python: str
    env: dict[str, str]
    site: Path


@dataclass
class GpuReport:
    """The content of verify-gpu.json."""

    target: str
    status: str = "crashed"
    gpu: dict[str, Any] = field(default_factory=dict)
    packages: list[dict[str, Any]] = field(default_factory=list)
    dtype: str = "bfloat16"
    rtol: float = 0.0
    layers: list[int] = field(default_factory=list)
    correctness: list[dict[str, Any]] = field(default_factory=list)
    throughput: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    wall_s: float = 0.0
    date: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%d"))

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data."""
        return {
            "schema": 1,
            "kind": "verify-gpu",
            "target": self.target,
            "status": self.status,
            "passed": self.status == "passed",
            "date": self.date,
            "gpu": self.gpu,
            "packages": self.packages,
            "dtype": self.dtype,
            "rtol": self.rtol,
            "layers": self.layers,
            "correctness": self.correctness,
            "throughput": self.throughput,
            "error": self.error,
            "wall_s": round(self.wall_s, 1),
        }


# --------------------------------------------------------------------------- the machine


def gpu_facts(tp: int) -> dict[str, Any]:
    """Name, compute capability, driver and CUDA of the visible GPUs; refuse without one."""
    try:
        import torch
    except ImportError as exc:
        raise VerifyError(
            "no torch in this Python: run `nox -s gpu` with the GPU machine's own python "
            "(or install a CUDA torch); on a CPU machine use `nox -s verify`"
        ) from exc
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise VerifyError(
            "no CUDA GPU is visible (torch.cuda.is_available() is False): `nox -s gpu` needs "
            "one; on a machine without a GPU run `nox -s verify` (CPU extraction) instead"
        )
    count = torch.cuda.device_count()
    if count < tp:
        raise VerifyError(f"--tp {tp} needs {tp} GPUs, this machine shows {count}")
    major, minor = torch.cuda.get_device_capability(0)
    return {
        "name": torch.cuda.get_device_name(0),
        "count": count,
        "compute_capability": f"{major}.{minor}",
        "sm": f"sm_{major}{minor}",
        "memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
        "driver": _driver_version(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }


def _driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


# --------------------------------------------------------------------------- installing


def gpu_wheels(manifest_dir: Path, wheelhouse: Path | None) -> list[BuiltWheel]:
    """The built speculators and vllm (CUDA) wheels, found and sha256-checked."""
    return select_wheels(
        read_manifest(manifest_dir),
        GPU_DISTRIBUTIONS,
        manifest_dir / "manifest.json",
        variant="cuda",
        directory=wheelhouse,
    )


def prepare_runtime(options: GpuOptions, wheels: list[BuiltWheel], console: Console) -> Runtime:
    """Install the wheels (offline from a wheelhouse when given) and check what got installed."""
    work = options.work_dir
    work.mkdir(parents=True, exist_ok=True)
    log = work / "install.log"
    env = {**os.environ, **_ENV}
    if options.use_system_torch:
        site = work / "site"
        python = sys.executable
        target_args = ["--target", str(site), "--upgrade"]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    else:
        venv = work / "venv"
        if not (venv / "bin" / "python").is_file():
            _run([sys.executable, "-m", "venv", str(venv)], log, "create the venv")
        python = str(venv / "bin" / "python")
        site = Path(
            subprocess.run(
                [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        target_args = []
    if options.wheelhouse is not None:
        sources = [
            "--no-index",
            "--no-deps",
            "--find-links",
            str(options.wheelhouse),
            "-r",
            str(options.wheelhouse / "requirements.txt"),
        ]
    else:
        index = options.manifest_dir / "simple"
        sources = ["--extra-index-url", index.as_uri(), *(w.requirement for w in wheels)]
    with console.status("installing the built wheels"):
        _run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--no-compile",
                "--disable-pip-version-check",
                *target_args,
                *sources,
            ],
            log,
            "install the wheels",
        )
    return Runtime(python=python, env=env, site=site)


def installed_packages(runtime: Runtime, wheels: list[BuiltWheel]) -> list[dict[str, Any]]:
    """Each built wheel's record: sha256, and every installed file re-hashed against RECORD."""
    return [
        {
            "distribution": w.distribution,
            "version": w.version,
            "filename": w.filename,
            "sha256": w.sha256,
            "files_checked": check_installed_files(runtime.site, w),
        }
        for w in wheels
    ]


def _run(cmd: list[str], log: Path, what: str, env: dict[str, str] | None = None) -> None:
    with log.open("a", encoding="utf-8") as handle:
        handle.write(f"$ {' '.join(cmd)}\n")
        handle.flush()
        proc = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env, check=False)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text("utf-8", "replace").splitlines()[-15:])
        raise VerifyError(f"could not {what} (exit {proc.returncode}; log {log}):\n{tail}")


# --------------------------------------------------------------------------- correctness


def check_extraction(
    options: GpuOptions, runtime: Runtime, tp: int, console: Console
) -> dict[str, Any]:
    """Extraction at tensor parallel ``tp`` on the tiny model, compared with transformers."""
    plan = VerifyPlan(dtype=options.dtype, gpu_memory_utilization=0.3)
    model_dir = make_tiny_llama(plan.spec, options.work_dir / "model")
    calls = plan.prompts(model_dir)
    out_dir = options.work_dir / f"extract-tp{tp}"
    out_dir.mkdir(parents=True, exist_ok=True)
    request = out_dir / "request.json"
    write_request(plan, model_dir, calls, request)
    data = json.loads(request.read_text("utf-8"))
    data["generator"]["tensor_parallel_size"] = tp
    request.write_text(json.dumps(data), "utf-8")
    log = out_dir / "extract.log"
    started = time.monotonic()
    with console.status(f"extracting on the GPU (tensor parallel {tp})"), log.open("w") as fh:
        proc = subprocess.run(
            [runtime.python, str(EXTRACT_SCRIPT), str(request), str(out_dir)],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=runtime.env,
            check=False,
            timeout=1200,
        )
    wall = time.monotonic() - started
    failure = read_failure(out_dir)
    log_text = log.read_text("utf-8", "replace")
    if failure is not None:
        raise VerifyError(
            f"extraction at tensor parallel {tp} failed: {diagnose(failure, log_text).message(log)}"
        )
    if proc.returncode != 0:
        tail = "\n".join(log_text.strip().splitlines()[-25:])
        raise VerifyError(f"extraction at tensor parallel {tp} exited {proc.returncode}:\n{tail}")
    extraction = load_extraction(out_dir, calls, wall, log)
    checks: list[TensorCheck] = compare_with_reference(plan, model_dir, calls, extraction)
    failures = [c for c in checks if not c.ok]
    return {
        "tensor_parallel_size": tp,
        "calls": [[len(p) for p in prompts] for prompts in calls],
        "max_num_batched_tokens": plan.max_num_batched_tokens,
        "layers": list(plan.layer_ids),
        "max_abs_error_per_layer": {str(k): v for k, v in max_error_per_layer(checks).items()},
        "checks": len(checks),
        "failed": [c.describe() for c in failures[:20]],
        "wall_s": round(wall, 1),
    }


# --------------------------------------------------------------------------- throughput


def bench_model(options: GpuOptions, console: Console) -> tuple[Path, int]:
    """The throughput model (given, or a generated ~1 B-parameter random Llama) and its vocab."""
    if options.model is not None:
        config = json.loads((options.model / "config.json").read_text("utf-8"))
        return options.model, int(config["vocab_size"])
    with console.status("generating the benchmark model (random Llama, hidden 2048, 16 layers)"):
        path = make_tiny_llama(BENCH_SPEC, options.work_dir / "bench-model", dtype=options.dtype)
    return path, BENCH_SPEC.vocab_size


def measure_throughput(options: GpuOptions, runtime: Runtime, console: Console) -> dict[str, Any]:
    """Extraction vs ``LLM.generate(max_tokens=1)`` prefill tokens/s on the same prompts."""
    model_dir, vocab = bench_model(options, console)
    layers = BENCH_SPEC.num_layers if options.model is None else _num_layers(model_dir)
    settings = {
        "dtype": options.dtype,
        "max_model_len": options.prompt_len + 8,
        "max_num_batched_tokens": options.max_num_batched_tokens,
        "max_num_seqs": 32,  # the generator's own MAX_NUM_SEQS
        "gpu_memory_utilization": 0.8,
        "tensor_parallel_size": 1,
    }
    request = {
        "model_dir": str(model_dir),
        "layer_ids": [2, layers // 2, layers - 3, layers - 1],
        "random_prompts": {
            "count": options.prompts,
            "length": options.prompt_len,
            "vocab_size": vocab,
            "seed": 7,
        },
        "repeats": options.repeats,
        "settings": settings,
    }
    out: dict[str, Any] = {
        "model": str(model_dir) if options.model else "random Llama, hidden 2048, 16 layers",
        "prompts": options.prompts,
        "prompt_len": options.prompt_len,
        "tokens": options.prompts * options.prompt_len,
        "settings": settings,
        "layer_ids": request["layer_ids"],
    }
    out["extraction"] = _side(options, runtime, "speculators", request, "extraction", console)
    for mode in options.baseline_modes:
        settings["enforce_eager"] = mode == "eager"
        out[f"vllm_{mode}"] = _side(options, runtime, "vllm", request, f"vllm-{mode}", console)
    for mode in options.baseline_modes:
        base = out[f"vllm_{mode}"]["tokens_per_s"]
        out[f"ratio_vs_{mode}"] = round(out["extraction"]["tokens_per_s"] / base, 3)
    if options.tp > 1 and options.tp_throughput:
        settings["tensor_parallel_size"] = options.tp
        out[f"extraction_tp{options.tp}"] = _side(
            options, runtime, "speculators", request, f"extraction-tp{options.tp}", console
        )
    return out


def _num_layers(model_dir: Path) -> int:
    config = json.loads((model_dir / "config.json").read_text("utf-8"))
    return int(config["num_hidden_layers"])


def _side(
    options: GpuOptions,
    runtime: Runtime,
    side: str,
    request: dict[str, Any],
    name: str,
    console: Console,
) -> dict[str, Any]:
    bench = options.work_dir / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    request_path = bench / f"{name}.request.json"
    request_path.write_text(json.dumps(request), "utf-8")
    out = bench / f"{name}.json"
    log = bench / f"{name}.log"
    with console.status(f"timing {name}"), log.open("w") as fh:
        proc = subprocess.run(
            [runtime.python, str(SPEED_SCRIPT), side, str(request_path), str(out)],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=runtime.env,
            check=False,
            timeout=1800,
        )
    if proc.returncode != 0 or not out.is_file():
        tail = "\n".join(log.read_text("utf-8", "replace").splitlines()[-25:])
        raise VerifyError(f"timing {name} failed (log {log}):\n{tail}")
    figures: dict[str, Any] = json.loads(out.read_text("utf-8"))
    console.print(
        f"{name}: {figures['tokens_per_s']:,.0f} tokens/s "
        f"(best of {len(figures['seconds'])}, start-up {figures['startup_s']:.1f} s)"
    )
    return figures


# --------------------------------------------------------------------------- the whole run


def verify_gpu(options: GpuOptions, console: Console | None = None) -> GpuReport:
    """Run the GPU verification; write the report; raise VerifyError on any failure."""
    console = console or Console(stderr=True, soft_wrap=True)
    started = time.monotonic()
    report = GpuReport(
        target=options.manifest_dir.name,
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
            _write(report, options.report_path, started)
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
        _write(report, options.report_path, started)
    return report


def _write(report: GpuReport, path: Path, started: float) -> None:
    report.wall_s = time.monotonic() - started
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(report.to_json(), indent=2) + "\n", "utf-8")
    os.replace(tmp, path)


def markdown_table(data: dict[str, Any]) -> str:
    """A short Markdown summary of a verify-gpu.json (for the README)."""
    gpu = data["gpu"]
    rows = [
        "| | |",
        "| --- | --- |",
        f"| GPU | {gpu.get('count')} x {gpu.get('name')} ({gpu.get('sm')}), driver "
        f"{gpu.get('driver')}, CUDA {gpu.get('cuda')}, torch {gpu.get('torch')} |",
        "| wheels | "
        + ", ".join(f"{p['distribution']} {p['version']}" for p in data["packages"])
        + " |",
    ]
    for result in data["correctness"]:
        errors = ", ".join(f"{k}: {v:.2g}" for k, v in result["max_abs_error_per_layer"].items())
        rows.append(
            f"| TP {result['tensor_parallel_size']} vs transformers ({data['dtype']}) | "
            f"max abs error per layer {errors}; {result['checks']} tensors, "
            f"{len(result['failed'])} failed |"
        )
    thr = data.get("throughput") or {}
    if thr:
        rows.append(
            f"| throughput ({thr['prompts']} x {thr['prompt_len']} tokens) | extraction "
            f"{thr['extraction']['tokens_per_s']:,.0f} tok/s; "
            + "; ".join(
                f"LLM.generate {m} {thr[f'vllm_{m}']['tokens_per_s']:,.0f} tok/s "
                f"(ratio {thr[f'ratio_vs_{m}']})"
                for m in ("eager", "default")
                if f"vllm_{m}" in thr
            )
            + " |"
        )
    return "\n".join(rows) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``patchwheel gpu`` / ``python -m patchwheel.verify.gpu``."""
    parser.add_argument("--target", help="target name (default: the default target)")
    parser.add_argument("--build-dir", type=Path, default=None, help="default: ./build")
    parser.add_argument("--manifest-dir", type=Path, help="where manifest.json is")
    parser.add_argument("--wheelhouse", type=Path, help="offline wheelhouse (nox -s wheelhouse)")
    parser.add_argument(
        "--use-system-torch",
        action="store_true",
        help="install beside this python's own torch (a folder on PYTHONPATH), not in a venv",
    )
    parser.add_argument("--model", type=Path, help="throughput model (default: generated)")
    parser.add_argument("--tp", type=int, default=1, help="also verify at this TP size")
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--prompt-len", type=int, default=1024)
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(RTOL))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-throughput", action="store_true")
    parser.add_argument(
        "--baselines",
        default="eager,default",
        help="vLLM LLM.generate modes to time: eager (same mode as the extraction) and/or "
        "default (torch.compile + CUDA graphs)",
    )
    parser.add_argument(
        "--no-tp-throughput",
        action="store_true",
        help="time extraction at --tp only for correctness",
    )
    parser.add_argument("--report", type=Path, help="default: build/<target>/verify-gpu.json")
    parser.add_argument("--work-dir", type=Path, help="default: build/.work/<target>/verify-gpu")


def options_from(args: argparse.Namespace, workspace: Workspace) -> GpuOptions:
    """GpuOptions from parsed arguments; paths default to ``workspace`` (``--build-dir`` aside)."""
    target = args.target
    if target is None:
        # Only without --target, so a run that names its target imports nothing of the build
        # side (target.toml's model needs `packaging`).
        from patchwheel.config.targets import default_target_name

        target = default_target_name(workspace.patches)
    if args.build_dir is not None:
        workspace = dataclasses.replace(workspace, build=args.build_dir)
    target_dir = workspace.target_dir(target)
    return GpuOptions(
        manifest_dir=args.manifest_dir or target_dir,
        work_dir=args.work_dir or workspace.work_dir(target, "verify-gpu"),
        report_path=args.report or target_dir / REPORT_NAME,
        wheelhouse=args.wheelhouse,
        use_system_torch=args.use_system_torch,
        model=args.model,
        tp=args.tp,
        prompts=args.prompts,
        prompt_len=args.prompt_len,
        dtype=args.dtype,
        repeats=args.repeats,
        throughput=not args.no_throughput,
        baseline_modes=tuple(m for m in args.baselines.split(",") if m),
        tp_throughput=not args.no_tp_throughput,
    )


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
