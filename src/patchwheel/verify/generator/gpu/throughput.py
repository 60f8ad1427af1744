"""Extraction vs vLLM's own ``LLM.generate(max_tokens=1)`` prefill, tokens/s on the same
prompts, model and settings, each side in its own process (``verify/payloads/speed.py``).

Sides: ``extraction`` (speculators' generator at its GPU default, compiled with CUDA graphs,
``enforce_eager=False`` passed explicitly), ``vllm-default`` (compiled + CUDA graphs, vLLM's
default), ``vllm-eager``, and with ``--baseline-speculators`` ``extraction-before`` (that wheel
in front of the built one, its own default). Each side gets its own copy of the settings and
records its engine's effective ones. Start-up is the same on every side: cold process start
(the parent's launch) to the first result. The goal: extraction >= 0.95 x compiled default.

The user's job, end to end (``end_to_end``): the extraction side's generator then also writes
the prompts' training files the way speculators' offline script does
(``verify/payloads/savejob.py``: batches of 8, ``torch.save`` on 4 threads) to the RAM disk
(``/dev/shm``) and to the machine's real disk (the work dir), beside each disk's write bandwidth
measured here first (``verify/payloads/diskio.py``: large sequential writes with fsync) and the
in-memory rates. Goal: the job on the RAM disk >= 0.9 x compiled default.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from patchwheel.errors import VerifyError
from patchwheel.verify.generator.plan import MAX_NUM_SEQS
from patchwheel.verify.gpu.install import Runtime
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.models.tiny import TinyLlamaSpec, make_tiny_llama
from patchwheel.verify.payloads import diskio, script

SPEED_SCRIPT = script("speed")
GOAL_RATIO = 0.95
END_TO_END_GOAL = 0.9
BANDWIDTH_BYTES = 4 << 30  # each disk's bandwidth: a 4 GiB file, written and fsynced
STARTUP_DEFINITION = (
    "cold process start (the parent's launch of the side's process) to the first result "
    "(the first prompt's generate call returned), the same on every side, each side with "
    "empty compilation caches of its own (vLLM's, inductor's, Triton's)"
)
# Where vLLM, inductor and Triton keep compiled code between processes. A side that ran after
# another would find its kernels compiled already and start faster: each side gets empty ones.
CACHE_VARIABLES = {
    "VLLM_CACHE_ROOT": "vllm",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
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


def bench_model(options: GpuOptions, console: Console) -> tuple[Path, int]:
    """The throughput model (given, or a generated ~1 B-parameter random Llama) and its vocab."""
    if options.model is not None:
        config = json.loads((options.model / "config.json").read_text("utf-8"))
        return options.model, int(config["vocab_size"])
    path = options.work_dir / "bench-model"
    if not (path / "patchwheel-tiny-llama.json").is_file():
        with console.status("generating the benchmark model (random Llama, hidden 2048 x 16)"):
            make_tiny_llama(BENCH_SPEC, path, dtype=options.dtype)
    return path, BENCH_SPEC.vocab_size


def base_settings(options: GpuOptions) -> dict[str, Any]:
    """The settings every side is asked for (each side gets its own copy)."""
    return {
        "dtype": options.dtype,
        "max_model_len": options.prompt_len + 8,
        "max_num_batched_tokens": options.max_num_batched_tokens,
        "max_num_seqs": MAX_NUM_SEQS,  # the generator's own
        "gpu_memory_utilization": 0.8,
        "tensor_parallel_size": options.tp,
    }


def measure_throughput(
    options: GpuOptions, runtime: Runtime, console: Console, baseline: Runtime | None = None
) -> dict[str, Any]:
    """Every side's tokens/s, start-up, effective settings (and profile); ratios; the goal."""
    model_dir, vocab = bench_model(options, console)
    layers = BENCH_SPEC.num_layers if options.model is None else _num_layers(model_dir)
    layer_ids = [2, layers // 2, layers - 3, layers - 1]
    request: dict[str, Any] = {
        "model_dir": str(model_dir),
        "layer_ids": layer_ids,
        "random_prompts": {
            "count": options.prompts,
            "length": options.prompt_len,
            "vocab_size": vocab,
            "seed": 7,
        },
        "repeats": options.repeats,
        "profile": options.profile,
    }
    disks = _disks(options, hidden_bytes=_hidden_bytes(options, layer_ids))
    plan: list[tuple[str, str, dict[str, Any], Runtime]] = [
        ("extraction", "speculators", {"enforce_eager": False}, runtime)
    ]
    for mode in options.baseline_modes:
        plan.append((f"vllm-{mode}", "vllm", {"enforce_eager": mode == "eager"}, runtime))
    if baseline is not None:
        plan.append(("extraction-before", "speculators", {}, baseline))
    sides: dict[str, Any] = {}
    for name, side, extra, side_runtime in plan:
        settings = {**base_settings(options), **extra}
        side_request = {**request, "settings": settings}
        if side == "speculators" and disks:
            side_request["user_job"] = {"dirs": {k: v["files"] for k, v in disks.items()}}
        figures = _side(options, side_runtime, side, side_request, name)
        figures["requested_settings"] = settings
        if figures["unsupported"] and name == "extraction":
            raise VerifyError(
                "speculators' VllmHiddenStatesGenerator does not accept "
                f"{', '.join(figures['unsupported'])}: the extraction would have been timed "
                "in another mode than asked (is the series missing the patch that adds it?)"
            )
        sides[name] = figures
        console.print(
            f"{name}: {figures['tokens_per_s']:,.0f} tokens/s (best of "
            f"{len(figures['seconds'])}), start-up {figures['startup_s']:.1f} s"
        )
    out: dict[str, Any] = {
        "model": str(model_dir) if options.model else "random Llama, hidden 2048, 16 layers",
        "prompts": options.prompts,
        "prompt_len": options.prompt_len,
        "tokens": options.prompts * options.prompt_len,
        "layer_ids": request["layer_ids"],
        "startup_definition": STARTUP_DEFINITION,
        "sides": sides,
    }
    extraction = sides["extraction"]["tokens_per_s"]
    for name, figures in sides.items():
        if name.startswith("vllm-"):
            out[f"ratio_vs_{name.removeprefix('vllm-')}"] = round(
                extraction / figures["tokens_per_s"], 3
            )
    if "extraction-before" in sides:
        out["speedup_vs_before"] = round(extraction / sides["extraction-before"]["tokens_per_s"], 3)
    if disks and "user_job" in sides["extraction"]:
        out["end_to_end"] = end_to_end(sides, disks)
    if "ratio_vs_default" in out:
        out["goal"] = {
            "min_ratio": GOAL_RATIO,
            "ratio": out["ratio_vs_default"],
            "met": out["ratio_vs_default"] >= GOAL_RATIO,
            "startup_no_slower": sides["extraction"]["startup_s"]
            <= sides["vllm-default"]["startup_s"],
        }
    return out


def _hidden_bytes(options: GpuOptions, layer_ids: list[int]) -> int:
    """Bytes of hidden states of one pass (the files' payload)."""
    hidden = BENCH_SPEC.hidden_size
    if options.model is not None:
        config = json.loads((options.model / "config.json").read_text("utf-8"))
        hidden = int(config["hidden_size"])
    itemsize = 4 if options.dtype == "float32" else 2
    return options.prompts * options.prompt_len * len(layer_ids) * hidden * itemsize


def _disks(options: GpuOptions, hidden_bytes: int) -> dict[str, dict[str, Any]]:
    """The RAM disk and the work dir's disk: each one's measured write bandwidth and the
    folder the user's job writes its files to (skipped where a pass would not fit)."""
    places = {
        "ram": diskio.RAM_DISK / f"patchwheel-user-job-{options.work_dir.name}",
        "disk": options.work_dir / "bench" / "user-job-files",
    }
    out = {}
    for label, folder in places.items():
        folder.mkdir(parents=True, exist_ok=True)
        need = max(hidden_bytes, BANDWIDTH_BYTES) * 1.2
        if diskio.free_bytes(folder) < need:
            out[label] = {"skipped": f"{folder}: less than {need / 1e9:.1f} GB free"}
            continue
        figures = diskio.write_bandwidth(folder, BANDWIDTH_BYTES)
        out[label] = {**figures, "files": str(folder)}
    return {k: v for k, v in out.items() if "skipped" not in v}


def end_to_end(sides: dict[str, Any], disks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The user's job against compiled prefill, the in-memory rates and each disk's limit."""
    job = sides["extraction"]["user_job"]
    prefill = (sides.get("vllm-default") or {}).get("tokens_per_s")

    def ratio(rate: float) -> float | None:
        return round(rate / prefill, 3) if prefill else None

    files = {}
    for label, figures in job["files"].items():
        bandwidth = disks[label]["bytes_per_s"]
        files[label] = {
            "tokens_per_s": figures["tokens_per_s"],
            "ratio_vs_default": ratio(figures["tokens_per_s"]),
            "durable_tokens_per_s": figures["durable_tokens_per_s"],
            "bytes_per_s": figures["bytes_per_s"],
            "disk_bytes_per_s": bandwidth,
            "of_disk_bandwidth": round(figures["bytes_per_s"] / bandwidth, 3),
            "save_only_bytes_per_s": figures["save_only"]["bytes_per_s"],
            "bytes_vs_hidden_states": round(figures["bytes_vs_hidden_states"], 4),
            "in_generate_s": figures["in_generate_s"],
            "drain_s": figures["drain_s"],
            "filesystem": disks[label]["filesystem"],
        }
    in_memory = sides["extraction"]["tokens_per_s"]
    batched = job["in_memory_batched"]["tokens_per_s"]
    out: dict[str, Any] = {
        "writer": f"speculators v0.3.0 offline script's way: batches of {job['batch_size']}, "
        f"torch.save on {job['threads']} threads (verify/payloads/savejob.py)",
        "in_memory_tokens_per_s": in_memory,
        "in_memory_ratio_vs_default": ratio(in_memory),
        "in_memory_batched_tokens_per_s": batched,
        "in_memory_batched_ratio_vs_default": ratio(batched),
        "files": files,
        "bandwidth": disks,
    }
    before = (sides.get("extraction-before") or {}).get("user_job")
    if before:
        out["before"] = {
            label: {
                "tokens_per_s": figures["tokens_per_s"],
                "ratio_vs_default": ratio(figures["tokens_per_s"]),
                "save_only_bytes_per_s": figures["save_only"]["bytes_per_s"],
            }
            for label, figures in before["files"].items()
        }
    if "ram" in files and files["ram"]["ratio_vs_default"] is not None:
        got = files["ram"]["ratio_vs_default"]
        out["goal"] = {"min_ratio": END_TO_END_GOAL, "ratio": got, "met": got >= END_TO_END_GOAL}
    return out


def _num_layers(model_dir: Path) -> int:
    config = json.loads((model_dir / "config.json").read_text("utf-8"))
    return int(config["num_hidden_layers"])


def _side(
    options: GpuOptions, runtime: Runtime, side: str, request: dict[str, Any], name: str
) -> dict[str, Any]:
    bench = options.work_dir / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    request_path = bench / f"{name}.request.json"
    request_path.write_text(json.dumps(request), "utf-8")
    out = bench / f"{name}.json"
    out.unlink(missing_ok=True)
    log = bench / f"{name}.log"
    caches = bench / f"{name}.caches"
    shutil.rmtree(caches, ignore_errors=True)
    env = runtime.env_with(
        {
            **{var: str(caches / sub) for var, sub in CACHE_VARIABLES.items()},
            "PATCHWHEEL_LAUNCHED_AT": repr(time.time()),
        }
    )
    with log.open("w") as fh:
        try:
            proc = subprocess.run(
                [runtime.python, str(SPEED_SCRIPT), side, str(request_path), str(out)],
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=env,
                check=False,
                timeout=900,
            )
        except subprocess.TimeoutExpired as exc:
            raise VerifyError(f"timing {name} did not finish in 900 s (log {log})") from exc
    if proc.returncode != 0 or not out.is_file():
        tail = "\n".join(log.read_text("utf-8", "replace").splitlines()[-25:])
        raise VerifyError(f"timing {name} failed (exit {proc.returncode}, log {log}):\n{tail}")
    figures: dict[str, Any] = json.loads(out.read_text("utf-8"))
    return figures
