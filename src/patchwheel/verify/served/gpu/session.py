"""The GPU session of a served target (speculators >= 0.5; ``generation = "served"``).

:func:`verify_served_gpu` replaces the generator generation's stages when the build's
``manifest.json`` says ``"generation": "served"`` (the GPU machine reads no target.toml):

- ``correctness``: per model family (:mod:`patchwheel.verify.models.families`: Llama, Qwen3,
  Qwen3-MoE, DeepSeek-V3), the user's served path of :mod:`patchwheel.verify.served` on the
  GPU: ``vllm serve`` with ``extract_hidden_states`` and vLLM's ExampleHiddenStatesConnector
  and hs-connectors' FP8 connector side by side (tensor parallel ``--tp``, each server a share
  of the GPU's memory), speculators' ``prepare-data`` and ``generate-offline-data``, every file
  against transformers, its data loader and a draft forward;
- ``training``: the Llama family's files through speculators' own trainer
  (``speculators.train.cli.main``, its fused loss) for ``--train-epochs`` x 3 optimizer steps;
  the loss must be finite and lower at the end;
- ``throughput``: tokens -> files: ``generate-offline-data`` of ``--prompts`` x
  ``--prompt-len`` random tokens (prepared without rendering) against a server with the
  ExampleHiddenStatesConnector on the ~1 B benchmark model, against ``LLM.generate`` prefill
  of the same prompts in the same vLLM (``speed.py``'s vLLM side at its default).

It writes ``verify-gpu.json`` (``generation: "served"``, the built files with their sha256:
what ``publish --require-verified`` reads) and prints a summary. Standard library, rich and
the served path's modules only (they import torch, transformers and safetensors lazily).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel import atomic, manifest
from patchwheel.errors import VerifyError
from patchwheel.portable import portable
from patchwheel.verify.env.install import (
    BuiltWheel,
    built_inputs,
    built_target,
    read_manifest,
    select_wheels,
)
from patchwheel.verify.generator.gpu.throughput import (
    BENCH_SPEC,
    CACHE_VARIABLES,
    _side,
    base_settings,
    bench_model,
)
from patchwheel.verify.gpu.install import Runtime, installed_packages, prepare_runtime
from patchwheel.verify.gpu.machine import gpu_facts
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.gpu.served_summary import judge, summary
from patchwheel.verify.models.tiny import TinyLlamaSpec
from patchwheel.verify.payloads.speed import prompts_of
from patchwheel.verify.served.gpu.compare import generator_figures
from patchwheel.verify.served.launch import serve_argv, venv_serving, vllm_args
from patchwheel.verify.served.plan import DEFAULT_CONNECTORS, ConnectorRun, ServedPlan
from patchwheel.verify.served.results import ServedPathFailed
from patchwheel.verify.served.server import serve
from patchwheel.verify.served.steps import SPECULATORS, run_step
from patchwheel.verify.served.userpath import run_served_path

SERVED_DISTRIBUTIONS = ("speculators", "hs-connectors", "vllm")
# Two servers share one GPU in the correctness stage; one has it in the others.
SHARED_MEMORY = "0.35"
_ENV = {"HF_DATASETS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
_TIMING = re.compile(r"Timing: ([\d.]+)s elapsed")


def is_served(manifest_dir: Path) -> bool:
    """Whether a build's manifest says the served generation (an unreadable one: no, and the
    generator session reports what is wrong with it)."""
    try:
        return manifest.read(manifest.path_in(manifest_dir)).generation == "served"
    except (OSError, manifest.ManifestError):
        return False


def served_wheels(options: GpuOptions) -> list[BuiltWheel]:
    """speculators, hs-connectors and the CUDA vllm of the build, sha256-checked."""
    return select_wheels(
        read_manifest(options.manifest_dir),
        SERVED_DISTRIBUTIONS,
        manifest.path_in(options.manifest_dir),
        variant="cuda",
        directory=options.wheelhouse,
    )


def gpu_plan(options: GpuOptions, family: str, stage: str) -> ServedPlan:
    """The served plan of one stage on the GPU: ``options``' dtype and tensor parallelism,
    vLLM compiled (its default) unless ``--extraction-eager``; ``training`` trains with
    speculators' own (fused) loss, the other stages run its forward with the eager loss."""
    eager = options.extraction_eager
    if stage == "training":
        connectors: tuple[ConnectorRun, ...] = (
            ConnectorRun("example", "file", train=True, enforce_eager=eager),
        )
    else:
        connectors = tuple(
            ConnectorRun(c.name, c.backend, c.train, c.validate, eager) for c in DEFAULT_CONNECTORS
        )
    memory = SHARED_MEMORY if len(connectors) > 1 else "0.8"
    return ServedPlan(
        spec=TinyLlamaSpec(num_layers=8),
        family=family,
        dtype=options.dtype,
        connectors=connectors,
        loss_implementation=None if stage == "training" else "eager",
        train_steps=3 * options.train_epochs if stage == "training" else 0,
        serve_args=("--tensor-parallel-size", str(options.tp), "--gpu-memory-utilization", memory),
        ready_timeout_s=1800.0,
        step_timeout_s=1800.0,
    )


def _env(runtime: Runtime) -> dict[str, str]:
    """The runtime's environment (its PYTHONPATH too, with --use-system-torch), offline."""
    return {**runtime.env, **_ENV}


def _correctness(
    options: GpuOptions, runtime: Runtime, report: dict[str, Any], console: Console
) -> list[str]:
    errors = []
    for family in options.families:
        plan = gpu_plan(options, family, "correctness")
        try:
            result = run_served_path(
                Path(runtime.python), plan, options.work_dir / "served" / family, env=_env(runtime)
            )
        except ServedPathFailed as exc:
            result = exc.result
            errors.append(f"{family}: {exc}")
        report["families"][family] = result.to_json()
        # Each family as it finishes: a call killed at its limit keeps the ones before.
        atomic.write_json(
            options.report_path,
            portable({**report, "status": "incomplete"}, options.report_roots()),
        )
        console.print(f"{family}: served path {result.status}")
    return errors


def _training(
    options: GpuOptions, runtime: Runtime, report: dict[str, Any], console: Console
) -> list[str]:
    plan = gpu_plan(options, "llama", "training")
    try:
        result = run_served_path(
            Path(runtime.python), plan, options.work_dir / "served" / "training", env=_env(runtime)
        )
    except ServedPathFailed as exc:
        report["training"] = exc.result.to_json()
        return [f"training: {exc}"]
    steps = ((result.pipeline or {}).get("train") or {}).get("steps", [])
    losses = [value for value in map(_loss, steps) if value is not None]
    verdict = learned(losses, plan.train_steps)
    report["training"] = {
        "served": result.to_json(),
        "losses": losses,
        "passed": verdict is None,
        **({"judged": verdict} if verdict else {}),
    }
    console.print(f"training: {len(steps)} steps, loss {losses[:1]} -> {losses[-1:]}")
    return [] if verdict is None else [f"training: {verdict}"]


def learned(losses: list[float], planned: int) -> str | None:
    """None when the trainer learned: every planned step logged a finite loss and the mean
    of the last third of the steps is below the mean of the first third (with three or more
    passes over the same few batches, the same batches on both sides); else why not. One
    step's loss against another's compares different batches and says nothing."""
    if len(losses) < planned or planned < 3:
        return f"{len(losses)} of {planned} planned steps logged a loss (3 or more needed)"
    if not all(math.isfinite(v) for v in losses):
        return f"a loss is not finite: {losses}"
    third = len(losses) // 3
    first, last = sum(losses[:third]) / third, sum(losses[-third:]) / third
    if last < first:
        return None
    return f"the last third's mean loss {last:.4f} is not below the first third's {first:.4f}"


def _loss(step: dict[str, Any]) -> float | None:
    """A trainer step's loss: its "loss", else its counted "loss_sum" / "loss_total"."""
    if isinstance(step.get("loss"), float):
        return float(step["loss"])
    total = step.get("loss_total")
    if isinstance(total, float) and total > 0 and isinstance(step.get("loss_sum"), float):
        return float(step["loss_sum"]) / total
    return None


def throughput_plan(options: GpuOptions) -> ServedPlan:
    """The served throughput's server: the generator's layers (throughput.py: 2, L/2, L-3, L-1
    of decoder layers) in vLLM's ids (id k is the output of decoder layer k-1; the launcher
    appends L), the same bytes; the prefill side's token budget per engine step (vLLM's
    server default is 8192 on the H200, the prefill side runs with 16384), so that the ratio
    compares the paths and not their settings."""
    layers = BENCH_SPEC.num_layers
    return ServedPlan(
        spec=BENCH_SPEC,
        target_layer_ids=(3, layers // 2 + 1, layers - 2),
        dtype=options.dtype,
        max_model_len=options.prompt_len + 8,
        seq_length=options.prompt_len + 8,
        concurrency=options.prompts,
        connectors=(ConnectorRun("example", "file", train=True, validate=False),),
        serve_args=(
            "--tensor-parallel-size", str(options.tp),
            "--gpu-memory-utilization", "0.8",
            "--max-num-batched-tokens", str(options.max_num_batched_tokens),
        ),
    )  # fmt: skip


def _throughput(
    options: GpuOptions, runtime: Runtime, report: dict[str, Any], console: Console
) -> list[str]:
    model, vocab = bench_model(options, console)
    random_prompts = {
        "count": options.prompts,
        "length": options.prompt_len,
        "vocab_size": vocab,
        "seed": 7,
    }
    work = options.work_dir / "served" / "throughput"
    work.mkdir(parents=True, exist_ok=True)
    data = work / "tokens.jsonl"
    with data.open("w", encoding="utf-8") as handle:
        for ids in prompts_of({"random_prompts": random_prompts}):
            handle.write(json.dumps({"input_ids": ids, "loss_mask": [1] * len(ids)}) + "\n")
    plan = throughput_plan(options)
    env = _env(runtime)
    python = Path(runtime.python)
    prepared = work / "prepared"
    run_step(
        [str(python), *SPECULATORS, "prepare-data", "--model", str(model), "--data", str(data),
         "--output", str(prepared), "--seq-length", str(plan.seq_length), "--overwrite"],
        work / "prepare-data.log", env=env, timeout_s=1800, what="speculators prepare-data",
    )  # fmt: skip
    figures = _files_rate(
        python, plan, model, prepared, work, env, options.prompts * options.prompt_len
    )
    settings = {**base_settings(options), "enforce_eager": False}
    generator = generator_figures(options, report, settings)
    prefill = (generator or {}).get("llm_generate_prefill")
    if prefill is None:
        request = {
            "model_dir": str(model),
            "random_prompts": random_prompts,
            "repeats": options.repeats,
            "settings": settings,
        }
        side = _side(options, runtime, "vllm", request, "served-vllm-default")
        prefill = {
            "tokens_per_s": side["tokens_per_s"],
            "startup_s": side["startup_s"],
            "settings": settings,
            "measured": "in this call",
        }
    report["throughput"] = {
        "model": "random Llama, hidden 2048, 16 layers",
        "prompts": options.prompts,
        "prompt_len": options.prompt_len,
        "tokens": options.prompts * options.prompt_len,
        "layer_ids": plan.served_layer_ids,
        "decoder_layers": plan.decoder_layers,
        "tokens_to_files": figures,
        "server_args": list(plan.serve_args),
        "llm_generate_prefill": prefill,
        "ratio_vs_prefill": round(figures["tokens_per_s"] / prefill["tokens_per_s"], 3),
        "startup_vs_prefill": {
            "server_ready_s": figures["server_ready_s"],
            "prefill_startup_s": prefill["startup_s"],
        },
        "against_generator": (generator or {}).get("generator"),
        "generator_report_refused": (generator or {}).get("refused"),
    }
    console.print(
        f"tokens -> files {figures['tokens_per_s']:,.0f} tokens/s; LLM.generate prefill "
        f"{prefill['tokens_per_s']:,.0f} tokens/s ({prefill['measured']})"
    )
    return []


def _files_rate(
    python: Path,
    plan: ServedPlan,
    model: Path,
    prepared: Path,
    work: Path,
    env: dict[str, str],
    tokens: int,
) -> dict[str, Any]:
    """generate-offline-data of the prepared tokens against one server: its own timing."""
    run = plan.connectors[0]
    # The files in memory, as the measured user's job wrote them; a fresh folder of our own.
    shm = Path("/dev/shm")  # noqa: S108
    staging = Path(tempfile.mkdtemp(prefix="patchwheel-served-", dir=shm if shm.is_dir() else work))
    # Empty compilation caches of its own, as every side of the generator's throughput stage.
    caches = work / "caches"
    shutil.rmtree(caches, ignore_errors=True)
    env = {**env, **{var: str(caches / sub) for var, sub in CACHE_VARIABLES.items()}}
    serving = venv_serving(python, {run.backend: staging}, env=env, log=work / "connectors.log")
    args = vllm_args(
        run, serving, dtype=plan.dtype, max_model_len=plan.max_model_len, extra=plan.serve_args
    )
    config = serving.kv_transfer_configs[run.backend]

    def argv(port: int) -> list[str]:
        return serve_argv(
            python, model, port=port, layer_ids=plan.served_layer_ids, kv_config=config,
            vllm_args=args,
        )  # fmt: skip

    with serve(
        argv, env=env, log=work / "serve.log", ready_path="/health", timeout_s=1800,
        name="vllm serve (throughput)",
    ) as (_server, port, ready):  # fmt: skip
        log = work / "generate.log"
        wall = run_step(
            [str(python), *SPECULATORS, "generate-offline-data", "--model", str(model),
             "--endpoint", f"http://127.0.0.1:{port}/v1", "--preprocessed-data", str(prepared),
             "--output", str(staging / "files"), "--concurrency", str(plan.concurrency),
             "--fail-on-error"],
            log, env=env, timeout_s=1800, what="speculators generate-offline-data (throughput)",
        )  # fmt: skip
    found = _TIMING.findall(log.read_text(errors="replace"))
    if not found:
        raise VerifyError(f"generate-offline-data printed no timing line ({log})")
    elapsed = float(found[-1])
    shutil.rmtree(staging, ignore_errors=True)  # gigabytes in /dev/shm
    return {
        "tokens_per_s": tokens / elapsed,
        "elapsed_s": elapsed,
        "command_wall_s": round(wall, 2),
        "server_ready_s": round(ready, 2),
    }


def _keep_earlier(report: dict[str, Any], path: Path) -> None:
    """A device that limits each call splits the run: an earlier report of the same build at
    the same path keeps its stages (families, training, throughput) unless this call redoes
    them, and its runs."""
    try:
        earlier = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(earlier, dict) or earlier.get("generation") != "served":
        return
    if earlier.get("inputs") != report["inputs"] or report["inputs"] is None:
        return
    report["families"] = dict(earlier.get("families") or {})
    report["training"] = earlier.get("training")
    report["throughput"] = earlier.get("throughput")
    report["runs"] = [*list(earlier.get("runs") or []), *report["runs"]]


def _write(
    report: dict[str, Any],
    options: GpuOptions,
    errors: list[str],
    started: float,
    *,
    final: bool,
    interrupted: bool = False,
) -> None:
    """The report as it stands: after each stage "incomplete" (a call killed at its limit
    keeps what finished), at the end judged on everything it holds (:func:`judge`)."""
    report["status"] = judge(report, errors, interrupted=interrupted) if final else "incomplete"
    report["error"] = "; ".join(errors) or None
    if interrupted:
        report["runs"][-1]["interrupted"] = True
    report["runs"][-1]["wall_s"] = round(time.monotonic() - started, 1)
    written = portable(report, options.report_roots())
    atomic.write_json(options.report_path, written)
    if final:
        atomic.write_text(options.report_path.with_suffix(".md"), summary(written))


def verify_served_gpu(options: GpuOptions, console: Console) -> dict[str, Any]:
    """The served stages on the GPU; verify-gpu.json written; VerifyError on any failure."""
    started = time.monotonic()
    gpu = gpu_facts(options.tp)  # no GPU: refuse before writing any report
    inputs = built_inputs(options.manifest_dir)
    run: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "stages": list(options.stages),
        "families": list(options.families),
    }
    report: dict[str, Any] = {
        "target": built_target(options.manifest_dir),
        "generation": "served",
        "inputs": inputs,
        "status": "crashed",
        "machine": {"gpu": gpu},
        "packages": [],
        "families": {},
        "training": None,
        "throughput": None,
        "runs": [run],
        "error": None,
    }
    _keep_earlier(report, options.report_path)
    errors: list[str] = []
    interrupted = False
    try:
        wheels = served_wheels(options)
        runtime = prepare_runtime(options, wheels, console)
        report["packages"] = installed_packages(runtime, wheels)
        stages = {"correctness": _correctness, "training": _training, "throughput": _throughput}
        unknown = [stage for stage in options.stages if stage not in stages]
        if unknown:
            raise VerifyError(
                f"--stages {','.join(unknown)}: a served target's stages are "
                f"{', '.join(stages)} (userjob runs speculators 0.3.0's scripts: a generator "
                "target's stage)"
            )
        for stage in options.stages:
            try:
                errors += stages[stage](options, runtime, report, console)
            except VerifyError as exc:  # the other stages still run
                errors.append(f"{stage}: {exc}")
            _write(report, options, errors, started, final=False)
    except VerifyError as exc:
        errors.append(str(exc))
    except KeyboardInterrupt:  # SIGTERM at a call's limit, or Ctrl-C: never "passed"
        interrupted = True
        raise
    finally:
        _write(report, options, errors, started, final=True, interrupted=interrupted)
    if report["status"] == "failed":
        raise VerifyError(
            report["error"] or "a family or the training recorded by an earlier call failed"
        )
    return report
