"""Extraction vs vLLM's own ``LLM.generate(max_tokens=1)`` prefill, tokens/s on the same
prompts, model and settings, each side in its own process (``verify/speed.py``).

Sides: ``extraction`` (speculators' generator at its GPU default, compiled with CUDA graphs,
``enforce_eager=False`` passed explicitly), ``vllm-default`` (compiled + CUDA graphs, vLLM's
default), ``vllm-eager``, and with ``--baseline-speculators`` ``extraction-before`` (that wheel
in front of the built one, its own default). Each side gets its own copy of the settings and
records its engine's effective ones. Start-up is the same on every side: cold process start
(the parent's launch) to the first result. The goal: extraction >= 0.95 x compiled default.
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
from patchwheel.verify.gpu.install import Runtime
from patchwheel.verify.gpu.options import GpuOptions
from patchwheel.verify.model import TinyLlamaSpec, make_tiny_llama
from patchwheel.verify.plan import MAX_NUM_SEQS

SPEED_SCRIPT = Path(__file__).parent.parent / "speed.py"
GOAL_RATIO = 0.95
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
        "profile": options.profile,
    }
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
        figures = _side(options, side_runtime, side, {**request, "settings": settings}, name)
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
    if "ratio_vs_default" in out:
        out["goal"] = {
            "min_ratio": GOAL_RATIO,
            "ratio": out["ratio_vs_default"],
            "met": out["ratio_vs_default"] >= GOAL_RATIO,
            "startup_no_slower": sides["extraction"]["startup_s"]
            <= sides["vllm-default"]["startup_s"],
        }
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
    env = {
        **runtime.env,
        **{var: str(caches / sub) for var, sub in CACHE_VARIABLES.items()},
        "PATCHWHEEL_LAUNCHED_AT": repr(time.time()),
    }
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
